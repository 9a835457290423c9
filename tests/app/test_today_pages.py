"""Tiny random Gemma 3, Qwen3 and Mistral folders (local layers with windows shorter than the text, QK-norm, sandwich
norms, heads wider than d_model / heads) through every page of the table (AppTest via app.py): no exception, no
error box."""

from __future__ import annotations

import pytest

from attention_explorer.explorer import navigation
from attention_explorer.models import registry
from tests.app import new_app
from tests.folders import make_gemma3_folder, make_mistral_folder, make_qwen3_folder

pytestmark = pytest.mark.slow

EVERY_PAGE = tuple(page.stem for pages in navigation.MENUS.values() for page in pages)
TEXT = "the cat sat on the mat because it was tired and the dog sat on the rug"  # longer than every window
BUILDERS = {
    "gemma3": lambda path: make_gemma3_folder(path, window=5, layers=3, pattern=3),
    "qwen3": lambda path: make_qwen3_folder(path, window=5, layer_types=["sliding_attention", "full_attention"]),
    "mistral": lambda path: make_mistral_folder(path, window=5),
}


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_every_page_opens_for_a_tiny_folder(tmp_path, monkeypatch, family):
    folder = BUILDERS[family](tmp_path / family)
    key = f"folder:tiny-{family}"
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-{family}={folder}"}))
    for page in EVERY_PAGE:
        at = new_app(page)
        at.query_params["model"] = key
        at.query_params["text"] = TEXT
        at.run()
        assert not at.exception, (family, page, at.exception)
        assert not at.error, (family, page, [e.value for e in at.error])
