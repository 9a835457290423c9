"""Lesson step: one layer's sub-layers for the focus token, each wrapped in a residual connection and LayerNorm."""

from __future__ import annotations

from attention_explorer.explorer.lesson.model_words import ffn_activation
from attention_explorer.explorer.views import forward as forward_view
from attention_explorer.explorer.views.current import sidebar_family, sidebar_loaded, token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header

page_header()
family = sidebar_family()
activation = ffn_activation(sidebar_loaded().model.config.activation)
if family.norm == "rms":
    intro(
        "This model is pre-norm with RMSNorm: each sub-layer reads RMSNorm(x) (x divided by its root mean square, "
        "times a learned gain: no mean taken away and no bias, unlike LayerNorm), and its output is added back to the "
        "vector that entered it (the residual connection), with nothing after the addition: x + "
        "Sublayer(RMSNorm(x)). Then a gated feed-forward network (SwiGLU), the same for every position: two "
        "projections to d_ff numbers, one passed through SiLU and used as a gate on the other, then narrowed back. "
        "That is one layer; the stack repeats it N times and ends with one more RMSNorm."
        if family.gated_ffn
        else "This model is pre-norm with RMSNorm: each sub-layer reads RMSNorm(x), and its output is added back to "
        "the vector that entered it: x + Sublayer(RMSNorm(x)). The stack ends with one more RMSNorm."
    )
elif family.norm_first:
    intro(
        "This model is pre-LN (as GPT-2): each sub-layer reads LayerNorm(x), and its output is added back to the "
        "vector that entered it (the residual connection), with no LayerNorm after the addition: x + "
        "Sublayer(LayerNorm(x)). Then a feed-forward network, the same for every position, widens each vector to "
        f"d_ff numbers, {activation} and narrows it back, the same way. That is one layer; the stack repeats it N "
        "times and ends with one more LayerNorm."
    )
else:
    intro(
        "The attention output is added back to the vector that entered it (the residual connection) and normalised "
        "(LayerNorm): Add & Norm. Then a feed-forward network, the same for every position, widens each vector to "
        f"d_ff numbers, {activation} and narrows it back, again with Add & Norm. That is one layer; the stack "
        "repeats it N times."
    )
focus = forward_view.focus()
forward_view.layer(focus, number=1)
forward_view.movement(focus, number=2)
token_legend()  # the marks its token labels use
page_footer()
