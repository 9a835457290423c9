"""A long text's layer read in part: one head (a heatmap), one query row (the Q/K/V walkthrough), or every head reduced
(the model view's thumbnails, head statistics). On the CPU the layer is recomputed whole and kept in the shared cache
(explorer.run.layers: its numpy is the run's own memory, and the next read is free). On any other device the layer
is recomputed there and the part is selected, or reduced, there before the one copy back: a (H, T, T) map of 8,192
tokens is 2.4 GB, one head of it 0.27 GB."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import torch

from attention_explorer.explorer.run import cost
from attention_explorer.explorer.run.layers import ATTENTION_FIELDS, AttentionLayer, StackLayers, cache
from attention_explorer.models.device import numpy as host

# the devices whose layers are read whole and cached (the CPU); on any other, only the part read comes back
HOST = ("cpu",)
# an AttentionLayer's fields by query row, and the axis of its queries (the rest are by key, or one number)
ROW_AXES = {"q": 1, "raw_scores": 1, "weights": 1, "heads": 1, "output": 0, "q_unrotated": 1, "q_before_norm": 1}


def whole(source: StackLayers, i: int) -> bool:
    """Whether layer i is read whole: the run is on a HOST device, or the layer is at hand already."""
    return source.device.type in HOST or source.ready(i)


@contextlib.contextmanager
def _admitted(source: StackLayers) -> Iterator[None]:
    """A layer's recomputation under the run's admission, as StackLayers.layer admits it."""
    config, tokens = source.loaded.model.config, len(source.inputs(0))
    cross = source.stack == "decoder" and config.is_encoder_decoder
    with source.admit(cost.layer_seconds(config, tokens, cross=cross), cost.layer_bytes(config, tokens)):
        yield


def head(source: StackLayers, i: int, module: str, field: str, head: int) -> np.ndarray:
    """One head of layer i's attention `field` ("weights", "q", ...): (Tq, Tk) or (T, Dh); off the CPU, selected on
    the device and kept in the shared cache by itself."""
    if whole(source, i):
        return getattr(source.layer(i).attention[module], field)[head]
    if not 0 <= i < source.n_layers:
        raise IndexError(f"layer {i} of {source.n_layers}")

    def computed() -> np.ndarray:
        with torch.inference_mode():
            return host(getattr(getattr(source.recomputed(i), module), field)[0, head])  # one head's copy back

    with _admitted(source):
        return cache().get((source.token, i, module, field, head), computed)


def reduced(source: StackLayers, i: int, module: str, on_host: Callable, on_device: Callable) -> np.ndarray:
    """Layer i's attention weights reduced: `on_host` of the numpy layer where it is read whole, else `on_device` of
    its (H, Tq, Tk) tensor on the device (explorer.run.device_reducers), only the result copied back."""
    if whole(source, i):
        return on_host(source.layer(i).attention[module].weights)
    with _admitted(source), torch.inference_mode():
        return host(on_device(getattr(source.recomputed(i), module).weights[0]))


def query_row(source: StackLayers, i: int, module: str, query: int) -> AttentionLayer:
    """Layer i's attention with one query row `query` (Tq = 1) of its fields by query (ROW_AXES) and every key's k
    and v: what the Q/K/V walkthrough reads; off the CPU, the row selected on the device."""
    if whole(source, i):
        found = source.layer(i).attention[module]
        return replace(found, **{f: _rows(getattr(found, f), axis, query) for f, axis in ROW_AXES.items()})
    with _admitted(source), torch.inference_mode():
        internals = getattr(source.recomputed(i), module)
        fields = {f: None if (t := getattr(internals, f)) is None else t[0] for f in ATTENTION_FIELDS}  # batch row 0
        fields |= {f: _rows(fields[f], axis, query) for f, axis in ROW_AXES.items()}
        moved = {f: None if t is None else host(t) for f, t in fields.items()}
    return AttentionLayer(**moved, scaling=internals.scaling, window=internals.window)


def _rows(found, axis: int, query: int):
    """Query row `query` of `found` along `axis`, kept as a length-1 axis (a view); None stays None."""
    if found is None:
        return None
    return found[(slice(None),) * axis + (slice(query, query + 1),)]
