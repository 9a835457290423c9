"""The corpus view's figures draw exactly the numbers they are given, with hostile tokens escaped."""

from __future__ import annotations

import numpy as np

from attention_explorer.explorer.figures import corpus


def _points(n=7, seed=0):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(2 * n, 2))
    roles = ["query"] * n + ["key"] * n
    positions = np.tile(np.arange(n), 2)
    tokens = [f"<b>t{i}</b>" for i in range(n)] * 2
    texts = np.tile(np.arange(n) % 3, 2)
    return points, roles, positions, tokens, texts


def test_projection_draws_each_query_and_key_where_it_was_projected():
    points, roles, positions, tokens, texts = _points()
    figure = corpus.projection(points, roles, positions, tokens, texts, explained=(0.5, 0.25))
    queries, keys = figure.data
    assert (queries.name, keys.name) == ("queries", "keys")
    np.testing.assert_array_equal(np.asarray(queries.x), points[:7, 0])
    np.testing.assert_array_equal(np.asarray(keys.y), points[7:, 1])
    np.testing.assert_array_equal(np.asarray(queries.marker.color), positions[:7])
    assert queries.marker.symbol == "circle" and keys.marker.symbol == "x"
    # text numbers count from 1 on hover; tokens escaped
    assert list(queries.customdata[:, 2]) == list(texts[:7] + 1)
    assert all("<b>" not in str(label) and "&lt;b&gt;" in str(label) for label in queries.customdata[:, 1])
    assert "50% of the variance" in figure.layout.xaxis.title.text


def test_projection_coloured_by_role_has_no_colour_scale():
    points, roles, positions, tokens, texts = _points()
    figure = corpus.projection(points, roles, positions, tokens, texts, colour="role")
    assert figure.data[0].marker.color != figure.data[1].marker.color
    assert figure.data[0].marker.colorscale is None


def test_top_texts_keeps_the_values_and_escapes_the_names():
    figure = corpus.top_texts([0.9, 0.5], ["<script>x</script>", "plain"], "previous token")
    (bars,) = figure.data
    assert list(bars.x) == [0.9, 0.5]
    assert bars.y[0] == "&lt;script&gt;x&lt;/script&gt;"
