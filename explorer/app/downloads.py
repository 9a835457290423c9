"""A figure as files: server-side PNG, SVG and PDF (kaleido + the system Chromium), offline HTML, and its data as CSV
and JSON. No streamlit here: a notebook or a command can call these as the pages do.

The data comes out of the figure's own traces, so a download holds exactly the numbers drawn; token labels are
unescaped back to the literal text the model read (the figure holds them html-escaped).
"""

from __future__ import annotations

import html
import io
import json
import os
import re
import shutil
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.clicks import CLICKS
from attention_explorer.explorer.figures.style import TEXT
from attention_explorer.explorer.run import spreadsheet

# Streamlit's chart theme, light (what the browser fills in for its "streamlit" template's placeholder colours):
# white paper and plot, no vertical grid, a faint horizontal one, its fonts; the colours are the app's own
# colour-blind-safe ones (figures.style), which every figure on screen draws with too
STREAMLIT_FONT = '"Source Sans Pro", "Source Sans", sans-serif'
GRID = "#e6eaf1"


SCREEN = go.layout.Template(
    layout={
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "font": {"family": STREAMLIT_FONT, "color": TEXT},
        "title": {"x": 0.01, "xanchor": "left", "font": {"size": 16, "weight": "bold"}},  # as Streamlit's heading
        "colorway": list(style.CATEGORICAL),
        "colorscale": {"sequential": style.SEQUENTIAL, "diverging": style.DIVERGING},
        "xaxis": {"showgrid": False, "zeroline": False, "gridcolor": GRID, "automargin": True},
        "yaxis": {"gridcolor": GRID, "zerolinecolor": GRID, "automargin": True},
    },
    data={"heatmap": [{"colorscale": style.SEQUENTIAL}], "bar": [{"marker": {"line": {"width": 0}}}]},
)

SYSTEM_CHROMIUM = "/usr/bin/chromium"
PNG_SCALE = 2  # twice the on-screen size: sharp in slides
MIME_TYPES = {
    "png": "image/png",
    "svg": "image/svg+xml",
    "pdf": "application/pdf",
    "html": "text/html",
    "csv": "text/csv",
    "json": "application/json",
}
IMAGE_FORMATS = ("png", "svg", "pdf")  # what kaleido draws
ENABLE_IMAGES = (
    "To enable image export (PNG, SVG, PDF), install Chromium (`apt-get install chromium`) "
    "or set BROWSER_PATH to a Chrome or Chromium binary."
)
_failure = ""  # why the last image export failed, "" after one worked: the browser is the machine's, not a session's


class ExportError(RuntimeError):
    """An image could not be drawn (no Chromium, or kaleido failed); the message says how to enable image export."""


SENTENCE_CHARS = 60  # of the sentence in a title; a file name holds fewer (NAME_SENTENCE)
SENTENCE_MIN = 20  # a long model and view name leave the sentence this much at least
CHAR_PX = 7.5  # a character of the second line (CONTEXT_PX) is about this wide: the line fits the figure's width
NAME_SENTENCE = 32
NAME_CHARS = 120
CONTEXT_PX = 14  # the title's second line (model, view, sentence): smaller than the title
PNG_WIDTH = 900  # a figure without a width of its own is drawn this wide
SUBTITLE_PX = 30  # a PNG with the title's second line is this much taller: the plot keeps its size


@dataclass(frozen=True)
class About:
    """What a download shows besides its figure: the model (its key, and its title as the sidebar names it), the
    sentence, the view's picks ("layer 2", "head 3"), and a title for a figure that has none of its own."""

    model: str = ""
    model_title: str = ""
    sentence: str = ""
    view: tuple[str, ...] = ()
    title: str = ""


def shortened(text: str, most: int) -> str:
    """One line of at most `most` characters, cut at a word with an ellipsis."""
    line = " ".join(text.split())
    if len(line) <= most:
        return line
    cut = line[: most - 1].rsplit(" ", 1)[0] if " " in line[: most - 1] else line[: most - 1]
    return cut.rstrip() + "…"


