"""Positional encoding: the paper's sinusoids, and a pretrained model's learned positions beside them."""

from __future__ import annotations

import html

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures import positional as figures
from attention_explorer.explorer.lesson import model_words
from attention_explorer.explorer.lesson.wording import learned_positions
from attention_explorer.explorer.run import positions as rotary_positions
from attention_explorer.explorer.run.positions import SAMPLES_PER_POSITION, neighbour_cosine, sinusoid_curves
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import focus_start, token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header
from attention_explorer.explorer.views.pickers import pick_head, pick_layer, pick_token

ROTARY_PAIRS = (0, 1, 4, 8, 16)  # fast to slow: pair i turns by theta_i = base^(-2i/d_head) per position
DISTANCES = 256  # how far apart the query and key are moved in the score-by-distance chart


def _base(value: float) -> str:
    """A rotary base as a reader writes it: 1,000,000, not 1e+06."""
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


def rotary_page(model_name: str) -> None:
    """Rotary positions (Su et al. 2021): nothing added; queries and keys turned by position, with this model's base."""
    loaded = cached.model(model_name)
    config = loaded.model.config
    # the base of layer 1's table, the one drawn (run.positions.rotary): a local layer's own where local ones have one
    base, d_head = loaded.family.block.span(0).rotary_base or loaded.family.block.positions.base, config.d_head
    turned = rotary_positions.turned_dims(loaded)  # the first `turned` of each head's d_head; partial rotary: fewer
    st.latex(
        r"\begin{pmatrix} q'_i \\ q'_{i + d/2} \end{pmatrix} = \begin{pmatrix} \cos(pos\,\theta_i) & "
        r"-\sin(pos\,\theta_i) \\ \sin(pos\,\theta_i) & \cos(pos\,\theta_i) \end{pmatrix}"
        r" \begin{pmatrix} q_i \\ q_{i + d/2} \end{pmatrix},"
        rf"\qquad \theta_i = {base:g}^{{-2i/{turned}}}"
        + ("" if turned == d_head else rf",\quad d = {turned};\ q_{{{turned}}}..q_{{{d_head - 1}}}\ \text{{unturned}}")
    )
    pairs_said, width = f"{d_head // 2} pairs of its {d_head} dimensions", f"one head's {d_head} dimensions"
    if turned < d_head:  # partial rotary: only the first dimensions turn
        pairs_said = (
            f"{turned // 2} pairs: its first {turned} of {d_head} dimensions; the other {d_head - turned} pass unturned"
        )
        width = f"the {turned} turned dimensions"
    positions = loaded.family.block.positions
    bases = model_words.rotary_base(base)
    drawn_kind = loaded.family.block.span(0).kind
    other = positions.local_base if drawn_kind == "global" else positions.base
    if len(positions.bases) == 2:  # local (sliding-window) layers turn with their own base
        bases = (
            f"the paper's sinusoid ones with two bases of this model's (the paper has one, 10000): "
            f"{_base(positions.base)} in its global layers, {_base(positions.local_base)} in its local "
            "(sliding-window) layers"
        )
    intro(
        "The 2017 paper adds a sinusoid to each token embedding (section 3.5). This model adds nothing to the "
        f"embedding: in every layer, each query and key is turned pair by pair ({pairs_said}) "
        "by an angle of position x theta_i (rotary positions, Su et al. 2021). The frequencies are "
        f"{bases}, over {width}. "
        "A turn keeps each pair's length, so q . k depends on the two tokens and on how far apart "
        "they are, not on where they sit."
    )
    theta = rotary_positions.rotary_frequencies(loaded)
    left, right = st.columns(2)
    most = min(512, config.max_len)
    shown = left.slider("Positions shown", min(8, most), most, min(64, most), key="positional_positions")
    pairs = [i for i in ROTARY_PAIRS if i < len(theta)]
    pairs = right.multiselect("Pairs (curves)", list(range(len(theta))), default=pairs, key="positional_pairs")
    st.subheader("How far each pair has turned: cos(position x theta_i)")
    if pairs:
        x = np.linspace(0, shown - 1, (shown - 1) * SAMPLES_PER_POSITION + 1)
        whole = np.cos(np.arange(shown)[:, None] * theta[None, :])
        smooth = (x, np.cos(x[:, None] * theta[None, pairs]))
        chart(figures.curves(whole, pairs, smooth, "pair", "cos(angle)"), "positional_curves")
        slowest = 2 * np.pi / theta[max(pairs)]
        st.caption(
            f"Dots are whole positions. Pair 0 turns a full circle every {2 * np.pi / theta[0]:.1f} positions; "
            f"pair {max(pairs)} every {slowest:,.0f}. The angles come from the model's own rotary table."
        )
        if len(positions.bases) == 2:  # theta_i = base^(-2i/d) for the other kind of layer, the same pairs
            others = other ** (-2 * np.arange(len(theta)) / turned)
            kind = "local" if drawn_kind == "global" else "global"
            st.caption(
                f"These curves are layer 1's, a {drawn_kind} layer (base {_base(base)}). The {kind} layers turn "
                f"with base {_base(other)}: pair 0 a full circle every {2 * np.pi / others[0]:.1f} positions, pair "
                f"{max(pairs)} every {2 * np.pi / others[max(pairs)]:,.0f} (theta_i = {_base(other)}^(-2i/{turned}))."
            )
    else:
        st.info("Pick at least one pair to draw its curve.")
    sidebar = state.sidebar(st.session_state)
    result = cached.get_trace(sidebar)
    kind = result.kinds[0]
    attention = result.attention(kind)
    tokens = result.labels_for(kind)[0]
    st.subheader("One query and key, moved apart")
    layer0, head0, _ = focus_start(kind)
    a, b, c, d = st.columns(4)
    layer = pick_layer(attention.n_layers, state.FOCUS_LAYER, a, layer0)
    head = pick_head(attention.n_heads, state.FOCUS_HEAD, b, index=head0)
    query = pick_token(tokens, "Query token", "positional_query", c, index=len(tokens) - 1)
    # the previous token: the first is where many heads park their weight (a sink), nearly flat at any distance
    key = pick_token(tokens, "Key token", "positional_key", d, index=max(0, len(tokens) - 2))
    if key > query:
        st.info("Under the causal mask a query sees only keys at or before it: pick a key no later than the query.")
        return
    distances, scores, own = rotary_positions.score_by_distance(
        loaded, result, kind, layer, head, query, key, DISTANCES
    )
    title = (
        f"Layer {layer + 1}, head {head + 1}: query {tokens[query]!r} and key {tokens[key]!r} placed 0 to "
        f"{len(distances) - 1} positions apart"
    )
    chart(figures.distance_scores(distances, scores, query - key, own, html.escape(title)), "positional_distance")
    at = scores[query - key] if query - key < len(scores) else float("nan")
    st.caption(
        f"The same two vectors (this head's q and k as projected, before turning) give a different score at every "
        f"distance. In the text they are {query - key} apart: the curve gives {at:.4f} there, and the model's own "
        f"score for the pair is {own:.4f} (float32 rounding aside, the same)."
    )


