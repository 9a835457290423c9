"""What the pages read of every layer, reduced while a text's first run holds each layer (explorer.run.layers
.Reductions): the model view's thumbnails, the opening head's link, the sub-layers' movement, Head statistics and the
rollout's overview. No layer of a long text is recomputed for them. No streamlit here: the app's first run
(cached.get_trace) and the benches' (bench.forward, bench.memory) reduce the same things."""

from __future__ import annotations

import numpy as np

from attention_explorer.explorer.figures import zoom
from attention_explorer.explorer.run import device_layers, device_reducers, movement, reducers, starting, trace
from attention_explorer.explorer.run.blocks import THUMBNAIL
from attention_explorer.explorer.run.layers import OnDevice
from attention_explorer.models.registry import LoadedModel


def sink(loaded: LoadedModel, kind: str) -> bool:
    """A decoder-only text's first token is content, and the sink of its heads: links to it do not count."""
    return kind == "decoder_self" and loaded.family.shape == "decoder-only"


def for_model(loaded: LoadedModel) -> dict[str, OnDevice | trace.OnStates]:
    """Every reducer of a first run of `loaded`, by the name its results are kept under in `Trace.reduced`."""
    sinks = {kind: sink(loaded, kind) for kind in trace.ATTENTION_KINDS}

    def allowed(kind, queries, keys):
        return starting.counted(queries, keys, self_attention=kind != "cross", sink=sinks[kind])

    # the thumbnails, the link's row maxima, the statistics and the rollout's overview (the map as a long text's
    # overview draws it): one pass over each layer
    found = reducers.Analysis(
        zoom.OVERVIEW_CELLS, zoom.FULL, ("thumbnails", "row_max", "statistics", "rollout"), THUMBNAIL, allowed
    )

    def start(kind, weights, queries, keys):
        return starting.link_of_rows(weights, found.row_max(kind, weights, queries, keys), allowed(kind, queries, keys))

    # the attention's reducers take each layer where the run made it (a GPU's): only their results come back
    return {
        "thumbnails": OnDevice(found.thumbnails),
        "start": OnDevice(start),
        "movement": trace.OnStates(movement.layer_movement),  # Add & Norm's, Forward pass's: every sub-layer's step
        "statistics": OnDevice(found.statistics),
        "rollout": OnDevice(found.rollout),
    }


def of(result: trace.Trace, name: str, key: str):
    """What the run reduced every layer of `key` (an attention kind, or a stack for OnStates) to under `name`, or None
    (a run made without it)."""
    return (result.reduced or {}).get(name, {}).get(key)


def statistics_on_device(result: trace.Trace, kind: str) -> dict[str, object] | None:
    """Head statistics of a run that did not reduce them, each layer recomputed and reduced on the run's device
    (device_reducers.layer_statistics; reducers.layer_statistics of a layer at hand), only (names, H) a layer copied
    back: {name: (L, H)}; None where the run is on the CPU (analysis.head_statistics reads its layers there)."""
    attention = result.attention(kind)
    if attention.source.device.type in device_layers.HOST:
        return None
    queries, keys = result.tokens_for(kind)
    queries, causal = (queries if kind != "cross" else None), kind == "decoder_self"
    found = attention.reduced(
        lambda w: reducers.layer_statistics(w, keys, queries, causal),
        lambda w: device_reducers.layer_statistics(w, keys, queries, causal),
    )
    return reducers.as_statistics(np.stack(found))
