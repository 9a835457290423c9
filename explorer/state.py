"""Session-state keys shared across pages, and their defaults."""

from __future__ import annotations

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
