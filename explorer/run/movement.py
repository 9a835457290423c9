"""How far each sub-layer moves each token, over the whole stack: the norms, step sizes and cosines the Add & Norm and
Forward pass pages draw (a run reduces every layer to them while it holds the layer: explorer.app.reduced)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_explorer.explorer.run.forward import states, sublayer_names, sublayer_states
from attention_explorer.explorer.run.trace import Trace


@dataclass(frozen=True)
class Movement:
    """How far each sub-layer moves each token: (L, S, T) arrays, S the sub-layers of a layer."""

    names: tuple[str, ...]
    norms: np.ndarray  # |state after the sub-layer|
    change: np.ndarray  # |state after - state before the sub-layer|
    cosine: np.ndarray  # cosine(state after the sub-layer, the layer's input)
    input_norms: np.ndarray  # (L, T) |the layer's input|


def layer_movement(entering: np.ndarray, after: np.ndarray) -> np.ndarray:
    """One layer's movement: its input (T, D) and its states after each sub-layer (S, T, D) -> (3 S + 1, T): the
    states' norms, their dot products with the input, each sub-layer's step size, and the input's norm. A run
    reduces every layer to this while it holds the layer (explorer.app.reduced), so a long text recomputes none.
    Products summed in float32 (a relative error of about 1e-7 in each, against float64; float64 sums took 2.5 times
    as long: 2 ms a layer at 512 tokens, a seventh of what a run reduces a layer to); a step is the float32
    difference, exact to half a step of itself."""

    def dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.einsum("...d,...d->...", x, y).astype(np.float64)

    step = after - np.concatenate([entering[None], after[:-1]])  # (S, T, D): what each sub-layer added
    return np.concatenate(
        [
            np.sqrt(dot(after, after)),
            dot(after, entering[None]),
            np.sqrt(dot(step, step)),
            np.sqrt(dot(entering, entering))[None],
        ]
    )


def movement(trace: Trace, stack: str) -> Movement:
    """Norms, step sizes and cosine similarity to the layer's input, from the traced states of every token: what the
    run reduced each layer to, or each layer's states read in turn."""
    found, names = states(trace, stack), sublayer_states(trace, stack)
    reduced = (trace.reduced or {}).get("movement", {}).get(stack)
    if reduced is None:
        entering = lambda i: found["embeddings"] if i == 0 else found["after_ffn"][i - 1]  # noqa: E731
        count = found["after_ffn"].shape[0]
        each = [layer_movement(entering(i), np.stack([found[name][i] for name in names])) for i in range(count)]
        reduced = np.stack(each)
    n = len(names)
    norms, dot, change, input_norms = reduced[:, :n], reduced[:, n : 2 * n], reduced[:, 2 * n : 3 * n], reduced[:, -1]
    # within [-1, 1]: rounding may take a cosine of two states in line a hair past 1
    cosine = np.clip(dot / np.maximum(norms * input_norms[:, None], 1e-30), -1.0, 1.0)
    return Movement(sublayer_names(trace, stack), norms, change, cosine, input_norms)
