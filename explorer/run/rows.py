"""One query's row of attention in every layer and head, computed from the residual stream a run kept, without
recomputing the layers.

A long text's run keeps no attention (explorer/run/layers.py): reading every layer again costs ~0.3 s a layer at
2,048 tokens on SmolLM2, ~10 s for its 30. A page that needs what one query puts on its keys in every head (Find
heads) needs one row of each layer: the query of that one position against the keys of all of them, as greedy
decoding computes its newest position (models/greedy.py), by the model's own modules: ~0.03 s a layer (1 s for
SmolLM2's 30 layers at 2,048 tokens, one thread).
"""

from __future__ import annotations

import numpy as np
import torch

from attention_explorer.explorer.run import layers
from attention_explorer.explorer.run.trace import AttentionTrace


def query_rows(attention: AttentionTrace, query: int) -> np.ndarray:
    """(L, H, Tk) float32: the weights query `query` puts on every key, in each layer and head. A layer kept from the
    run, or recomputed already, is read; any other of a stack's first attention (self-attention) is computed for that
    row alone; cross-attention, which reads the state after self-attention, is read from its recomputed layer."""
    if not 0 <= query < attention.mask.shape[0]:
        raise IndexError(f"query {query} of {attention.mask.shape[0]}")
    source = attention.source
    found = []
    for i in range(attention.n_layers):
        held = source.kept[i] if source.kept is not None else layers.cache().peek((source.token, i))
        if held is None and _stack(source)[0].sublayers[0].module == attention.module:  # it reads the kept input
            found.append(_row(attention, i, query))
        else:
            found.append(attention.layer(i).weights[:, query])
    return np.stack(found)


def _stack(source: layers.StackLayers):
    """The stack's layers (an nn.ModuleList)."""
    model = source.loaded.model
    return (model.encoder if source.stack == "encoder" else model.decoder).layers


@torch.inference_mode()
def _row(attention: AttentionTrace, i: int, query: int) -> np.ndarray:
    """Layer i's row `query` (H, Tk): the first sub-layer's norm over the layer's input (as run_sublayers does), that
    position's query turned by its own position, the keys of every position, and the row of the run's mask."""
    source = attention.source
    layer = _stack(source)[i]
    x = torch.from_numpy(np.array(source.inputs(i)))[None].to(source.device)  # (1, T, D)
    h = getattr(layer, layer.sublayers[0].norm).normed_input(x)  # (1, T, D)
    module = getattr(layer, attention.module)
    q, _ = module.queries(h[:, query : query + 1], query)  # (1, H, 1, Dh)
    k, v, _ = module.keys_values(h)  # (1, H, T, Dh)
    # (1, 1, 1, Tk), a copy (the trace's is read-only), where the model is
    mask = torch.tensor(attention.mask[query : query + 1], device=source.device)[None, None]
    _, _, weights, _ = module.attend(q, k, v, mask, query)  # (1, H, 1, Tk): the layer's own window and scale
    return weights[0, :, 0].cpu().numpy()
