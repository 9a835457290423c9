"""The shipped all-MiniLM-L6-v2 weights in our encoder against transformers, on real sentences."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from attention_explorer.models.pretrained import minilm_folder, read_config
from attention_explorer.models.reference import load_reference
from attention_explorer.models.registry import ENGLISH_EXAMPLES
from tests.models.test_convert_bert import assert_parity

SENTENCES = [*ENGLISH_EXAMPLES, "Attention is all you need, said the paper (Vaswani et al., 2017)."]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference():
    return load_reference(minilm_folder())


def test_tokens_match_the_reference_tokenizer(minilm):
    theirs = AutoTokenizer.from_pretrained(str(minilm_folder()), local_files_only=True)
    for text in SENTENCES:
        expected = theirs(text)["input_ids"]
        ours = minilm.tokenizer.encode(text, 512)
        assert list(ours.ids) == expected
        assert list(ours.tokens) == theirs.convert_ids_to_tokens(expected)


@pytest.mark.parametrize("text", SENTENCES)
def test_each_sentence_matches_transformers(minilm, reference, text):
    ids = torch.tensor([minilm.tokenizer.encode(text, 512).ids])
    assert assert_parity(minilm.model, reference, ids, torch.ones_like(ids)) <= 1e-5


def test_padded_batch_matches_transformers(minilm, reference):
    encodings = [minilm.tokenizer.encode(t, 512).ids for t in SENTENCES]
    width = max(map(len, encodings))
    ids = torch.tensor([e + (0,) * (width - len(e)) for e in encodings])
    assert assert_parity(minilm.model, reference, ids, (ids != 0).long()) <= 1e-5


def test_full_length_input_matches_transformers(minilm, reference):
    enc = minilm.tokenizer.encode("a long sentence about attention " * 200, 512)
    assert len(enc) == 512 and enc.truncated > 0
    ids = torch.tensor([enc.ids])
    assert assert_parity(minilm.model, reference, ids, torch.ones_like(ids)) <= 1e-5


def test_config_json_reads_as_minilm_l6():
    config = read_config(minilm_folder())
    assert (config.d_model, config.n_heads, config.d_ff) == (384, 12, 1536)
    assert (config.n_encoder_layers, config.n_decoder_layers) == (6, 0)
    assert (config.vocab_size, config.max_len, config.type_vocab_size) == (30522, 512, 2)
    assert (config.positional, config.activation, config.layer_norm_eps) == ("learned", "gelu", 1e-12)
    assert not config.scale_embeddings and config.embedding_norm and not config.tie_output
