"""What a model's layer spans say in words (models.anatomy.Span, AttentionTrace.windows): which layers are local, with
a sliding window of keys, and which are global; what that makes of a layer's heatmap on the text shown."""

from __future__ import annotations

from collections.abc import Sequence


def ranges(numbers: Sequence[int]) -> str:
    """1-based layer numbers as runs: [1, 2, 3, 5] -> '1-3, 5'."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def span_name(window: int | None) -> str:
    """'local (a window of 512 keys)' or 'global'."""
    return "global" if window is None else f"local (a window of {window:,} keys)"


def layers_summary(windows: Sequence[int | None]) -> str:
    """Which layers are local and which global, in one sentence; '' when every layer is global (no window)."""
    local = [i + 1 for i, w in enumerate(windows) if w is not None]
    if not local:
        return ""
    whole = [i + 1 for i, w in enumerate(windows) if w is None]
    sizes = sorted({w for w in windows if w is not None})
    size = " or ".join(f"{w:,}" for w in sizes)
    said = f"Layer{'s' if len(local) > 1 else ''} {ranges(local)} {'are' if len(local) > 1 else 'is'} local: each "
    said += f"token sees at most the {size} keys before it, itself included (a sliding window)."
    if whole:
        said += f" Layer{'s' if len(whole) > 1 else ''} {ranges(whole)} {'are' if len(whole) > 1 else 'is'} global: "
        said += "each token sees every key before it, as in the paper."
    return said


def layer_span(layer: int, window: int | None, n_tokens: int, any_local: bool = True, drawn: bool = True) -> str:
    """What layer `layer` (from 0) sees and what its map looks like on `n_tokens` tokens; '' for a model without
    local layers (its every layer is global, as in the paper: nothing to tell apart); `drawn`: the map greys what
    the window hides (token level, not words)."""
    if not any_local:
        return ""
    if window is None:
        return (
            f"Layer {layer + 1} is global: each token sees every key before it, itself included, so its map is the "
            f"causal triangle however long the text ({n_tokens:,} tokens here)."
        )
    said = f"Layer {layer + 1} is local: each token sees at most the {window:,} keys before it, itself included"
    if n_tokens > window:
        shown = (
            ": the keys further back are drawn grey (weight 0, hidden by the window, not by the causal mask) and the "
            "window's edge dashed"
            if drawn
            else " (the keys further back have weight 0)"
        )
        return f"{said}, so on these {n_tokens:,} tokens its map is a band {window:,} keys wide{shown}."
    return (
        f"{said}. These {n_tokens:,} tokens fit in the window, so its map is the same triangle a global layer draws; "
        f"a text over {window:,} tokens shows the band."
    )


def windowed_operations(n: int, d: int, windows: Sequence[int | None]) -> str:
    """Table 1's count for a model with local layers: a local layer scores each of n queries against at most w keys,
    n·w·d operations, a global one n²·d; '' for a model without local layers."""
    local = [i + 1 for i, w in enumerate(windows) if w is not None]
    if not local:
        return ""
    window = next(w for w in windows if w is not None)
    seen = min(n, window)
    said = (
        f"Layer{'s' if len(local) > 1 else ''} {ranges(local)} of this model {'are' if len(local) > 1 else 'is'} "
        f"local: each query scores at most w = {window:,} keys, so n·min(n, w)·d = {n}·{seen}·{d} = {n * seen * d:,} "
        f"operations, against n²·d = {n * n * d:,} for a global layer"
    )
    if n <= window:
        said += (
            f": the same on this sentence, whose {n} tokens fit in the window; from {window + 1:,} tokens on it is less"
        )
    said += (
        ". (This app scores every pair even in a local layer, so that it can draw what the window hides: the saving "
        "is an engine's that skips the hidden keys.)"
    )
    return said


def rollout_window_words(windows: Sequence[int | None], layer: int, n_tokens: int) -> str:
    """How local layers enter rollout and flow up to `layer` (from 0) on `n_tokens` tokens: no one window is theirs."""
    local = [i for i in range(layer + 1) if windows[i] is not None]
    if not local:
        return f"Layers 1-{layer + 1} are all global: no window enters rollout and flow here." if layer else ""
    smallest = min(windows[i] for i in local)
    if n_tokens <= smallest:
        return (
            f"These {n_tokens:,} tokens fit in the local layers' window of {smallest:,} keys, so no layer hides any "
            f"key here: rollout and flow up to layer {layer + 1} are what they would be with every layer global."
        )
    if layer == 0:
        return (
            "Rollout and flow up to layer 1 read that layer alone (with the residual's identity), so they too are 0 "
            "on the keys its window hides."
        )
    return (
        f"Rollout and flow combine layers 1-{layer + 1}, so no one window applies to them: each local layer enters "
        "with its own map, 0 on the keys its window hides, and a chain of layers can still reach keys further back "
        "through the positions in between."
    )
