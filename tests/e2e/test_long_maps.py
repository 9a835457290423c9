"""A map past 512 tokens in real Chromium (a GPT-2 folder with 1,024 positions): a click on the overview draws that
region at full resolution, and typing a token's text into a picker finds its positions."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from attention_explorer.explorer.figures.labels import position_label
from attention_explorer.models import registry
from bench import harness
from bench.browser import CHARTS_DRAWN
from bench.harness import FRAGMENT_RUN, LAST_FINISH, TIMEOUT_MS, open_app, rerun, set_max_tokens, type_sentence
from bench.inputs import text_of
from tests.e2e.test_drill import POINT, TARGETS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KEY, N = "folder:long-gpt2", 600  # past zoom.FULL: an overview of 200 x 200 cells (3 x 3 weights each)
REGION = """(index) => {  // the region's first query and key, once chart `index` is drawn
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    return plot && plot.data && plot.data[0].y ? [plot.data[0].y[0], plot.data[0].x[0], plot.layout.title.text] : null;
}"""


@pytest.fixture(scope="module")
def long_model(tmp_path_factory):
    from tests.folders import make_gpt2_folder  # noqa: PLC0415

    folder = make_gpt2_folder(tmp_path_factory.mktemp("long") / "long-gpt2", n_positions=1024)
    with harness.app_server(env={registry.FOLDERS_ENV: f"long-gpt2={folder}"}) as url:
        yield url, registry.build(registry.catalogue({registry.FOLDERS_ENV: f"long-gpt2={folder}"})[KEY])


def opened_long(page, url: str, loaded, address: str) -> list[str]:
    """The page at `address` with the 600-token text; its tokens as the pages show them ('␣animal')."""
    open_app(page, f"{url}/{address}?model={KEY}")
    set_max_tokens(page, N)
    text = text_of(loaded, N)
    type_sentence(page, text)
    page.wait_for_function(CHARTS_DRAWN, timeout=TIMEOUT_MS)  # every chart drawn: nothing left to redraw a picker
    return list(loaded.family.spelling.labels(loaded.tokenizer.encode(text, N).tokens))


def opened_list(page, box) -> None:
    """Open a picker's list: a click that lands while Streamlit lays the page out can focus the box and leave it
    closed (as a person would, click again)."""
    for _ in range(5):
        box.click()
        try:
            expect(box).to_have_attribute("aria-expanded", "true", timeout=2000)
            return
        except AssertionError:
            page.keyboard.press("Escape")
    raise AssertionError("the picker's list did not open")


def test_a_click_on_the_overview_draws_that_region_at_full_resolution(long_model, page):
    url, loaded = long_model
    opened_long(page, url, loaded, "attention")
    expect(page.get_by_text("Each cell averages 3 x 3 weights", exact=False).first).to_be_visible(timeout=TIMEOUT_MS)
    xs, ys = page.wait_for_function(TARGETS, arg=0, timeout=TIMEOUT_MS).json_value()
    assert len(xs) == 60 * 60  # tiles of 10 x 10 positions
    tile = 41 * 60 + 7  # queries 410-419, keys 70-79
    x, y = page.evaluate(POINT, [0, xs[tile], ys[tile]])
    with rerun(page):
        page.mouse.move(x, y)
        page.mouse.click(x, y)
    # centred on the tile (query 415, key 75): a 64 x 64 region from 383 and from 43
    region_moved = f"() => {{ const r = ({REGION})(1); return r && r[0].startsWith('383: ') ? r : null; }}"
    handle = page.wait_for_function(region_moved, timeout=TIMEOUT_MS)
    first_query, first_key, title = handle.json_value()
    assert first_key.startswith("43: ") and "queries 383-446, keys 43-106" in title


def test_typing_a_token_finds_its_positions_and_picks_one(long_model, page):
    url, loaded = long_model
    tokens = opened_long(page, url, loaded, "qkv")
    word = next(t for t in tokens if t.lstrip("␣").isalpha() and len(t) > 4)  # a whole word of the text
    found = [position_label(i, t) for i, t in enumerate(tokens) if word.lstrip("␣") in t]
    assert len(found) > 3
    box = page.get_by_role("combobox", name="Query token", exact=True)
    opened_list(page, box)
    page.keyboard.type(word.lstrip("␣"))
    shown = page.get_by_role("option").all_text_contents()
    assert shown and shown == found[: len(shown)]  # only the positions whose token holds it, in order
    with rerun(page):
        page.get_by_role("option", name=found[2], exact=True).click()
    expect(box).to_have_value(found[2], timeout=TIMEOUT_MS)
    query = int(found[2].split(":")[0])
    expect(page.get_by_text(f"row {query}:", exact=False).first).to_be_visible(timeout=TIMEOUT_MS)


def test_moving_the_region_reruns_it_alone_and_a_row_of_it_opens_that_query(long_model, page):
    url, loaded = long_model
    tokens = opened_long(page, url, loaded, "attention")
    opened_list(page, page.get_by_test_id("stMain").get_by_role("combobox", name="Region size", exact=True))
    with rerun(page):
        page.get_by_role("option", name="32 x 32", exact=True).click()
    assert page.evaluate(LAST_FINISH) == FRAGMENT_RUN  # the overview and region only: not the page, not the app
    region_drawn = f"() => {{ const r = ({REGION})(1); return r && r[0] ? r : null; }}"
    handle = page.wait_for_function(region_drawn, timeout=TIMEOUT_MS)
    first_query = int(handle.json_value()[0].split(":")[0])
    xs, ys = page.wait_for_function(TARGETS, arg=1, timeout=TIMEOUT_MS).json_value()
    assert len(xs) == 32 * 32  # a click target a cell
    row = 5
    x, y = page.evaluate(POINT, [1, xs[row * 32 + 3], ys[row * 32 + 3]])
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.get_by_role("heading", name="Q, K, V step by step").wait_for(timeout=TIMEOUT_MS)
    query = first_query + row
    box = page.get_by_role("combobox", name="Query token", exact=True)
    expect(box).to_have_value(position_label(query, tokens[query]), timeout=TIMEOUT_MS)
