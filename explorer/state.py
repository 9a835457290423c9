"""Session-state keys shared across pages, and their defaults."""

from __future__ import annotations

from collections.abc import MutableMapping

MODEL = "model"
TEXT = "text"
MAX_TOKENS = "max_tokens"

TRAINED = "trained_models"  # key -> LoadedModel trained on the Train page: this session's only

DEFAULT_MODEL = "minilm"
DEFAULT_MAX_TOKENS = 128
DEFAULT_TEXT = "The animal didn't cross the street because it was too tired"
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


def sidebar(session: MutableMapping) -> tuple[str, str, int]:
    """(model, text, max tokens): what every page's trace is computed from."""
    return session[MODEL], session[TEXT], int(session[MAX_TOKENS])


def keep(session: MutableMapping, key: str, value: object) -> None:
    """Set a persistent key and its sidebar widget together (only before the widget is drawn, or in a callback)."""
    session[key] = session[widget(key)] = value
