"""The lesson table: one path in the paper's order, every page a file, every old address still a page."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from attention_explorer.explorer import navigation
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families import descriptor

ROOT = Path(__file__).resolve().parents[2]
# the pages' addresses before the lesson (shared links must keep working)
OLD_ADDRESSES = (
    "overview", "attention", "model_view", "head_view", "positional", "qkv", "forward", "decoding", "output",
    "find_heads", "statistics", "aggregation", "compare", "compare_sentences", "reference", "train",
)  # fmt: skip


def test_steps_are_numbered_in_order_and_reach_the_loss_and_training():
    assert [page.step for page in navigation.LESSON] == list(range(navigation.N_STEPS + 1))
    assert navigation.N_STEPS >= 10
    stems = [page.stem for page in navigation.STEPS]
    # the paper's order: tokens before embeddings before positions before attention ... loss before training
    order = ["tokens", "embedding", "positional", "query_key_value", "scores", "multi_head", "add_norm"]
    assert stems[: len(order)] == order
    assert stems[-2:] == ["loss", "train"]
    assert stems.index("why_attention") < stems.index("decoding") < stems.index("final_linear") < stems.index("loss")


def test_every_page_is_a_file_and_old_addresses_still_exist():
    pages = [page for pages in navigation.MENUS.values() for page in pages]
    assert len({page.stem for page in pages}) == len(pages)
    for page in pages:
        assert (ROOT / page.script).is_file(), page.script
    assert set(OLD_ADDRESSES) <= set(navigation.BY_STEM)
    assert all(page.step is None for page in navigation.EXPLORE)


def test_previous_and_next_walk_the_path_both_ways():
    page, seen = navigation.OVERVIEW, []
    while page is not None:
        seen.append(page.stem)
        before, page = navigation.neighbours(page.stem)
    assert seen == [page.stem for page in navigation.LESSON]
    assert navigation.neighbours("overview")[0] is None
    assert navigation.neighbours("tokens")[0] is navigation.OVERVIEW
    assert navigation.neighbours("train") == (navigation.BY_STEM["loss"], None)
    assert navigation.neighbours("attention") == (None, None)  # an Explore page is not on the path


def test_an_encoder_only_model_lacks_the_decoder_steps():
    config = TransformerConfig(vocab_size=8, d_model=8, n_heads=2, d_ff=8, n_encoder_layers=1, n_decoder_layers=0)
    encoder_only = descriptor.for_config(config, "BERT family", "random")
    assert [page.stem for page in navigation.lacking(encoder_only)] == [
        "decoding",
        "final_linear",
        "layer_predictions",
        "loss",
    ]
    for shape in ((1, 1), (0, 1)):  # encoder-decoder, decoder-only: both have a next-token head
        config = replace(config, n_encoder_layers=shape[0], n_decoder_layers=shape[1])
        assert navigation.lacking(descriptor.for_config(config, "ours", "random")) == ()
    assert navigation.BY_STEM["tokens"].label == "1. Tokens and ids"
