"""What a family's descriptor says of its tokenizer (issue 43, item 4): its kind, its word marks and its marker tokens
by role, read from the family's own files, so that pages never tell a tokenizer by how its tokens are spelt."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from attention_explorer.models.families import descriptor, llama
from attention_explorer.models.pretrained import load_path, read_config
from attention_explorer.models.tokenize import ByteLevelTokenizer
from tests.folders import END, make_llama_folder
from tests.gguf_file import write_gguf


def roles(family: descriptor.Family) -> tuple[str, str, str, str]:
    return family.start_token, family.end_token, family.pad_token, family.unknown_token


def test_wordpiece_names_the_markers_it_puts_around_every_text(minilm):
    family = minilm.family
    assert (family.tokenizer, family.continuation, family.word_start) == (descriptor.WORDPIECE, "##", "")
    assert roles(family) == ("[CLS]", "[SEP]", "[PAD]", "[UNK]")
    tokens = minilm.tokenizer.encode("The cat sat", 16).tokens
    assert (tokens[0], tokens[-1]) == (family.start_token, family.end_token)
    assert minilm.tokenizer.token_to_id(family.pad_token) == minilm.tokenizer.pad_id


def test_a_toy_tasks_word_list_names_where_the_decoder_starts_and_stops(translate):
    family = translate.family
    assert (family.tokenizer, family.word_start, family.continuation) == (descriptor.WORD_LIST, "", "")
    assert roles(family) == ("<bos>", "<eos>", "<pad>", "")  # an unknown word is refused, never a token
    target = translate.target_vocabulary
    assert (target.id_to_token(translate.bos_id), target.id_to_token(translate.eos_id)) == roles(family)[:2]


def test_the_papers_random_model_starts_and_ends_its_decoder_with_wordpieces_markers(paper_random):
    vocabulary = paper_random.target_vocabulary
    marks = (vocabulary.id_to_token(paper_random.bos_id), vocabulary.id_to_token(paper_random.eos_id))
    assert paper_random.family.tokenizer == descriptor.WORDPIECE
    assert (paper_random.family.start_token, paper_random.family.end_token) == marks == ("[CLS]", "[SEP]")


def test_a_gpt2_folder_names_endoftext_as_its_config_does(gpt2_folder):
    _, _, family = load_path(gpt2_folder)
    assert (family.tokenizer, family.word_start, family.continuation) == (descriptor.BYTE_BPE, "Ġ", "")
    assert roles(family) == (END, END, "", "")  # no padding; byte merges spell any text, so nothing is unknown


def _with_ids(folder, **ids):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **ids}))
    return folder


def test_a_llama_folders_roles_are_those_its_config_names_by_id(tmp_path):
    folder = make_llama_folder(tmp_path / "llama")
    _, tokenizer, family = load_path(folder)
    assert family.tokenizer == descriptor.BYTE_BPE and roles(family) == (END, END, "", "")
    the, cat, dog = (tokenizer.token_to_id(t) for t in ("Ġthe", "Ġcat", "Ġdog"))
    _with_ids(folder, bos_token_id=the, eos_token_id=[cat, the], pad_token_id=dog)  # Llama 3 lists several ends
    assert roles(load_path(folder)[2]) == ("Ġthe", "Ġcat", "Ġdog", "")
    # where config.json names none, none is guessed from GPT-2's names (a Llama vocabulary may hold <|endoftext|> too)
    _with_ids(folder, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    assert roles(load_path(folder)[2]) == ("", "", "", "")
    _with_ids(folder, bos_token_id=10**6)  # an id past the vocabulary names nothing
    assert load_path(folder)[2].start_token == ""


def test_a_gguf_files_roles_reach_the_descriptor_and_its_cached_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))
    path = write_gguf(make_llama_folder(tmp_path / "qwen2", family="qwen2"), tmp_path / "tiny.gguf")
    first = load_path(path)[2]
    assert first.name == "Qwen2 family" and first.tokenizer == descriptor.BYTE_BPE
    assert roles(first) == (END, END, "", "")
    assert load_path(path)[2] == first  # read back from the dequantized cache's folder: the same descriptor


def test_a_sentencepiece_vocabulary_is_named_by_how_it_spells_a_words_start(tmp_path):
    tokens = ["<unk>", "<s>", "</s>", "▁the", "▁cat", "▁sat", "t", "h", "e", "▁"]
    tokenizer = ByteLevelTokenizer.from_vocabulary(tokens, [], [0, 1, 2])
    config = replace(read_config(make_llama_folder(tmp_path / "llama")), vocab_size=len(tokens))
    family = llama.family(config, tokenizer, {"bos_token_id": 1, "eos_token_id": 2})
    assert (family.tokenizer, family.word_start) == (descriptor.SENTENCEPIECE, "▁")
    assert family.specials == ("<unk>", "<s>", "</s>")
    assert roles(family) == ("<s>", "</s>", "", "")
    assert family.spelling.readable("▁cat") == "␣cat"


@pytest.mark.slow
def test_smollm2_names_its_chat_markers(smollm2):
    family = smollm2.family
    assert (family.tokenizer, family.word_start) == (descriptor.BYTE_BPE, "Ġ")
    # the GGUF file's tokenizer.ggml.bos_token_id, eos_token_id and padding_token_id (1, 2, 2)
    assert roles(family) == ("<|im_start|>", "<|im_end|>", "<|im_end|>", "")
