"""The user's own GGUF file: tiny Llama and Qwen2 files written here with gguf's own GGUFWriter in each storage type
the engine reads, loaded by models.pretrained.load_path and by transformers' own GGUF loader, equal on every attention
weight, hidden state and next token; everything else is one line naming what the file holds and what is supported,
and writes nothing to the dequantized cache."""

from __future__ import annotations

import gguf as gguf_package
import numpy as np
import pytest
import torch

from attention_explorer.models import gguf, registry
from attention_explorer.models.pretrained import ModelFolderError, load_folder, load_path
from attention_explorer.models.reference import load_reference
from tests.folders import CORPUS, make_llama_folder
from tests.gguf_file import write_gguf
from tests.parity import assert_parity

# rows of 32 weights (Q8_0, Q4_0's blocks) everywhere; K-quants' blocks are 256 weights
SMALL = dict(hidden_size=64, heads=4, kv_heads=2, intermediate=96, layers=2)
WIDE = dict(hidden_size=256, heads=4, kv_heads=2, intermediate=256, layers=1)
CASES = [
    ("llama", "F16", SMALL),
    ("llama", "Q8_0", SMALL),
    ("qwen2", "F16", SMALL),
    ("qwen2", "Q8_0", SMALL),
    ("llama", "BF16", SMALL),
    ("llama", "Q4_0", SMALL),
    ("qwen2", "Q4_1", SMALL),
    ("llama", "Q4_K", WIDE),
    ("qwen2", "Q5_K", WIDE),
    ("llama", "Q6_K", WIDE),
]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty dequantized cache of the test's own."""
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def written(cache) -> list:
    return sorted(cache.iterdir()) if cache.exists() else []


@pytest.mark.parametrize(("family", "kind", "shape"), CASES, ids=[f"{f}-{k}" for f, k, _ in CASES])
def test_a_gguf_file_matches_transformers_own_load_of_it(tmp_path, cache, family, kind, shape):
    folder = make_llama_folder(tmp_path / family, family=family, **shape)
    path = write_gguf(folder, tmp_path / f"tiny-{kind}.gguf", kind=kind, pre="qwen2" if family == "qwen2" else None)
    stored = {t.tensor_type.name for t in gguf_package.GGUFReader(str(path)).tensors}
    assert stored == {"F32", kind}  # norms (and Qwen2's biases) in F32, as llama.cpp keeps them; every matrix in kind
    model, tokenizer, described = load_path(path)
    assert described.name == f"{family.capitalize()} family" and model.config.key_value_heads == 2
    reference = load_reference(path)  # transformers dequantizes the same file with the same gguf.quants
    # Both sides compute in float32 from the same dequantized numbers, in the same order of operations: the bound is
    # the one every decoder family's parity uses (1e-5: a few float32 epsilons, 1.2e-7, times the sums of at most
    # 256 products in a row), far under the 1e-4 asked for; the differences measured are exactly 0.
    ids = torch.tensor([tokenizer.encode(" ".join(CORPUS[:3]), 64).ids])
    assert_parity(model, reference, ids, atol=1e-5)
    ids = torch.randint(model.config.vocab_size, (2, 64), generator=torch.Generator().manual_seed(0))
    assert_parity(model, reference, ids, atol=1e-5)
    if kind not in ("F16", "BF16"):  # the quantized numbers were read, not the folder's: they differ from them
        original, _, _ = load_folder(folder)
        theirs = original.decoder.layers[0].self_attn.w_v.weight
        assert not torch.allclose(model.decoder.layers[0].self_attn.w_v.weight, theirs, atol=1e-4)
    assert len(written(cache)) == 1  # and kept, dequantized, for the next process


def test_qwen2_files_split_words_as_qwen2_does(tmp_path, cache):
    """tokenizer.ggml.pre "qwen2": every digit its own word (GPT-2's split keeps 2024 whole), as transformers builds
    the same file's tokenizer."""
    from transformers import AutoTokenizer

    folder = make_llama_folder(tmp_path / "qwen2", family="qwen2", **SMALL)
    path = write_gguf(folder, tmp_path / "qwen2.gguf", kind="F16", pre="qwen2")
    _, tokenizer, _ = load_path(path)
    words = [w for w, _ in tokenizer._tokenizer.pre_tokenizer.pre_tokenize_str("in 2024 (the cat)")]
    assert words == ["in", "Ġ", "2", "0", "2", "4", "Ġ(", "the", "Ġcat", ")"]
    theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in (*CORPUS, "in 2024 (the cat) sat: 3 dogs' mats!"):
        assert list(tokenizer.encode(text, 64).ids) == theirs(text).input_ids, text