page_header("Positional encoding")
model_name = st.session_state[state.MODEL]
config = cached.model(model_name).model.config
if cached.model(model_name).family.block.positions.rotary:
    rotary_page(model_name)
    page_footer()
    st.stop()
st.latex(
    r"PE_{(pos,\,2i)} = \sin\!\left(pos / 10000^{2i/d_{model}}\right) \qquad "
    r"PE_{(pos,\,2i+1)} = \cos\!\left(pos / 10000^{2i/d_{model}}\right)"
)
intro(
    "Attention itself ignores order, so the Transformer adds a position vector to each token embedding "
    "(section 3.5). Each pair of dimensions is a sine and cosine of one frequency, from one cycle every "
    r"$2\pi$ positions down to one every $10000 \cdot 2\pi$; any fixed offset is then a linear map of the "
    "encoding. BERT- and GPT-2-family models instead learn one vector per position."
)

tables = cached.get_positions(model_name)
sinusoid = tables["sinusoidal"]
max_len, d_model = sinusoid.shape
left, right = st.columns(2)
positions = left.slider("Positions shown", 8, max_len, min(64, max_len), key="positional_positions")
# one fast, two middling and one slow frequency: the period grows with the dimension index
default_dims = [d for d in (0, 1, 40, 100, 200) if d < d_model]
dims = right.multiselect("Dimensions (curves)", list(range(d_model)), default=default_dims, key="positional_dims")
st.subheader("Sinusoids for chosen dimensions")
if dims:
    smooth = sinusoid_curves(positions, d_model, dims)
    chart(figures.curves(sinusoid[:positions], dims, smooth), "positional_curves")
    st.caption("Dots are the table's values at whole positions; the line is the formula between them.")
else:
    st.info("Pick at least one dimension to draw its curve.")

learned = tables.get("learned")
columns = st.columns(2) if learned is not None else [st.container()]
with columns[0]:
    chart(figures.table_heatmap(sinusoid[:positions], f"Sinusoidal, d_model {d_model}"), "positional_table")
    chart(figures.similarity_heatmap(sinusoid[:positions], "Sinusoidal: cosine(PE_i, PE_j)"), "positional_similarity")
if learned is not None:
    with columns[1]:
        chart(figures.table_heatmap(learned[:positions], "Learned (this model's own)"), "positional_learned_table")
        chart(
            figures.similarity_heatmap(learned[:positions], "Learned: cosine(P_i, P_j)"),
            "positional_learned_similarity",
        )
    family = cached.model(model_name).family
    st.caption(learned_positions(family, neighbour_cosine(learned), neighbour_cosine(sinusoid)))
token_legend()  # the marks its token labels use
page_footer()
