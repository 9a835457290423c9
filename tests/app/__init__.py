"""Every page through `streamlit.testing.v1.AppTest`, from `app.py` as a person opens it."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")
# One script run may take this long before AppTest gives up: generous, because a busy 2-core machine can be many
# times slower than an idle one (a run ends as soon as the script does; the limit only says when to stop waiting).
TIMEOUT_S = 600
# each page's attention-kind radio: the model view shares the lesson's focus (the Q/K/V pickers' keys)
KIND_KEYS = {"attention": "attention_kind", "model_view": "qkv_kind", "head_view": "head_kind", "qkv": "qkv_kind"}


def new_app(page: str | None = None) -> AppTest:
    """A fresh session of the app, as a new browser tab would get: on the first page (the overview), or opened at
    /`page` (the page file's stem, e.g. "attention") as an address would open it."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    if page is not None:
        at.switch_page(f"explorer/pages/{page}.py")
    return at


def reveal(at: AppTest, key: str, choice: int = 0) -> AppTest:
    """Answer a predict-then-reveal question (`key` as the page passes it to predict) and reveal: the page as a class
    sees it after the answer."""
    (box,) = [s for s in at.selectbox if s.key.startswith(f"{key}_guess_")]
    box.set_value(choice).run()
    return at.button(key=f"{key}_reveal").click().run()


def stepping(at: AppTest) -> AppTest:
    """Step 12 (decoding) with its "Ask the class first" turned off, as a teacher steps through freely: every word
    the model writes shown at once (the step asks first by default)."""
    return at.toggle(key="decoding_ask").set_value(False).run()
