"""GGUF files of today's families, written here from tiny random folders with gguf's own GGUFWriter as llama.cpp lays
them out (Gemma 3's gains stored as 1 + w, its norms' names, heads of their own width in attention.key_length, the
window in attention.sliding_window): each loads through its family's converter to the very numbers of the folder it
came from, and a Gemma 3 file matches transformers' own GGUF load of it."""

from __future__ import annotations

import pytest
import torch

from attention_explorer.models.anatomy import describe
from attention_explorer.models.pretrained import ModelFolderError, load_path
from attention_explorer.models.reference import load_reference
from tests.folders import CORPUS, make_gemma3_folder, make_mistral_folder, make_qwen3_folder
from tests.gguf_file import write_gguf
from tests.today import assert_close_to_transformers, assert_window_seen

# transformers' Gemma 3 GGUF reader keeps Gemma3TextConfig's defaults for what the file does not say: five local layers
# then a global one, the scores times 256^-1/2, local rotary base 10,000
GEMMA3 = dict(
    layers=6, pattern=6, window=5, query_pre_attn_scalar=256, hidden_size=64, heads=4, head_dim=32, intermediate=96
)
BUILDERS = {
    "gemma3": lambda path: make_gemma3_folder(path, **GEMMA3),
    "qwen3": lambda path: make_qwen3_folder(path),  # llama.cpp's qwen3 has no sliding window
    "mistral": lambda path: make_mistral_folder(path, window=5),
}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A dequantized cache of the test's own."""
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("architecture", sorted(BUILDERS))
def test_a_gguf_file_loads_as_the_folder_it_was_written_from(tmp_path, architecture):
    folder = BUILDERS[architecture](tmp_path / architecture)
    path = write_gguf(folder, tmp_path / f"tiny-{architecture}.gguf", pre="qwen2" if architecture == "qwen3" else None)
    ours, tokenizer, family = load_path(path)
    theirs, _, folder_family = load_path(folder)
    assert family.name == folder_family.name
    assert describe(ours.config) == describe(theirs.config)  # every layer's span, QK-norm, sandwich, (1 + w), ...
    ids = torch.tensor([tokenizer.encode(" ".join(CORPUS[:3]), 64).ids])
    with torch.inference_mode():
        a, b = ours(ids), theirs(ids)
    # float32 weights both ways, the (1 + w) gains stored and taken back exactly as transformers' reader does
    torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=0)
    for mine, other in zip(a.decoder.layers, b.decoder.layers, strict=True):
        torch.testing.assert_close(mine.self_attn.weights, other.self_attn.weights, atol=1e-5, rtol=0)
    if describe(ours.config).windowed:
        assert_window_seen(ours, ids)


def test_a_qwen3_gguf_file_with_a_window_is_refused_by_name(tmp_path):
    folder = make_qwen3_folder(tmp_path / "qwen3", window=5, layer_types=["sliding_attention", "full_attention"])
    with pytest.raises(ModelFolderError, match=r"qwen3\.attention\.sliding_window 5 but not which layers"):
        load_path(write_gguf(folder, tmp_path / "sliding.gguf", pre="qwen2"))


def test_a_gemma3_gguf_file_matches_transformers_own_load_of_it(tmp_path):
    folder = BUILDERS["gemma3"](tmp_path / "gemma3")
    path = write_gguf(folder, tmp_path / "tiny-gemma3.gguf", kind="Q8_0")
    model, tokenizer, family = load_path(path)
    assert family.name == "Gemma 3 family"
    assert [span.kind for span in describe(model.config).spans] == ["local"] * 5 + ["global"]
    reference = load_reference(path)  # transformers dequantizes the same file and takes 1 from each gain
    assert type(reference).__name__ == "Gemma3ForCausalLM"
    ids = torch.tensor([tokenizer.encode(" ".join(CORPUS[:3]), 64).ids])
    found = assert_close_to_transformers(model, reference, ids)
    print(f"tiny gemma3 GGUF (Q8_0): {found}")


def test_a_gemma3_gguf_file_with_scaled_rotary_positions_is_refused_by_name(tmp_path):
    folder = BUILDERS["gemma3"](tmp_path / "gemma3")
    path = write_gguf(
        folder,
        tmp_path / "scaled.gguf",
        edit=lambda writer: (
            writer.add_string("gemma3.rope.scaling.type", "linear"),
            writer.add_rope_scaling_factor(8.0),
        ),
    )
    with pytest.raises(ModelFolderError, match=r"gemma3\.rope\.scaling\.type 'linear'") as raised:
        load_path(path)
    assert "\n" not in str(raised.value)
