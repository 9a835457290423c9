"""The Q/K/V page's W^Q, W^K, W^V of one head: the model's own matrices, drawn entry by entry while the three fit in
walkthrough.MATRIX_CELLS, past that as block means (the cell's size said), and every entry when the visitor asks."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.figures import walkthrough as figures
from attention_explorer.explorer.run import blocks, forward
from attention_explorer.explorer.views.chart import chart
from attention_explorer.models.anatomy import describe

# base64 of float32 (4 bytes -> 16/3 characters), with Plotly's JSON writing each "/" (1 of base64's 64 characters)
# as the 6 characters "\u002f": what one drawn entry costs to send, about
SENT_BYTES = 4 * 4 / 3 * (1 + 5 / 64)


def key_value_head(config, head: int) -> int:
    """The key/value head query head `head` reads, from 0 (itself without grouped-query attention)."""
    return head // (config.n_heads // describe(config).kv_heads)


def sharing_text(sharing: tuple[int, ...]) -> str:
    """Which query heads share one key/value head (grouped-query attention), counted from 1."""
    heads = ", ".join(str(h + 1) for h in sharing[:-1]) + f" and {sharing[-1] + 1}"
    return (
        f"Grouped-query attention: query heads {heads} share one key/value head, so they read the very same keys "
        "and values and differ only in their queries"
    )


def draw(loaded, s, view) -> None:
    """Head s.head's W^Q and its key/value head's W^K, W^V (forward.head_projections), and what they are a slice of."""
    config, head = loaded.model.config, s.head
    w = forward.head_projections(loaded, s.kind, s.layer, head)
    kv = key_value_head(config, head)
    kv_name = f"head {head + 1}" if len(s.sharing) == 1 else f"key/value head {kv + 1}"
    shape = w.w_q.shape  # (d_model, d_head)
    f_r, f_c = blocks.fewest_within(*shape, figures.MATRIX_CELLS // 3)
    every = f_r * f_c == 1 or st.toggle(
        f"Every entry: {3 * shape[0] * shape[1]:,} numbers, about {3 * shape[0] * shape[1] * SENT_BYTES / 1e6:.1f} "
        "MB to send",
        key="qkv_matrices_every",
        help="Drawn as block means, the three matrices send as many cells as a long attention map's overview.",
    )
    chart(
        figures.projection_matrices(
            [w.w_q, w.w_k, w.w_v],
            [f"W^Q (head {head + 1})", *(f"W^{m} ({kv_name})" for m in "KV")],
            f"Layer {s.layer + 1}, head {head + 1}: {config.d_model} rows (input dimensions) x {s.d_head} columns "
            "(the head's)",
            height=320,
            cells=None if every else figures.MATRIX_CELLS,
        ),
        "qkv_matrices",
        view=view,
    )
    layer_matrix = "d_model x d_model" if config.d_model == s.d_model else f"{config.d_model} x {s.d_model}"
    drawn = (
        ""
        if every
        else f" Drawn as block means, {figures.blocks_note(*shape, f_r, f_c)}; the hover names each cell's rows and "
        "gives its mean."
    )
    st.caption(
        (
            f"Each is a slice of the layer's {layer_matrix} matrix: this head owns columns "
            f"{head * s.d_head} to {(head + 1) * s.d_head - 1}"
            if len(s.sharing) == 1
            else f"W^Q is columns {head * s.d_head} to {(head + 1) * s.d_head - 1} of the layer's {layer_matrix} "
            f"matrix; W^K and W^V are the {s.d_head} columns of key/value head "
            f"{s.sharing[0] // len(s.sharing) + 1} in matrices of d_model x {s.d_model // len(s.sharing)} "
            f"({sharing_text(s.sharing)})"
        )
        + ". One colour scale for all three, clipped at the 99th percentile of their entries."
        + drawn
    )