def context(about: About, most: int = 10_000) -> str:
    """The plain line a download's title carries: model · layer · head · "sentence", the sentence cut so the line
    keeps within `most` characters (at least SENTENCE_MIN of it)."""
    head = " · ".join(p for p in [about.model_title or about.model, *about.view] if p)
    if not about.sentence.strip():
        return head
    room = max(SENTENCE_MIN, min(SENTENCE_CHARS, most - len(head) - 5))  # 5: the separator and the quotes
    return " · ".join(p for p in (head, f"“{shortened(about.sentence, room)}”") if p)


def _plain_text(markup: str) -> str:
    """A Plotly label as text: tags dropped, entities unescaped."""
    return html.unescape(re.sub(r"<[^>]*>", " ", markup or "")).strip()


def _slug(text: str) -> str:
    """ASCII letters, digits and hyphens only: safe in a file name on every system."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]+", "-", ascii_text).strip("-").lower()


def file_name(stem: str, about: About | None, extension: str) -> str:
    """`stem_model_layer-2_head-3_the-sentence.ext`, safe characters only, at most NAME_CHARS before the extension."""
    parts = [stem]
    if about is not None:
        parts += [about.model, *about.view, shortened(about.sentence, NAME_SENTENCE).rstrip("…")]
    name = "_".join(s for s in map(_slug, parts) if s)[:NAME_CHARS].strip("-_") or "figure"
    return f"{name}.{extension}"


def _plain(values: object) -> list:
    """A trace's x / y / z as plain lists, labels unescaped."""
    if values is None:
        return []
    listed = np.asarray(values).tolist()  # float32 -> Python float is exact: the model's own numbers

    def unescape(v: object) -> object:
        if isinstance(v, list):
            return [unescape(x) for x in v]
        return html.unescape(v) if isinstance(v, str) else v

    return unescape(listed)


def _ticks(figure: go.Figure, trace: object, axis: str) -> dict:
    """Numeric positions -> '3: token' where the axis names its ticks (bars drawn at positions 0..T-1)."""
    anchor = getattr(trace, f"{axis}axis", None) or axis  # "x", or "x2" for a second subplot's axis
    layout_axis = figure.layout[f"{axis}axis{anchor[1:]}"]
    if layout_axis is None or layout_axis.tickvals is None or layout_axis.ticktext is None:
        return {}
    return {
        v: f"{v}: {html.unescape(str(t))}"
        for v, t in zip(layout_axis.tickvals, layout_axis.ticktext, strict=False)
        if isinstance(v, int | float)
    }


def _named_categories(figure: go.Figure, trace: object, axis: str) -> bool:
    """Whether the axis is a category axis whose values ('3: the', unique) are named by tokens (ticktext)."""
    anchor = getattr(trace, f"{axis}axis", None) or axis
    layout_axis = figure.layout[f"{axis}axis{anchor[1:]}"]
    return layout_axis is not None and layout_axis.type == "category" and layout_axis.ticktext is not None


def _axis_title(figure: go.Figure, trace: object, axis: str) -> str:
    """The title of the axis a trace is drawn on, as plain text ('' when it has none)."""
    anchor = getattr(trace, f"{axis}axis", None) or axis
    layout_axis = figure.layout[f"{axis}axis{anchor[1:]}"]
    return _plain_text(layout_axis.title.text) if layout_axis is not None else ""


def _common_word(labels: list) -> str:
    """The word every label starts with ('layer' for 'layer 1', 'layer 2'), naming an untitled axis."""
    words = {str(v).split(" ", 1)[0] for v in labels if isinstance(v, str) and " " in v}
    return words.pop() if len(words) == 1 and all(isinstance(v, str) and " " in v for v in labels) else ""


def _value_name(trace: object) -> str:
    """What a heatmap's cells hold: its colour bar's title."""
    colorbar = getattr(trace, "colorbar", None)
    return _plain_text(colorbar.title.text) if colorbar is not None else ""


def _subplot_titles(figure: go.Figure) -> dict[str, str]:
    """x axis name -> the subplot title above it (make_subplots writes them as annotations over each domain)."""
    found = {}
    for annotation in figure.layout.annotations:
        if annotation.xref != "paper" or annotation.yanchor != "bottom" or not annotation.text:
            continue
        for name in (n for n in figure.layout.to_plotly_json() if n.startswith("xaxis")):
            axis = figure.layout[name]
            if axis.domain and axis.domain[0] <= annotation.x <= axis.domain[1]:
                found.setdefault("x" + name[5:], _plain_text(annotation.text))
    return found


