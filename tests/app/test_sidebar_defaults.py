"""The sidebar's widgets fall back to the session's own values. A browser that redraws a widget (after a page
switch on a busy server) resets it to the default in its element and sends that as the user's choice: with
Max tokens' default at its minimum, every later sentence was cut to 3 tokens."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.app import cached
from tests.app import new_app

pytestmark = pytest.mark.slow

PAGES = ("attention", "model_view", "overview", "qkv")


def test_every_sidebar_widget_defaults_to_the_sessions_value_on_every_page():
    at = new_app("attention").run()
    at.sidebar.selectbox[0].set_value("translate").run()
    at.sidebar.text_area[0].set_value("the small red cat sees a big dog").run()
    at.sidebar.number_input[0].set_value(17).run()
    keys = list(cached.model_keys())
    for page in PAGES:
        at.switch_page(f"explorer/pages/{page}.py").run()
        assert not at.exception
        box, model, text = at.sidebar.number_input[0], at.sidebar.selectbox[0], at.sidebar.text_area[0]
        assert (box.value, box.proto.default) == (17, 17), page
        assert (text.value, text.proto.default) == ("the small red cat sees a big dog",) * 2, page
        assert (model.value, model.proto.default) == ("translate", keys.index("translate")), page
