"""Gemma 3 conversion: parity with transformers' eager forward on tiny random Gemma 3 text folders (local layers with a
window shorter than the text, layer-type patterns, heads wider than d_model / heads, the score scale of
query_pre_attn_scalar, QK-norm and sandwich norms with (1 + w) gains far from 1, tied and untied, soft-capped logits),
greedy continuation token for token, the anatomy pages read, and config fields the engine does not run refused by
name."""

from __future__ import annotations

import json

import pytest
import torch

from attention_explorer.models.anatomy import describe
from attention_explorer.models.families import gemma3
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.pretrained import ModelFolderError, load_folder, load_path
from attention_explorer.models.reference import load_reference
from tests.folders import CORPUS, make_gemma3_folder
from tests.parity import assert_greedy_is_generate
from tests.today import assert_close_to_transformers, assert_window_seen

SHAPES = [
    dict(),  # 3 layers: local, local, global; heads 4 x 16 over d_model 48 (64 != 48); tied
    dict(layers=4, pattern=2, window=7, heads=6, kv_heads=1, head_dim=8, tie=False, seed=1),  # untied, one kv head
    dict(layer_types=["full_attention", "sliding_attention"], layers=2, query_pre_attn_scalar=16, softcap=3.0, seed=2),
]


@pytest.mark.parametrize("settings", SHAPES, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_tiny_random_gemma3_matches_transformers(tmp_path, settings):
    folder = make_gemma3_folder(tmp_path / "gemma3", **settings)
    model, tokenizer, family = load_folder(folder)
    assert family.name == "Gemma 3 family" and family.causal and family.norm == "rms"
    reference = load_reference(folder)
    assert type(reference).__name__ == "Gemma3ForCausalLM"
    tied = reference.lm_head.weight.data_ptr() == reference.model.embed_tokens.weight.data_ptr()
    assert tied == settings.get("tie", True) == (model.generator.weight is model.decoder.embeddings.token.weight)
    ids = torch.tensor([tokenizer.encode(" ".join(CORPUS[:3]), 64).ids])  # 38 tokens, windows of 5 and 7
    found = assert_close_to_transformers(model, reference, ids)
    print(f"gemma3 {settings}: {found}")  # the closing note's numbers (pytest -s)
    assert_window_seen(model, ids)
    generator = torch.Generator().manual_seed(settings.get("seed", 0))
    assert_close_to_transformers(model, reference, torch.randint(model.config.vocab_size, (2, 64), generator=generator))


def test_gemma3_anatomy_says_what_the_engine_runs(tmp_path):
    folder = make_gemma3_folder(tmp_path / "gemma3", layers=6, pattern=3, window=5, query_pre_attn_scalar=24)
    model, _, _ = load_folder(folder)
    anatomy = describe(model.config)
    assert [span.kind for span in anatomy.spans] == ["local", "local", "global"] * 2
    assert [span.window for span in anatomy.spans] == [5, 5, None] * 2
    assert [span.rotary_base for span in anatomy.spans] == [10000.0, 10000.0, 1000000.0] * 2
    assert anatomy.positions.bases == (1000000.0, 10000.0) and anatomy.windowed
    assert (anatomy.qk_norm, anatomy.sandwich, anatomy.norm_offset, anatomy.d_head) == (True, True, 1.0, 16)
    assert anatomy.embedding_scale == 48**0.5 and anatomy.query_scale == 24**-0.5 and not anatomy.scale_is_paper
    assert anatomy.ffn.name == "GeGLU" and anatomy.logit_softcap is None
    layer = anatomy.decoder
    assert [sub.post_norm for sub in layer.sublayers] == ["post_norm1", "post_norm3"]
    assert layer.formula("RMSNorm") == ("x = x + RMSNorm(SelfAttention(RMSNorm(x))); x = x + RMSNorm(FFN(RMSNorm(x)))")
    # the engine builds itself from the same description: each layer's window and rotary table
    for span, built in zip(anatomy.spans, model.decoder.layers, strict=True):
        assert built.self_attn.window == span.window and built.self_attn.rotary.base == span.rotary_base
    # the internals keep q and k before and after QK-norm: the norm is each head's own RMSNorm with (1 + w)
    with torch.inference_mode():
        internals = model(torch.tensor([[1, 2, 3, 4]])).decoder.layers[0].self_attn
        norm = model.decoder.layers[0].self_attn.q_norm
        assert torch.equal(norm(internals.q_before_norm), internals.q_unrotated)
        assert internals.q_before_norm.shape == internals.q.shape == (1, 4, 4, 16)
        assert internals.k_before_norm.shape == internals.k.shape and internals.window == 5


@pytest.mark.parametrize("settings", [dict(), dict(layers=4, pattern=2, window=4, tie=False, seed=3)])
def test_greedy_continuation_is_transformers_generate(tmp_path, settings):
    """Prompt and continuation longer than the window: the cached decoder's newest query reads its last w keys."""
    assert_greedy_is_generate(make_gemma3_folder(tmp_path / "gemma3", **settings), CORPUS[1], steps=10)


BAD_FIELDS = [
    ({"attn_logit_softcapping": 50.0}, "attn_logit_softcapping 50.0"),
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention"),
    ({"layer_types": ["sliding_attention", "chunked_attention", "full_attention"]}, "'chunked_attention'"),
    (
        {"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}},
        "rope_type 'linear' in full_attention",
    ),
    ({"hidden_activation": "relu6"}, "hidden_activation 'relu6'"),
]


@pytest.mark.parametrize(("change", "named"), BAD_FIELDS, ids=[named for _, named in BAD_FIELDS])
def test_a_field_the_engine_does_not_run_is_refused_by_name(tmp_path, change, named):
    folder = make_gemma3_folder(tmp_path / "gemma3")
    config = json.loads((folder / "config.json").read_text()) | change
    with pytest.raises(ConversionError, match=named) as raised:
        gemma3.config_from_hf(config)
    assert "\n" not in str(raised.value)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFolderError, match=named):
        load_path(folder)


def test_the_cli_refuses_it_with_exit_2(tmp_path, capsys):
    from attention_explorer.explorer.__main__ import main

    folder = make_gemma3_folder(tmp_path / "gemma3")
    config = json.loads((folder / "config.json").read_text()) | {"attn_logit_softcapping": 50.0}
    (folder / "config.json").write_text(json.dumps(config))
    capsys.readouterr()  # the builder's own progress bars
    code = main(["export", "--model", str(folder), "--text", "the cat sat"])
    err = capsys.readouterr().err
    assert code == 2 and "attn_logit_softcapping 50.0" in err and len(err.strip().splitlines()) == 1