def records(figure: go.Figure, title: str = "") -> dict:
    """{"title", "traces": [{"name", "type", "x", "y", "z"?, "x_title", "y_title", "z_title"?}]}: every trace's data
    as drawn; a trace without a name of its own is named by its subplot's title, else the figure's."""
    traces = []
    title = _plain_text(figure.layout.title.text) or title
    drawn = [t for t in figure.data if t.meta != CLICKS]  # invisible click targets: nothing drawn to download
    subplots = _subplot_titles(figure)
    for i, trace in enumerate(drawn):
        own = html.unescape(trace.name or "") or subplots.get(getattr(trace, "xaxis", None) or "x")
        name = own or (title if len(drawn) == 1 and title else f"{title or trace.type} {i + 1}")
        entry = {"name": name.strip(), "type": trace.type}
        for axis in ("x", "y", "z"):
            value = getattr(trace, axis, None)
            if value is not None:
                entry[axis] = _plain(value)
                ticks = _ticks(figure, trace, axis) if axis != "z" else {}
                if ticks and all(not isinstance(v, list) for v in entry[axis]):
                    entry[axis] = [ticks.get(v, v) for v in entry[axis]]
                axis_title = _value_name(trace) if axis == "z" else _axis_title(figure, trace, axis)
                named = ticks or (axis != "z" and _named_categories(figure, trace, axis))  # tokens on the axis
                axis_title = axis_title or ("token" if named else "") or _common_word(entry[axis])
                if axis_title:
                    entry[f"{axis}_title"] = axis_title
            elif axis != "z" and _axis_title(figure, trace, axis):  # a heatmap's columns by position: 'dimension'
                entry[f"{axis}_title"] = _axis_title(figure, trace, axis)
        traces.append(entry)
    return {"title": html.unescape(figure.layout.title.text or ""), "traces": traces}


def to_json(figure: go.Figure, about: About | None = None) -> str:
    """The records, with what they show (model, sentence, view) when known."""
    found = records(figure, about.title if about is not None else "")
    if about is not None:
        found = {**found, "model": about.model, "sentence": about.sentence, "view": list(about.view)}
        found["title"] = found["title"] or about.title
    return json.dumps(found, ensure_ascii=False)


def to_csv(figure: go.Figure, about: About | None = None) -> str:
    """Long form: one row per drawn value, the columns named for what they hold (the axes' and the colour bar's
    titles: query, key, weight). Heatmaps give (series, row, column, value); others (series, x, y)."""
    out = io.StringIO()
    writer = spreadsheet.Writer(out)
    data = records(figure, about.title if about is not None else "")["traces"]
    heatmaps = [t for t in data if "z" in t]
    if heatmaps:
        first = heatmaps[0]
        writer.writerow(
            ("series", first.get("y_title", "row"), first.get("x_title", "column"), first.get("z_title", "value"))
        )
        for t in heatmaps:
            z = t.get("z", [])
            xs = t.get("x") or list(range(len(z[0]) if z else 0))
            ys = t.get("y") or list(range(len(z)))
            for row_label, row in zip(ys, z, strict=False):
                for column_label, value in zip(xs, row, strict=False):
                    writer.writerow((t["name"], row_label, column_label, value))
    else:
        first = data[0] if data else {}
        value = first.get("y_title") or first.get("name") or "y"  # bars of q . k_j: the column is q . k_j
        writer.writerow(("series", first.get("x_title", "x"), value))
        for t in data:
            xs, ys = t.get("x", []), t.get("y", [])
            xs = xs or list(range(len(ys)))
            ys = ys or list(range(len(xs)))
            for x, y in zip(xs, ys, strict=False):
                writer.writerow((t["name"], x, y))
    return out.getvalue()


