"""Session-state keys shared across pages, and their defaults."""

from __future__ import annotations

from collections.abc import MutableMapping

MODEL = "model"
TEXT = "text"
MAX_TOKENS = "max_tokens"

DEFAULT_MODEL = "minilm"
DEFAULT_MAX_TOKENS = 128

EXAMPLES = (
    "The animal didn't cross the street because it was too tired",
    "Bark is very cute and he is a dog",
    "Thinking Machines",
    "The agreement on the European Economic Area was signed in August 1992",
)
DEFAULT_TEXT = EXAMPLES[0]
DEFAULTS = {MODEL: DEFAULT_MODEL, TEXT: DEFAULT_TEXT, MAX_TOKENS: DEFAULT_MAX_TOKENS}


def widget(key: str) -> str:
    """The sidebar widget bound to a persistent key (widgets lose their state when the page changes)."""
    return f"sidebar_{key}"


def init(session: MutableMapping) -> None:
    for key, value in DEFAULTS.items():
        session.setdefault(key, value)


def bind_widgets(session: MutableMapping) -> None:
    """Give each sidebar widget its persistent value before it is drawn, so a page switch loses nothing."""
    for key in DEFAULTS:
        session.setdefault(widget(key), session[key])
