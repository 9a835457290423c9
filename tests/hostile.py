"""Hostile text for the property tests, and a check that a figure shows every token literally."""

from __future__ import annotations

import html
import json

from hypothesis import strategies as st

NAMED = (
    "",
    "   \t\n ",
    "</script><script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<b>bold</b> <br> line <a href='https://example.com'>link</a>",
    "&amp; &lt;b&gt; &#60;i&#62;",
    "**not bold** _not italic_ $x^2$ :smile: :red[not red] [link](javascript:alert(1)) `code` # heading",
    "😀 emoji 👩‍👩‍👧 family 🇫🇷 flag",
    "日本語のテキストと中文文本",
    "مرحبا بالعالم שלום עולם",
    "e\u0301 n\u0303 combining\u0336 marks",
    "zero\u200bwidth\u200d joiner\ufeff bom",
    "control\x00nul\x01\x07bell\x1b[31mred\x7f",
    "\u202eright-to-left override\u202c",
    "the " * 300,
    "word " * 20_000,  # 100,000 characters, far more tokens than any model takes
)
# pieces people paste, glued together in any order
PIECES = st.sampled_from(
    ["<", ">", "&", "&amp;", "<b>", "</b>", "<br>", "<a href=x>", "</script>", "'", '"', "\\", "%{y}", "$", "*", "_",
     "[", "]", "(", ")", ":", "#", "|", "{", "}", "😀", "日本", "ש", "\u0301", "\u200b", "\x00", "\n", "\t", "the",
     "cat", "##ing", "[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]"]
)  # fmt: skip
TEXT = st.one_of(
    st.sampled_from(NAMED),
    st.lists(PIECES, max_size=40).map(" ".join),
    st.lists(PIECES, max_size=40).map("".join),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200),
    st.tuples(PIECES, st.integers(100, 400)).map(lambda p: (p[0] + " ") * p[1]),
)

TEMPLATE_KEYS = {"hovertemplate", "texttemplate"}  # ours, with <br> on purpose; data goes in through %{...}


def strings(value: object, path: str = ""):
    """(path, string) for every string in a figure's JSON except the templates."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in TEMPLATE_KEYS:
                yield from strings(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from strings(v, f"{path}[{i}]")
    elif isinstance(value, str):
        yield path, value


def assert_literal(figure_json: dict | str) -> None:
    """No string in the figure could be read by Plotly as markup: no '<' or '>' left unescaped, and every '&'
    starts an entity that html.escape wrote."""
    doc = json.loads(figure_json) if isinstance(figure_json, str) else figure_json
    for path, text in strings(doc):
        assert "<" not in text and ">" not in text, (path, text)
        assert html.escape(html.unescape(text), quote=False) == text, (path, text)
