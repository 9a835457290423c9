"""Figure builders: the data drawn is the data given, and token labels are escaped."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.figures.heatmap import head_heatmap
from tests import tolerance
from tests.figdata import array


def test_heatmap_draws_the_weights_with_distinct_repeated_tokens():
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=3).astype(np.float32)
    fig = head_heatmap(weights, ["the", "cat", "the"], ["a", "the", "the", "."], "Layer 1, head 2").to_dict()
    heat = fig["data"][0]
    np.testing.assert_array_equal(array(heat["z"]), weights)
    assert list(heat["y"]) == ["0: the", "1: cat", "2: the"]  # one category per position: the two "the" stay apart
    assert list(fig["layout"]["yaxis"]["ticktext"]) == ["the", "cat", "the"]
    assert list(fig["layout"]["xaxis"]["ticktext"]) == ["a", "the", "the", "."]
    assert (heat["zmin"], heat["zmax"]) == (0, 1)


def test_hostile_tokens_are_escaped_in_ticks_and_hover():
    tokens = ["<b>", "<img src=x onerror=alert(1)>", "&amp;"]
    fig = head_heatmap(np.eye(3, dtype=np.float32), tokens, tokens).to_dict()
    ticks = list(fig["layout"]["xaxis"]["ticktext"])
    assert ticks == ["&lt;b&gt;", "&lt;img src=x onerror=alert(1)&gt;", "&amp;amp;"]
    assert list(fig["data"][0]["x"]) == ["0: &lt;b&gt;", "1: &lt;img src=x onerror=alert(1)&gt;", "2: &amp;amp;"]
    assert all("<" not in t for t in ticks)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="do not match"):
        head_heatmap(np.zeros((2, 3)), ["a", "b"], ["a", "b"])


def _long(n: int) -> tuple[np.ndarray, list[str]]:
    weights = np.random.default_rng(1).dirichlet(np.ones(n), size=n)  # float64, as a rollout is
    return weights, [f"w{i}" for i in range(n)]


@pytest.mark.parametrize("n", [3, 7, 16, 19, 20, 28, 40, 128, 512])
def test_long_inputs_name_at_most_forty_tokens_per_axis_and_hover_names_each(n):
    weights, tokens = _long(n)
    fig = head_heatmap(weights, tokens, tokens, "Layer 1, head 1")
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert len(axis.tickvals) == len(axis.ticktext) <= 40
        assert axis.automargin  # labels push the margins: never cut off in the page or the PNG
        if n > 40:  # thinned: evenly, every k-th, each named with its position
            step = int(axis.tickvals[1].split(":")[0])
            assert [int(v.split(":")[0]) for v in axis.tickvals] == list(range(0, n, step))
            assert list(axis.ticktext) == list(axis.tickvals)
        else:
            assert list(axis.ticktext) == tokens
    assert len(set(fig.data[0].x)) == len(set(fig.data[0].y)) == n  # every token still has its own hover
    narrow = head_heatmap(weights, tokens, tokens, narrow=True)  # half the page's width: up to 20 fit across
    assert len(narrow.layout.xaxis.tickvals) <= (20 if n <= 20 else 12)
    if n <= 20:  # when every token fits, every token is named: thinning is for long inputs
        assert list(narrow.layout.xaxis.ticktext) == list(narrow.layout.yaxis.ticktext) == tokens


def test_title_sits_in_a_margin_that_grows_to_hold_it():
    fig = head_heatmap(np.eye(3), ["a", "b", "c"], ["a", "b", "c"], "Layer 1, head 1")
    title = fig.layout.title
    # in the container's coordinates with automargin, Plotly keeps it clear of the top tick labels and axis title
    assert title.automargin and title.yref == "container" and title.yanchor == "top"
    assert fig.layout.height and fig.layout.margin.autoexpand is not False


def test_weights_go_out_as_float32_and_long_side_by_side_maps_as_block_means():
    weights, tokens = _long(512)
    fig = head_heatmap(weights, tokens, tokens, "A")
    assert fig.data[0].z.dtype == np.float32
    assert len(fig.to_json()) < 1_600_000  # a full 512 x 512 map: about 1.4 MB of base64 float32
    overview = head_heatmap(weights, tokens, tokens, "A", narrow=True, overview=256)
    z = array(overview.to_dict()["data"][0]["z"])
    assert z.shape == (256, 256)
    # the block's float64 sum of 4 terms in any order and its division (pooled_means_bound), then one float32
    # rounding, IEEE's and monotone: exactly the float32 nearest a value in that interval (usually one number), on
    # any machine; a bound of that one rounding sat at a 2.17x margin
    mean = weights[:2, :2].astype(np.float64).mean()
    near = tolerance.pooled_means_bound(4, mean)
    low, high = np.float32(mean - near), np.float32(mean + near)
    got = np.float32(z[0, 0])
    tolerance.assert_within(got, np.clip(got, low, high), 0.0, "a cell's block mean, the float32 of a value")
    assert overview.data[0].y[0] == "0-1: w0" and "each cell averages 2 x 2 weights" in overview.layout.title.text
    assert len(overview.to_json()) < 500_000


def test_a_grid_names_what_it_shows_in_its_own_title_escaped():
    from attention_explorer.explorer.figures.statistics import statistic_grid  # noqa: PLC0415

    values = np.arange(6, dtype=float).reshape(2, 3)
    labels = np.full((2, 3), "x", dtype=object)
    figure = statistic_grid(values, labels, "weight", title="Weight 3: <b>it</b> puts on 1: animal")
    assert figure.layout.title.text == "Weight 3: &lt;b&gt;it&lt;/b&gt; puts on 1: animal"  # exports keep it
    assert statistic_grid(values, labels, "weight").layout.title.text is None


def test_every_chart_is_drawn_with_dark_text_big_enough_for_a_projector():
    from plotly.subplots import make_subplots

    from attention_explorer.explorer.figures.style import TEXT, styled

    figure = make_subplots(rows=1, cols=2)
    figure.update_layout(xaxis2={"tickfont": {"size": 9}})  # a small inset's own size stays
    styled(figure)
    assert figure.layout.font.size >= 15 and figure.layout.font.color == TEXT
    assert figure.layout.xaxis.tickfont.size >= 13 and figure.layout.yaxis2.tickfont.color == TEXT
    assert figure.layout.xaxis.title.font.size >= 15
    assert figure.layout.xaxis2.tickfont.size == 9
    assert figure.layout.xaxis.exponentformat == figure.layout.yaxis2.exponentformat == "e"  # no 20µ or 1p


def test_presenter_mode_draws_every_legend_at_16_px_or_more():
    import plotly.graph_objects as go

    from attention_explorer.explorer.figures.complexity import operations
    from attention_explorer.explorer.figures.style import PRESENT_TICK_FONT, TEXT, styled
    from attention_explorer.explorer.run import complexity

    def legend(present: bool, own: dict | None = None) -> go.Figure:
        figure = go.Figure([go.Scatter(y=[1, 2], name="a"), go.Scatter(y=[2, 1], name="b")])
        if own:
            figure.update_layout(legend={"font": own, "title": {"text": "pairs"}})
        return styled(figure, present)

    # without a size of its own, the chart theme would draw the legend at 12 px: set explicitly, 16 px or more
    assert legend(True).layout.legend.font.size == PRESENT_TICK_FONT["size"] >= 16
    assert legend(True).layout.legend.font.color == TEXT
    drawn = legend(True, {"size": 11})
    assert drawn.layout.legend.font.size >= 16 and drawn.layout.legend.title.font.size >= 16
    assert legend(True, {"size": 18}).layout.legend.font.size == 18  # a larger size of its own stays
    assert legend(False, {"size": 11}).layout.legend.font.size == 11  # normal mode: the figure's own
    n, ours, recurrent = complexity.curves(64, 1000)
    table_one = styled(operations(n, ours, recurrent, 10, 64), present=True)  # a legend of its own, at 15 px
    assert table_one.layout.legend.font.size >= 16
