"""Figure 1 as the lesson's map, on the paper's base shape and an encoder-only shape: arrows for the data flow, the
residual connections and the encoder's output, read back from the figure's own data; text large enough to read
projected; a click names a lesson step."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.figures.clicks import CLICKS
from attention_explorer.explorer.figures.overview import BADGES, clicked_step, figure_one, open_clicked
from attention_explorer.models.config import PAPER_BASE
from attention_explorer.models.families import descriptor

ENCODER_ONLY = dataclasses.replace(PAPER_BASE, n_decoder_layers=0, positional="learned", embedding_norm=True)
# GPT-2's shape: no encoder, pre-LN, learned positions, no embedding scale
DECODER_ONLY = dataclasses.replace(
    PAPER_BASE,
    n_encoder_layers=0,
    norm_first=True,
    positional="learned",
    scale_embeddings=False,
    share_embeddings=False,
)
CLOSE = 1e-9


def boxes(figure) -> list[dict]:
    """Every box: its label (the text annotation at its centre), centre and edges."""
    found = []
    for shape in figure.layout.shapes:
        if shape.type != "rect" or shape.fillcolor is None:
            continue
        y = (shape.y0 + shape.y1) / 2
        (label,) = [
            a.text
            for a in figure.layout.annotations
            if not a.showarrow and abs(a.y - y) < CLOSE and shape.x0 <= a.x <= shape.x1
        ]
        found.append({"label": label, "x": (shape.x0 + shape.x1) / 2, "y": y, "shape": shape})
    return found


def arrows(figure, name: str) -> list:
    return [a for a in figure.layout.annotations if a.showarrow and a.name == name]


def is_at(ax: float, ay: float, x: float, y: float) -> bool:
    return abs(ax - x) < CLOSE and abs(ay - y) < CLOSE


@pytest.mark.parametrize("config", [PAPER_BASE, ENCODER_ONLY], ids=["paper", "encoder-only"])
def test_data_flows_bottom_to_top_between_consecutive_boxes(config):
    figure = figure_one(config, "T")
    flows = arrows(figure, "flow")
    columns = sorted({b["x"] for b in boxes(figure)})
    assert len(columns) == (2 if config.is_encoder_decoder else 1)
    for x in columns:
        column = sorted((b for b in boxes(figure) if b["x"] == x), key=lambda b: b["y"])
        assert column[0]["label"].endswith("tokens")  # the lesson starts from the tokens
        for below, above in itertools.pairwise(column):
            assert [
                a for a in flows if is_at(a.ax, a.ay, x, below["shape"].y1) and is_at(a.x, a.y, x, above["shape"].y0)
            ], (below["label"], above["label"])
    assert len(flows) == len(boxes(figure)) - len(columns)


@pytest.mark.parametrize("config", [PAPER_BASE, ENCODER_ONLY], ids=["paper", "encoder-only"])
def test_every_sub_layer_has_a_residual_connection_around_it_into_its_add_and_norm(config):
    figure = figure_one(config, "T")
    residuals = arrows(figure, "residual")
    paths = [s for s in figure.layout.shapes if s.type == "path" and s.name == "residual"]
    norms = [b for b in boxes(figure) if b["label"] == "Add &amp; Norm"]
    assert len(norms) == (5 if config.is_encoder_decoder else 2) == len(residuals) == len(paths)
    encoder_x = min(b["x"] for b in boxes(figure))
    for norm in norms:
        box = norm["shape"]
        edge = box.x0 if norm["x"] == encoder_x else box.x1  # the encoder's on the left, the decoder's on the right
        (arrow,) = [a for a in residuals if is_at(a.x, a.y, edge, norm["y"])]
        outside = arrow.ax < box.x0 if norm["x"] == encoder_x else arrow.ax > box.x1
        assert outside and abs(arrow.ay - norm["y"]) < CLOSE  # along the side of the stack
        # its path leaves the stack's main line below the sub-layer that it bypasses
        sub_layer = next(b for b in boxes(figure) if b["x"] == norm["x"] and abs(b["y"] - (norm["y"] - 1)) < CLOSE)
        (path,) = [p for p in paths if p.path.endswith(f"L {arrow.ax},{arrow.ay}")]
        start_x, start_y = (float(v) for v in path.path.split()[1].split(","))
        assert start_x == norm["x"] and start_y < sub_layer["shape"].y0
        assert "attention" in sub_layer["label"] or "Feed-forward" in sub_layer["label"]


def test_the_encoders_output_feeds_the_decoders_cross_attention():
    figure = figure_one(PAPER_BASE, "T")
    (arrow,) = arrows(figure, "memory")
    cross = next(b for b in boxes(figure) if b["label"].startswith("Cross-attention"))
    assert is_at(arrow.x, arrow.y, cross["shape"].x0, cross["y"])
    assert not arrows(figure_one(ENCODER_ONLY, "T"), "memory")


def test_an_encoder_only_model_draws_no_decoder_step():
    figure = figure_one(ENCODER_ONLY, "T")
    stems = {row[0] for trace in figure.data if trace.meta == CLICKS for row in trace.customdata}
    assert stems and not stems & {
        page.stem for page in navigation.lacking(descriptor.for_config(ENCODER_ONLY, "x", "random"))
    }
    assert not [b for b in boxes(figure) if "Linear" in b["label"] or "Loss" in b["label"]]
    assert "+ learned positions, token type, LayerNorm" in [b["label"] for b in boxes(figure)]


def test_a_decoder_only_model_draws_one_pre_ln_stack_with_its_output_and_loss():
    figure = figure_one(DECODER_ONLY, "T")
    labels = [b["label"] for b in boxes(figure)]
    assert labels[0] == "Inputs: tokens (the text)" and labels[3].startswith("Masked self-attention")
    assert not [label for label in labels if "Cross" in label or "Add &amp; Norm" in label or "Add & Norm" in label]
    assert labels.count("Add (pre-LN: the LayerNorm comes before the sub-layer)") == 2
    assert labels[-3].startswith("Final LayerNorm, then linear") and labels[-1].startswith("Loss")
    stems = {row[0] for trace in figure.data if trace.meta == CLICKS for row in trace.customdata}
    assert {"final_linear", "loss", "query_key_value", "add_norm", "model_view"} <= stems
    titles = [a.text for a in figure.layout.annotations if "layers" in str(a.text)]
    assert titles == [f"Decoder-only: N = {DECODER_ONLY.n_decoder_layers} layers"]


@pytest.mark.parametrize(
    "config", [PAPER_BASE, ENCODER_ONLY, DECODER_ONLY], ids=["paper", "encoder-only", "decoder-only"]
)
def test_every_text_is_at_least_15_px(config):
    figure = figure_one(config, "T")
    assert all(a.font.size >= 15 for a in figure.layout.annotations if a.text)
    badges = next(trace for trace in figure.data if trace.meta == BADGES)
    assert badges.textfont.size >= 15 and len(badges.text) == len(boxes(figure)) + (
        2 if config.is_encoder_decoder else 1
    )


def test_a_click_names_a_lesson_step():
    assert clicked_step({"customdata": ["add_norm"]}) is navigation.BY_STEM["add_norm"]
    assert clicked_step({"customdata": "loss"}) is navigation.BY_STEM["loss"]
    for point in (None, {}, {"customdata": []}, {"customdata": [3, 1]}, {"customdata": ["attention"]}):
        assert clicked_step(point) is None  # nothing, a heatmap cell, an Explore page: no step
    assert clicked_step({"customdata": ["overview"]}) is None  # the map itself is not a step to open
    session = {}
    open_clicked(session, "drill", {"customdata": ["nothing"]})
    assert session == {}
    open_clicked(session, "drill", {"customdata": ["query_key_value"]})
    assert session == {"drill": "explorer/pages/query_key_value.py"}


def test_a_parallel_block_draws_both_sub_layers_side_by_side_from_one_input_into_one_addition():
    # GPT-NeoX's shape: x + Attn(LayerNorm1(x)) + FFN(LayerNorm2(x))
    figure = figure_one(dataclasses.replace(DECODER_ONLY, parallel_residual=True, positional="rotary"), "T")
    found = boxes(figure)
    attention = next(b for b in found if b["label"].startswith("Masked attention"))
    ffn = next(b for b in found if b["label"].startswith("Feed-forward"))
    (add,) = [b for b in found if b["label"].startswith("Add")]
    assert add["label"] == "Add both (pre-LN: each reads its own LayerNorm)"
    assert attention["y"] == ffn["y"] and attention["shape"].x1 < ffn["shape"].x0  # side by side, not overlapping
    below = next(b for b in found if b["label"].startswith("No position added"))
    flows = arrows(figure, "flow")
    for sub_layer in (attention, ffn):  # each reads the same stream, and its output goes into the one addition
        assert [a for a in flows if is_at(a.ax, a.ay, below["x"], below["shape"].y1) and a.x == sub_layer["x"]]
        assert [a for a in flows if a.ax == sub_layer["x"] and is_at(a.x, a.y, add["x"], add["shape"].y0)]
    (residual,) = arrows(figure, "residual")  # one connection around both, into the addition
    assert is_at(residual.x, residual.y, add["shape"].x0, add["y"])
    assert figure.layout.title.text.endswith("pre-LN, parallel block")
