"""A session keeps nothing shared alive past its run: once the shelf drops a model and the store a trace, they are
freed even while sessions that drew them are still open (Streamlit keeps a session's widget callbacks, and a closed
tab's session for minutes; a function defined in a page script would keep that script's globals: the model, the
trace)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from attention_explorer.explorer.app import cached, shelf, state, store
from tests.app import new_app

PAGES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "explorer" / "pages").glob("[!_]*.py"))


@pytest.mark.parametrize("model", ["minilm-random", "reverse"])
@pytest.mark.parametrize("page", PAGES)
def test_an_open_session_does_not_keep_a_dropped_model_or_trace(page, model):
    at = new_app(page)
    at.query_params["model"] = model
    at.run()
    assert not at.exception
    models = shelf.shelf()
    assert model in models  # the page used it
    loaded = weakref.ref(models.get(model))
    traced = weakref.ref(cached.get_trace(state.sidebar(at.session_state)))
    models.drop(model)
    store.shared().clear()
    gc.collect()
    assert loaded() is None, f"{page} keeps {model} alive"
    assert traced() is None, f"{page} keeps its trace alive"
    assert not at.exception  # the session is still open


def test_the_transformers_reference_leaves_the_shelf_like_any_model():
    reference = weakref.ref(cached.get_reference())
    assert shelf.REFERENCE in shelf.shelf()
    for key in ("translate", "reverse", "minilm"):  # three other models used since
        cached.get_model(key)
    gc.collect()
    assert shelf.REFERENCE not in shelf.shelf() and reference() is None
