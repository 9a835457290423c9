"""Qwen3 (QK-norm on Llama's block, heads of their own width, sliding windows where layer_types asks) and Mistral (a
sliding window on Llama's block), one family file each: parity with transformers' eager forward on tiny random
folders with windows shorter than the text, greedy continuation token for token, and fields the engine does not run
refused by name."""

from __future__ import annotations

import json

import pytest
import torch

from attention_explorer.models.anatomy import describe
from attention_explorer.models.families import mistral, qwen3
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.pretrained import load_folder
from attention_explorer.models.reference import load_reference
from tests.folders import CORPUS, make_mistral_folder, make_qwen3_folder
from tests.parity import assert_greedy_is_generate
from tests.today import assert_close_to_transformers, assert_window_seen

QWEN3 = [
    dict(),  # every layer global; heads 4 x 16 over d_model 48
    dict(window=5, layer_types=["full_attention", "sliding_attention", "sliding_attention"], layers=3, tie=True),
    dict(heads=6, kv_heads=3, head_dim=8, window=9, max_window_layers=1, seed=2),  # layer 1 on slides (older files)
]
MISTRAL = [
    dict(),  # window 6 in both layers, untied
    dict(window=4, heads=6, kv_heads=2, head_dim=12, tie=True, seed=1),
    dict(window=None, seed=2),  # no window: every key, as Llama
]


def _check(folder, settings):
    model, tokenizer, family = load_folder(folder)
    reference = load_reference(folder)
    ids = torch.tensor([tokenizer.encode(" ".join(CORPUS[:3]), 64).ids])  # 38 tokens
    found = assert_close_to_transformers(model, reference, ids)
    print(f"{family.name} {settings}: {found}")  # the closing note's numbers (pytest -s)
    if describe(model.config).windowed:
        assert_window_seen(model, ids)
    generator = torch.Generator().manual_seed(settings.get("seed", 0))
    assert_close_to_transformers(model, reference, torch.randint(model.config.vocab_size, (2, 64), generator=generator))
    return model, family, reference


@pytest.mark.parametrize("settings", QWEN3, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_tiny_random_qwen3_matches_transformers(tmp_path, settings):
    model, family, reference = _check(make_qwen3_folder(tmp_path / "qwen3", **settings), settings)
    assert family.name == "Qwen3 family" and type(reference).__name__ == "Qwen3ForCausalLM"
    anatomy = describe(model.config)
    assert anatomy.qk_norm and not anatomy.sandwich and anatomy.norm_offset == 0.0 and anatomy.ffn.name == "SwiGLU"
    assert anatomy.d_head == settings.get("head_dim", 16) and anatomy.scale_is_paper
    expected = [span.kind for span in anatomy.spans]
    if "layer_types" in settings:
        assert expected == [{"full_attention": "global"}.get(t, "local") for t in settings["layer_types"]]
    elif "max_window_layers" in settings:
        assert expected == ["global", "local"]
    else:
        assert expected == ["global", "global"]


@pytest.mark.parametrize("settings", MISTRAL, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_tiny_random_mistral_matches_transformers(tmp_path, settings):
    model, family, reference = _check(make_mistral_folder(tmp_path / "mistral", **settings), settings)
    assert family.name == "Mistral family" and type(reference).__name__ == "MistralForCausalLM"
    anatomy = describe(model.config)
    window = settings.get("window", 6)
    assert [span.window for span in anatomy.spans] == [window] * model.config.n_decoder_layers
    assert not anatomy.qk_norm and not anatomy.sandwich


def test_greedy_continuation_is_transformers_generate(tmp_path):
    """A continuation past the window: the cached decoder reads each layer's last w keys."""
    assert_greedy_is_generate(make_mistral_folder(tmp_path / "mistral", window=4), CORPUS[1], steps=10)
    folder = make_qwen3_folder(tmp_path / "qwen3", window=4, layer_types=["sliding_attention", "full_attention"])
    assert_greedy_is_generate(folder, CORPUS[1], steps=10)


BAD = [
    (qwen3, {"layer_types": ["full_attention", "chunked_attention"]}, "layer_types has 'chunked_attention'"),
    (qwen3, {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}}, "rope_type 'yarn'"),
    (mistral, {"rope_parameters": {"rope_type": "linear", "factor": 2.0}}, "rope_type 'linear'"),
    (mistral, {"hidden_act": "gelu_10"}, "hidden_act 'gelu_10'"),
    (mistral, {"sliding_window": "wide"}, "sliding_window|'wide'"),
]


@pytest.mark.parametrize(("module", "change", "named"), BAD, ids=[named for _, _, named in BAD])
def test_a_field_the_engine_does_not_run_is_refused_by_name(tmp_path, module, change, named):
    build = make_qwen3_folder if module is qwen3 else make_mistral_folder
    config = json.loads((build(tmp_path / "folder") / "config.json").read_text()) | change
    with pytest.raises(ConversionError, match=named) as raised:
        module.config_from_hf(config)
    assert "\n" not in str(raised.value)
