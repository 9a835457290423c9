"""The window in words and on the map, per family (tiny Gemma 3, Qwen3 and Mistral folders, text longer than their
5-key windows): the Overview and the model view name which layers are local and which global with the model's own
window; the attention heatmap says what the picked layer sees and greys what its window hides, and a model without
local layers says none of it."""

from __future__ import annotations

import json
import re

import pytest

from attention_explorer.models import registry
from tests.app import new_app
from tests.folders import make_gemma3_folder, make_mistral_folder, make_qwen3_folder

TEXT = "the cat sat on the mat because it was tired and the dog sat on the rug"  # longer than every window
BUILDERS = {  # each folder and its layers' windows (None: global)
    "gemma3": (lambda path: make_gemma3_folder(path, window=5, layers=3, pattern=3), (5, 5, None)),
    "qwen3": (
        lambda path: make_qwen3_folder(path, window=5, layer_types=["sliding_attention", "full_attention"]),
        (5, None),
    ),
    "qwen3-global": (lambda path: make_qwen3_folder(path), (None, None)),
    "mistral": (lambda path: make_mistral_folder(path, window=5), (5, 5)),
}
SUMMARY = {
    "gemma3": "Layers 1-2 are local: each token sees at most the 5 keys before it, itself included (a sliding window)."
    " Layer 3 is global: each token sees every key before it, as in the paper.",
    "qwen3": "Layer 1 is local: each token sees at most the 5 keys before it, itself included (a sliding window). "
    "Layer 2 is global: each token sees every key before it, as in the paper.",
    "mistral": "Layers 1-2 are local: each token sees at most the 5 keys before it, itself included (a sliding "
    "window).",
}


def _open(tmp_path, monkeypatch, family: str, page: str):
    build, _ = BUILDERS[family]
    folder = build(tmp_path / family)
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-{family}={folder}"}))
    at = new_app(page)
    at.query_params["model"] = f"folder:tiny-{family}"  # one key a family: the app caches models by key
    at.query_params["text"] = TEXT
    at.run()
    assert not at.exception and not at.error, (family, page, at.exception, [e.value for e in at.error])
    return at


def _said(at) -> str:
    return " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_the_model_view_and_overview_name_each_layer_local_or_global(tmp_path, monkeypatch, family):
    windows = BUILDERS[family][1]
    for page in ("overview", "model_view"):
        said = _said(_open(tmp_path / page, monkeypatch, family, page))
        if family in SUMMARY:
            assert SUMMARY[family] in said, (family, page)
        else:
            assert not re.search(r"(is|are) local|sliding window", said), (family, page)
    at = _open(tmp_path / "grid", monkeypatch, family, "model_view")
    grid = json.loads(at.get("plotly_chart")[0].proto.spec)
    ticks = grid["layout"]["yaxis"]["ticktext"]
    drawn = [int(re.match(r"layer (\d+)", tick)[1]) for tick in ticks]  # a deep stack shows a window of layers
    assert drawn and drawn == list(range(drawn[0], drawn[0] + len(drawn)))
    if any(w is not None for w in windows):
        assert ticks == [f"layer {n} ({'global' if windows[n - 1] is None else 'local'})" for n in drawn]
    else:
        assert ticks == [f"layer {n}" for n in drawn]


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_the_heatmap_page_says_and_draws_the_picked_layers_window(tmp_path, monkeypatch, family):
    windows = BUILDERS[family][1]
    at = _open(tmp_path, monkeypatch, family, "attention")
    said = _said(at)
    named = re.findall(r"Layer (\d+) is (local|global)", said)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    greyed = any(trace.get("name") == "outside the window" for trace in spec["data"])
    if all(w is None for w in windows):
        assert not named and not greyed
        return
    ((number, kind),) = named
    window = windows[int(number) - 1]
    assert kind == ("global" if window is None else "local")
    assert greyed == (window is not None)
    if window is not None:
        assert f"at most the {window} keys before it" in said and "band 5 keys wide" in said


@pytest.mark.parametrize("family", ["gemma3", "qwen3-global"])
def test_step_11_counts_local_layers_with_their_window(tmp_path, monkeypatch, family):
    from tests.app import reveal

    at = reveal(_open(tmp_path, monkeypatch, family, "why_attention"), "why_predict")
    assert not at.exception and not at.error
    said = " ".join(i.value for i in at.info).replace("\\", "")  # markdown_literal's escapes
    if family == "gemma3":
        assert "Layers 1-2 of this model are local: each query scores at most w = 5 keys" in said
        n, count = re.search(r"n·min\(n, w\)·d = (\d+)·5·48 = ([\d,]+) operations", said).groups()
        assert int(n) > 5 and count == f"{int(n) * 5 * 48:,}"
    else:
        assert "local" not in said


def test_positional_encoding_names_both_rotary_bases_and_draws_layer_1s(tmp_path, monkeypatch):
    import numpy as np

    at = _open(tmp_path, monkeypatch, "gemma3", "positional")
    said = _said(at).replace("\\\\", "")
    assert "(the paper has one, 10000): 1,000,000 in its global layers, 10,000 in its local" in said
    assert "These curves are layer 1's, a local layer (base 10,000). The global layers turn with base 1,000,000" in said
    # the periods said for the global layers: from layer 3's (a global layer's) own rotary table
    loaded = registry.load("folder:tiny-gemma3")
    table = loaded.model.decoder.layers[2].self_attn.rotary
    theta = np.arctan2(table.sin[1].numpy(), table.cos[1].numpy())
    pair, period = re.search(r"base 1,000,000: pair 0 .*?, pair (\d+) every ([\d,]+)", said).groups()
    assert period == f"{2 * np.pi / theta[int(pair)]:,.0f}"


@pytest.mark.parametrize("family", ["gemma3", "mistral"])
def test_qkv_shows_qk_norm_where_the_model_has_it(tmp_path, monkeypatch, family):
    at = _open(tmp_path, monkeypatch, family, "qkv")
    said = _said(at)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    titles = json.dumps([c["layout"].get("title") for c in charts])
    if family == "gemma3":
        assert "QK-norm: W^Q and W^K write q and k, then each head's q and each key go through an RMSNorm" in said
        assert "q before its norm" in titles and "K before its norm" in titles
    else:
        assert "QK-norm" not in said and "before its norm" not in titles


@pytest.mark.parametrize("family", ["gemma3", "mistral"])
def test_add_and_norm_shows_the_norm_after_each_sublayer_where_there_is_one(tmp_path, monkeypatch, family):
    said = _said(_open(tmp_path, monkeypatch, family, "add_norm"))
    if family == "gemma3":
        assert "x + RMSNorm(Sublayer(RMSNorm(x)))" in said and "sandwich norms" in said
        assert "(GeGLU)" in said and "through GELU" in said and "1 + w" in said and "SwiGLU" not in said
    else:
        assert "x + Sublayer(RMSNorm(x))" in said and "sandwich" not in said
        assert "(SwiGLU)" in said and "through SiLU" in said