def _scaled(writer):
    writer.add_rope_scaling_type(gguf_package.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(4.0)


def _frequencies(writer):
    writer.add_tensor("rope_freqs.weight", np.ones(8, np.float32))


def _sentencepiece(writer):
    writer.add_tokenizer_model("llama")


def _experts(writer):
    writer.add_expert_count(8)


def _partial_rotary(writer):
    writer.add_rope_dimension_count(8)


def _fused_qkv(writer):
    writer.add_tensor("blk.0.attn_qkv.weight", np.ones((4, 64), np.float32))


REFUSED = [
    (dict(architecture="phi3"), r"holds a 'phi3' model; the engine reads GGUF files of the llama and qwen2"),
    (dict(edit=_scaled), r"scales its rotary positions \(llama.rope.scaling.type 'yarn', factor 4.0\); the engine"),
    (dict(edit=_frequencies), r"scales its rotary positions \(a rope_freqs.weight table"),
    (dict(edit=_partial_rotary), r"turns 8 of each head's 16 dimensions"),
    (dict(edit=_experts), r"is a mixture of 8 experts \(llama.expert_count\)"),
    (dict(edit=_fused_qkv), r"holds a tensor the Llama family does not have: blk.0.attn_qkv.weight"),
    (dict(kinds={"output_norm.weight": "F64"}), r"stores output_norm.weight as F64, which gguf cannot dequantize \(it"),
    (dict(tokenizer=False), r"has no tokenizer \(no tokenizer.ggml.model\)"),
    (dict(tokenizer=False, edit=_sentencepiece), r"tokenizer is 'llama' \(tokenizer.ggml.model\); the engine reads"),
    (dict(pre="llama-bpe"), r"pre-tokenizer 'llama-bpe' \(tokenizer.ggml.pre\) is not supported \(default, gpt2"),
]


@pytest.mark.parametrize(("change", "named"), REFUSED, ids=[n.split("(")[0][:40] for _, n in REFUSED])
def test_a_file_the_engine_cannot_run_is_one_line_and_writes_nothing(tmp_path, cache, change, named):
    path = write_gguf(make_llama_folder(tmp_path / "llama", **SMALL), tmp_path / "tiny.gguf", **change)
    with pytest.raises(ModelFolderError, match=named) as refused:
        load_path(path)
    assert "\n" not in str(refused.value) and str(path) in str(refused.value)
    assert written(cache) == []


def test_a_truncated_or_foreign_file_is_named(tmp_path, cache):
    path = write_gguf(make_llama_folder(tmp_path / "llama", **SMALL), tmp_path / "tiny.gguf", kind="Q8_0")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ModelFolderError, match=r"cannot read .*cut.gguf as GGUF"):
        load_path(cut)
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    with pytest.raises(ModelFolderError, match=r"notes.txt is neither a model folder nor a .gguf file"):
        load_path(text)
    with pytest.raises(ModelFolderError, match=r"no model folder at .*nowhere"):
        load_path(tmp_path / "nowhere.gguf")
    assert written(cache) == []


def test_every_type_gguf_dequantizes_is_read():
    readable = gguf.dequantizable()
    for kind in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K"):
        assert kind in readable
    assert "F64" not in readable and "I8" not in readable  # not weights gguf.quants turns into floats


def test_the_environment_and_the_api_take_a_gguf_path(tmp_path, cache, monkeypatch):
    path = write_gguf(make_llama_folder(tmp_path / "llama", **SMALL), tmp_path / "mine.gguf", kind="Q8_0")
    found = registry.catalogue({registry.FOLDERS_ENV: f"mine={path}"})
    spec = found["folder:mine"]
    assert (spec.title, spec.weights, spec.source) == ("mine (local file)", "folder", str(path))
    monkeypatch.setattr(registry, "MODELS", found)
    loaded = registry.load("folder:mine")
    assert loaded.family.name == "Llama family" and loaded.family.origin == "from a folder"
    again = registry.from_path(path)
    assert again.key == "folder:mine"
    assert again.tokenizer.encode(CORPUS[0], 64) == loaded.tokenizer.encode(CORPUS[0], 64)
    ours, theirs = loaded.model.state_dict(), again.model.state_dict()  # the second read the cache: the same numbers
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    with pytest.raises(registry.ModelLoadError, match=r"nowhere \(local folder\) could not be loaded: no model folder"):
        registry.from_path(tmp_path / "nowhere")