def as_drawn(figure: go.Figure, about: About | None = None) -> go.Figure:
    """A copy of the figure as the screen draws it, and saying what it shows: Streamlit's chart theme written out
    (SCREEN; the "streamlit" template importing Streamlit makes Plotly's default holds placeholder colours only the
    browser fills in), no grid through a heatmap's cells, and `about` as the title's second line."""
    drawn = go.Figure(figure).update_layout(template=SCREEN)
    for trace in drawn.data:
        if trace.type == "heatmap":  # gaps and NaN cells (masked, gutters) show the plot's white, no lines
            for axis in ("x", "y"):
                anchor = getattr(trace, f"{axis}axis", None) or axis
                drawn.layout[f"{axis}axis{anchor[1:]}"].update(showgrid=False, zeroline=False)
    if about is not None:
        own = figure.layout.title.text or html.escape(about.title)
        line = html.escape(context(about, int((figure.layout.width or PNG_WIDTH) / CHAR_PX)))
        subtitle = {"text": line if own else "", "font": {"size": CONTEXT_PX}}
        drawn.update_layout(title={"text": own or line, "subtitle": subtitle, "automargin": True})
        if drawn.layout.title.y is None:
            drawn.update_layout(title={"yref": "container", "y": 0.99, "yanchor": "top"})
        # the axis title below stays clear, and so do subplot titles (annotations just above the plots)
        above = any(a.yref == "paper" and (a.y or 0) >= 1 for a in drawn.layout.annotations)
        drawn.layout.title.pad.b = max(drawn.layout.title.pad.b or 0, 16 + (CONTEXT_PX + 12) * above)
    return drawn


def to_html(figure: go.Figure, about: About | None = None) -> str:
    """A standalone page with plotly.js embedded: opens offline, no CDN."""
    drawn = as_drawn(figure, about)
    return drawn.to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})


def chromium() -> str | None:
    """The browser kaleido drives: BROWSER_PATH (None when it names no file: kaleido reads it and would fail), else
    the system Chromium."""
    chosen = os.environ.get("BROWSER_PATH")
    if chosen:
        return chosen if Path(chosen).is_file() else None
    return SYSTEM_CHROMIUM if Path(SYSTEM_CHROMIUM).exists() else shutil.which("chromium")


def image_trouble() -> str:
    """'' while image export should work; else one sentence for where the image downloads are: how to enable them
    (no Chromium found), or that the last one failed, why, and how to enable them. Checks files only: draws nothing."""
    if chromium() is None:
        return ENABLE_IMAGES
    return f"The last image export failed ({_failure}). {ENABLE_IMAGES}" if _failure else ""


def to_image(figure: go.Figure, about: About | None = None, image_format: str = "png") -> bytes:
    """The figure as the screen draws it (as_drawn: template, title, `about`), drawn by kaleido in the system
    Chromium as png, svg or pdf. One size for all three; a PNG has PNG_SCALE pixels per screen pixel, an SVG or PDF
    is vectors at the screen's size. No MathJax; plotly.js from the installed package. ExportError when it cannot."""
    global _failure
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image format {image_format!r}: choose from {', '.join(IMAGE_FORMATS)}")
    browser = chromium()
    if browser is None:
        raise ExportError(f"No Chromium found. {ENABLE_IMAGES}")
    os.environ.setdefault("BROWSER_PATH", browser)
    import kaleido  # noqa: PLC0415 -- imported on first use: it is only needed when someone asks for an image

    width = figure.layout.width or PNG_WIDTH
    height = (figure.layout.height or 500) + (SUBTITLE_PX if about is not None else 0)
    scale = PNG_SCALE if image_format == "png" else 1  # a vector's scale would only multiply its stated size
    try:
        drawn = kaleido.calc_fig_sync(
            as_drawn(figure, about),
            opts={"format": image_format, "width": width, "height": height, "scale": scale},
            kopts={"mathjax": False},
        )
    except Exception as e:  # kaleido raises a variety of browser errors; the user gets one message
        _failure = shortened(str(e), 200)
        raise ExportError(f"The {image_format.upper()} export failed ({_failure}). {ENABLE_IMAGES}") from e
    _failure = ""
    return drawn


def to_png(figure: go.Figure, about: About | None = None) -> bytes:
    """The figure as a PNG (to_image)."""
    return to_image(figure, about, "png")
