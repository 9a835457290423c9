"""The paper's figure 1 for a given configuration: encoder (and decoder) stacks as labelled blocks."""

from __future__ import annotations

import plotly.graph_objects as go

from models.config import TransformerConfig

COLOURS = {
    "attention": "#fbe3c2",
    "norm": "#f6f6c4",
    "ffn": "#c9e8f5",
    "embedding": "#f5d0d0",
    "output": "#d9d2ee",
}
WIDTH = 3.0


def blocks(config: TransformerConfig) -> list[tuple[str, str, float, float]]:
    """(label, colour kind, x centre, y centre) for every block of figure 1, bottom to top."""
    encoder_x, decoder_x = (0.0, 4.5) if config.is_encoder_decoder else (2.2, 0.0)
    position = "Positional encoding (sinusoid)" if config.positional == "sinusoidal" else "Learned positions"
    scale = " x sqrt(d_model)" if config.scale_embeddings else ""
    extra = " + token type, LayerNorm" if config.embedding_norm else ""
    found = [
        (f"Input embedding{scale}", "embedding", encoder_x, 0.0),
        (f"+ {position}{extra}", "embedding", encoder_x, 1.0),
        (f"Multi-head self-attention (h = {config.n_heads})", "attention", encoder_x, 2.2),
        ("Add &amp; Norm", "norm", encoder_x, 3.0),
        (f"Feed-forward ({config.d_model} → {config.d_ff} → {config.d_model})", "ffn", encoder_x, 3.9),
        ("Add &amp; Norm", "norm", encoder_x, 4.7),
    ]
    if config.is_encoder_decoder:
        found += [
            (f"Output embedding{scale} (shifted right)", "embedding", decoder_x, 0.0),
            (f"+ {position}", "embedding", decoder_x, 1.0),
            (f"Masked multi-head self-attention (h = {config.n_heads})", "attention", decoder_x, 2.2),
            ("Add &amp; Norm", "norm", decoder_x, 3.0),
            (f"Multi-head cross-attention (h = {config.n_heads})", "attention", decoder_x, 3.8),
            ("Add &amp; Norm", "norm", decoder_x, 4.6),
            (f"Feed-forward ({config.d_model} → {config.d_ff} → {config.d_model})", "ffn", decoder_x, 5.4),
            ("Add &amp; Norm", "norm", decoder_x, 6.2),
            (f"Linear ({config.d_model} → {config.target_vocab_size})", "output", decoder_x, 7.4),
            ("Softmax: output probabilities", "output", decoder_x, 8.2),
        ]
    return found


def figure_one(config: TransformerConfig, title: str) -> go.Figure:
    """Figure 1 of the paper with this model's N, h, d_model and d_ff; encoder-only models get the encoder only."""
    shapes, annotations = [], []
    for label, kind, x, y in blocks(config):
        shapes.append(
            {
                "type": "rect",
                "x0": x - WIDTH / 2,
                "x1": x + WIDTH / 2,
                "y0": y - 0.3,
                "y1": y + 0.3,
                "fillcolor": COLOURS[kind],
                "line": {"color": "#555", "width": 1},
            }
        )
        annotations.append({"x": x, "y": y, "text": label, "showarrow": False, "font": {"size": 15, "color": "#111"}})
    encoder_x, decoder_x = (0.0, 4.5) if config.is_encoder_decoder else (2.2, 0.0)
    stacks = [(encoder_x, 1.7, 5.2, f"Encoder: N = {config.n_encoder_layers} layers")]
    if config.is_encoder_decoder:
        stacks.append((decoder_x, 1.7, 6.7, f"Decoder: N = {config.n_decoder_layers} layers"))
    for x, y0, y1, label in stacks:
        shapes.append(
            {
                "type": "rect",
                "x0": x - WIDTH / 2 - 0.2,
                "x1": x + WIDTH / 2 + 0.2,
                "y0": y0,
                "y1": y1,
                "line": {"color": "#888", "width": 2, "dash": "dot"},
            }
        )
        annotations.append(
            {
                "x": x,
                "y": y1 + 0.25,
                "text": label,
                "font": {"weight": "bold", "size": 15, "color": "#111"},
                "showarrow": False,
            }
        )
    if config.is_encoder_decoder:  # the encoder's output feeds every decoder layer's cross-attention
        annotations.append(
            {
                "x": decoder_x - WIDTH / 2,
                "y": 3.8,
                "ax": encoder_x + WIDTH / 2,
                "ay": 4.7,
                "xref": "x",
                "yref": "y",
                "axref": "x",
                "ayref": "y",
                "text": "",
                "showarrow": True,
                "arrowhead": 2,
            }
        )
    norm = "pre-LN" if config.norm_first else "post-LN"
    figure = go.Figure()
    figure.update_layout(
        title={"text": f"{title}: d_model = {config.d_model}, d_ff = {config.d_ff}, h = {config.n_heads}, {norm}"},
        shapes=shapes,
        annotations=annotations,
        height=640 if config.is_encoder_decoder else 440,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis={"visible": False, "range": [-2.0, 6.5] if config.is_encoder_decoder else [0, 4.4]},
        yaxis={"visible": False, "range": [-0.6, 9.0 if config.is_encoder_decoder else 5.8]},
        plot_bgcolor="white",
    )
    return figure
