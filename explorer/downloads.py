"""A figure as files: server-side PNG (kaleido + the system Chromium), offline HTML, and its data as CSV and JSON.

The data comes out of the figure's own traces, so a download holds exactly the numbers drawn; token labels are
unescaped back to the literal text the model read (the figure holds them html-escaped).
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from explorer.figures.clicks import CLICKS

SYSTEM_CHROMIUM = "/usr/bin/chromium"
PNG_SCALE = 2  # twice the on-screen size: sharp in slides


class ExportError(RuntimeError):
    """The PNG could not be drawn (no Chromium, or kaleido failed)."""


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


def records(figure: go.Figure) -> dict:
    """{"title", "traces": [{"name", "type", "x", "y", "z"?}]}: every trace's data as drawn."""
    traces = []
    for i, trace in enumerate(figure.data):
        if trace.meta == CLICKS:  # invisible click targets: nothing drawn, nothing to download
            continue
        entry = {"name": html.unescape(trace.name or f"trace {i + 1}"), "type": trace.type}
        for axis in ("x", "y", "z"):
            value = getattr(trace, axis, None)
            if value is not None:
                entry[axis] = _plain(value)
                ticks = _ticks(figure, trace, axis) if axis != "z" else {}
                if ticks and all(not isinstance(v, list) for v in entry[axis]):
                    entry[axis] = [ticks.get(v, v) for v in entry[axis]]
        traces.append(entry)
    title = figure.layout.title.text or ""
    return {"title": html.unescape(title), "traces": traces}


def to_json(figure: go.Figure) -> str:
    return json.dumps(records(figure), ensure_ascii=False)


def to_csv(figure: go.Figure) -> str:
    """Long form: one row per drawn value. Heatmaps give (trace, row, column, value); others (trace, x, y)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    data = records(figure)["traces"]
    if any("z" in t for t in data):
        writer.writerow(("trace", "row", "column", "value"))
        for t in data:
            z = t.get("z", [])
            xs = t.get("x") or list(range(len(z[0]) if z else 0))
            ys = t.get("y") or list(range(len(z)))
            for row_label, row in zip(ys, z, strict=False):
                for column_label, value in zip(xs, row, strict=False):
                    writer.writerow((t["name"], row_label, column_label, value))
    else:
        writer.writerow(("trace", "x", "y"))
        for t in data:
            xs, ys = t.get("x", []), t.get("y", [])
            xs = xs or list(range(len(ys)))
            ys = ys or list(range(len(xs)))
            for x, y in zip(xs, ys, strict=False):
                writer.writerow((t["name"], x, y))
    return out.getvalue()


def as_drawn(figure: go.Figure) -> go.Figure:
    """A copy of the figure with Plotly's own template (no figure here sets one): importing Streamlit makes its chart
    theme Plotly's default, which leaves colours, grid and tick labels to the browser's theme, so a file drawn with
    it had black lines and missing labels."""
    return go.Figure(figure).update_layout(template=pio.templates["plotly"])


def to_html(figure: go.Figure) -> str:
    """A standalone page with plotly.js embedded: opens offline, no CDN."""
    return as_drawn(figure).to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})


def chromium() -> str | None:
    """The browser kaleido drives: BROWSER_PATH, else the system Chromium."""
    found = os.environ.get("BROWSER_PATH") or (SYSTEM_CHROMIUM if Path(SYSTEM_CHROMIUM).exists() else None)
    return found or shutil.which("chromium")


def to_png(figure: go.Figure) -> bytes:
    """The figure drawn by kaleido in the system Chromium; no MathJax, plotly.js from the installed package."""
    browser = chromium()
    if browser is None:
        raise ExportError("no Chromium found for the PNG export (set BROWSER_PATH or install chromium)")
    os.environ.setdefault("BROWSER_PATH", browser)
    import kaleido  # noqa: PLC0415 -- imported on first use: it is only needed when someone asks for a PNG

    width = figure.layout.width or 900
    height = figure.layout.height or 500
    try:
        return kaleido.calc_fig_sync(
            as_drawn(figure),
            opts={"format": "png", "width": width, "height": height, "scale": PNG_SCALE},
            kopts={"mathjax": False},
        )
    except Exception as e:  # kaleido raises a variety of browser errors; the user gets one message
        raise ExportError(f"the PNG export failed: {e}") from e
