"""Click to drill down: a clicked chart point -> the session keys the pickers use, so clicks and dropdowns agree.

Pure functions of plain mappings (Streamlit's selection state is a dict-like of dicts), tested without a browser.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from attention_explorer.explorer.app import state


def clicked(chart_state: Mapping | None) -> Mapping | None:
    """The first clicked point of a plotly chart's state ({"selection": {"points": [...]}}), or None."""
    if not chart_state:
        return None
    points = (chart_state.get("selection") or {}).get("points") or []
    return points[0] if points else None


def _custom(point: Mapping | None) -> list:
    data = point.get("customdata") if point else None
    return list(data) if isinstance(data, list | tuple) else []


def head_of(point: Mapping | None) -> tuple[int, int] | None:
    """(layer, head) named by a click target of a layer x head grid (customdata [layer, head, ...])."""
    data = _custom(point)
    if len(data) >= 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in data[:2]):
        return int(data[0]), int(data[1])
    return None


def token_of(point: Mapping | None) -> int | None:
    """The query position named by a click target of a heatmap (customdata [query, ...])."""
    data = _custom(point)
    if data and isinstance(data[0], int) and not isinstance(data[0], bool):
        return int(data[0])
    return None


def _choose_pair(session: MutableMapping, chosen: tuple[int, int] | None, first_key: str, second_key: str) -> bool:
    """Put a clicked pair into two pickers' keys; False when the click named none."""
    if chosen is None:
        return False
    state.choose(session, first_key, chosen[0])
    state.choose(session, second_key, chosen[1])
    return True


def select_head(session: MutableMapping, point: Mapping | None, layer_key: str, head_key: str) -> bool:
    """Put a clicked (layer, head) into the pickers' keys; False when the point names no head."""
    return _choose_pair(session, head_of(point), layer_key, head_key)


def select_token(session: MutableMapping, point: Mapping | None, token_key: str) -> bool:
    """Put a clicked query position into a token picker's key; False when the point names none."""
    chosen = token_of(point)
    if chosen is None:
        return False
    state.choose(session, token_key, chosen)
    return True


def region_of(point: Mapping | None) -> tuple[int, int] | None:
    """(query, key) at the centre of the tile a click on a long map's overview names (customdata [first query, last
    query, first key, last key, ...])."""
    data = _custom(point)
    if len(data) < 4 or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in data[:4]):
        return None
    first_query, last_query, first_key, last_key = (int(v) for v in data[:4])
    return (first_query + last_query + 1) // 2, (first_key + last_key + 1) // 2


def select_region(session: MutableMapping, point: Mapping | None, query_key: str, key_key: str) -> bool:
    """Centre a long map's full-resolution region on the overview tile clicked; False when the point names none."""
    return _choose_pair(session, region_of(point), query_key, key_key)
