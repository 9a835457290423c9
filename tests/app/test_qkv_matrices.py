"""The Query/Key/Value page on a tiny random Gemma 3 folder shaped like Gemma 3 270M's attention (d_model 640, heads of
256, one key/value head): W^Q, W^K, W^V drawn as block means of the folder's own weights (its safetensors, checked
against numpy), the block said, the chart under an overview's size; every entry, bit for bit, when asked."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures import walkthrough
from attention_explorer.models import registry
from tests.app import new_app
from tests.explorer.test_matrix_blocks import assert_block_means
from tests.figdata import array
from tests.folders import make_gemma3_folder

TEXT = "the cat sat on the mat because it was tired"
D_MODEL, D_HEAD = 640, 256
LAYER, HEAD = 1, 2  # the second layer's third query head: key/value head 1 of 1


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_gemma3_folder(
        tmp_path_factory.mktemp("gemma3") / "g",
        hidden_size=D_MODEL,
        head_dim=D_HEAD,
        heads=4,
        kv_heads=1,
        layers=2,
        intermediate=32,
        pattern=2,
    )


def own_weights(folder) -> list[np.ndarray]:
    """The folder's W^Q of HEAD and its key/value head's W^K, W^V as (d_model, d_head): nn.Linear rows, transposed."""
    tensors = load_file(str(folder / "model.safetensors"))
    prefix = f"model.layers.{LAYER}.self_attn"
    q = tensors[f"{prefix}.q_proj.weight"][HEAD * D_HEAD : (HEAD + 1) * D_HEAD].T
    return [q, tensors[f"{prefix}.k_proj.weight"].T, tensors[f"{prefix}.v_proj.weight"].T]


def opened(monkeypatch, folder):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"wide-gemma3={folder}"}))
    at = new_app("query_key_value")
    at.query_params["model"] = "folder:wide-gemma3"
    at.query_params["text"] = TEXT
    at.run()
    at.session_state[state.FOCUS_LAYER], at.session_state[state.FOCUS_HEAD] = LAYER, HEAD
    at.run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    return at


def matrices_chart(at) -> tuple[dict, int]:
    (chart,) = [c for c in at.get("plotly_chart") if c.key == "qkv_matrices"]
    return json.loads(chart.proto.spec), len(chart.proto.spec)


def test_wide_heads_are_drawn_as_block_means_of_the_models_own_weights(monkeypatch, folder):
    at = opened(monkeypatch, folder)
    figure, sent = matrices_chart(at)
    heat = [t for t in figure["data"] if t["type"] == "heatmap"]
    for trace, matrix in zip(heat, own_weights(folder), strict=True):
        assert matrix.shape == (D_MODEL, D_HEAD)
        assert_block_means(np.asarray(array(trace["z"])), matrix, 8, 1)
    title = figure["layout"]["title"]["text"]
    assert "640 rows (input dimensions) x 256 columns" in title
    assert "each cell the mean of 8 entries: 8 input dimensions x one head dimension" in title
    captions = " ".join(c.value for c in at.caption)
    assert "Drawn as block means, each cell the mean of 8 entries" in captions
    # 3 x 80 x 256 cells: within an overview's budget, and an eighth of the 2.8 MB the entries were
    assert sum(np.asarray(array(t["z"])).size for t in heat) <= walkthrough.MATRIX_CELLS and sent < 0.45e6
    toggle = at.toggle(key="qkv_matrices_every")
    assert "491,520 numbers, about 2.8 MB" in toggle.label
    toggle.set_value(True).run()
    assert not at.exception
    figure, sent = matrices_chart(at)
    for trace, matrix in zip((t for t in figure["data"] if t["type"] == "heatmap"), own_weights(folder), strict=True):
        np.testing.assert_array_equal(np.asarray(array(trace["z"])), matrix)  # every entry, the folder's own
    assert "mean" not in figure["layout"]["title"]["text"] and sent > 2.5e6
    assert "Drawn as block means" not in " ".join(c.value for c in at.caption)
