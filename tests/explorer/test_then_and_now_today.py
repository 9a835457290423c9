"""Then and now, true for today's attention (tiny Gemma 3, Qwen3 and Mistral folders): each line names the window, the
local and global layers, QK-norm, the two rotary bases, sandwich norms and GeGLU exactly where the model has them, from
its anatomy, never its key."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.lesson.then_and_now import now
from attention_explorer.models import registry
from tests.folders import make_gemma3_folder, make_mistral_folder, make_qwen3_folder

BUILDERS = {
    "gemma3": lambda path: make_gemma3_folder(path, window=5, layers=3, pattern=3, local_base=10000.0),
    "qwen3": lambda path: make_qwen3_folder(path),
    "mistral": lambda path: make_mistral_folder(path, window=6),
}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def loaded(request, tmp_path_factory):
    folder = BUILDERS[request.param](tmp_path_factory.mktemp(request.param) / "m")
    return request.param, registry.from_path(folder, request.param)


def test_each_line_says_what_this_model_has(loaded):
    family, model = loaded
    said = {stem: now(model, stem) for stem in ("positional", "query_key_value", "scores", "add_norm", "model_view")}
    said["why_attention"] = now(model, "why_attention")
    n = model.model.config.n_decoder_layers
    qk = "QK-norm" in said["query_key_value"] and "QK-norm" in said["scores"]
    assert qk == (family in ("gemma3", "qwen3"))
    if family == "gemma3":
        assert "layers 1-2 see only the last 5 keys, layer 3 all" in said["scores"]
        assert said["model_view"].endswith(": 2 local (a window of 5 keys), 1 global")
        assert "base 1,000,000 in global layers, 10,000 in local ones" in said["positional"]
        assert said["add_norm"].startswith("sandwich norms, x + RMSNorm(Sublayer(RMSNorm(x)))")
        assert "GeGLU" in said["add_norm"] and "SwiGLU" not in said["add_norm"]
        assert "O(n·w·d), w = 5" in said["why_attention"]
    if family == "mistral":
        assert f"layers 1-{n} see only the last 6 keys" in said["scores"]
        assert said["model_view"].endswith(f": {n} local (a window of 6 keys), 0 global")
        assert "sandwich" not in said["add_norm"] and "SwiGLU" in said["add_norm"]
        assert "O(n·w·d), w = 6" in said["why_attention"]
    if family == "qwen3":  # every layer global: nothing of windows
        assert "only the last" not in said["scores"] and "local" not in said["model_view"]
        assert "O(n·w·d)" not in said["why_attention"] and "in local ones" not in said["positional"]
