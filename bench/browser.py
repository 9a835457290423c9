"""In headless Chromium: from pressing Ctrl+Enter on a new sentence to its heatmap being drawn."""

from __future__ import annotations

import statistics
import time
import urllib.parse

from attention_explorer.models import registry
from bench import folders, harness
from bench.inputs import lengths_for, text_of

LENGTHS = (16, 64, 512)


def run(lengths=LENGTHS, repeats: int = 3) -> list[dict]:
    loaded = registry.load("minilm")
    rows = []
    with harness.app_server() as url, harness.chromium() as browser:
        page = harness.new_page(browser)
        harness.open_app(page, f"{url}/attention")  # the heatmap: chart 0 is what is timed
        for tokens in lengths:
            harness.set_max_tokens(page, tokens)
            times = []
            for attempt in range(repeats + 1):  # the first is a warm-up
                # a different sentence each time, so no cached trace answers it
                text = f"{attempt} " + text_of(loaded, tokens)
                expected = loaded.tokenizer.encode(text, tokens)
                harness.type_sentence(page, text, press_enter=False)
                start = time.perf_counter()
                harness.sentence_box(page).press(harness.RUN_KEY)
                harness.wait_for_tokens(page, list(expected.tokens))
                if attempt:
                    times.append(time.perf_counter() - start)
            rows.append({"tokens": tokens, "enter_to_drawn_s": round(statistics.median(times), 3)})
    return rows


def table(rows: list[dict]) -> str:
    return "\n".join(
        [f"{'tokens':>6}  enter_to_drawn_s"] + [f"{r['tokens']:>6}  {r['enter_to_drawn_s']:.3f}" for r in rows]
    )


PAGE_LENGTHS = (16, 128, 512)
# the pretrained encoder, the paper's encoder-decoder, and the two toy encoder-decoders (which read at most 32 tokens)
PAGE_MODELS = ("minilm", "paper-random", "translate", "reverse")
NEXT_FRAMES = harness.NEXT_FRAMES
# The run's end is not the page drawn: Streamlit mounts a Plotly chart only once its plotly.js chunk has loaded (a
# skeleton until then, about a second on a new tab), and Plotly then draws its SVG. So: no skeleton left on the page
# and every chart holding its drawing.
CHARTS_DRAWN = """() => {
    const main = document.querySelector('[data-testid="stMain"]');
    if (!main || main.querySelector('[data-testid="stSkeleton"]')) return false;
    return [...main.querySelectorAll('[data-testid="stPlotlyChart"]')].every(chart => chart.querySelector('.main-svg'));
}"""


def page_name(href: str | None) -> str:
    """A page by its address, not its link's text (which carries its icon's ligature name too)."""
    return urllib.parse.urlparse(href or "").path.strip("/") or "overview"


def sentence_session(browser, url: str, model: str, text: str, tokens: int) -> tuple[object, list[int]]:
    """A new browser session that has typed `text` at `tokens` max tokens with `model`, standing on the Train page (it
    reads no sentence), and the count of bytes the server has sent it (reset it before what is measured)."""
    page = harness.new_page(browser)
    received = [0]

    def count(payload) -> None:
        received[0] += len(payload)

    page.on("websocket", lambda socket: socket.on("framereceived", count))
    page.goto(f"{url}/train?model={model}", timeout=harness.TIMEOUT_MS)  # the address picks the model
    page.wait_for_function(harness.SETTLED, arg=0, timeout=harness.TIMEOUT_MS)
    box = page.get_by_test_id("stSidebar").get_by_test_id("stNumberInputField").first
    if box.input_value() != str(tokens):  # the same value again would start no run to wait for
        harness.set_max_tokens(page, tokens)
    harness.type_sentence(page, text)
    return page, received


def each_page(page, only: tuple[str, ...] = (), skip: tuple[str, ...] = ()):
    """(address stem, its menu link, its menu open) for each page of the navigation in order, or those in `only`,
    less those in `skip`."""
    for title in harness.menu_titles(page):
        link = harness.menu_link(page, title)
        name = page_name(link.get_attribute("href"))
        if (only and name not in only) or name in skip:
            page.keyboard.press("Escape")  # the menu closes again
            continue
        yield name, link


def open_timed(page, link, received: list[int]) -> tuple[float, float]:
    """Click a menu link: seconds until the page's run finished and every chart is drawn and painted, MB sent."""
    received[0] = 0
    start = time.perf_counter()
    with harness.rerun(page):
        link.click()
    harness.run_if_asked(page)
    page.wait_for_function(CHARTS_DRAWN, timeout=harness.TIMEOUT_MS)
    page.evaluate(NEXT_FRAMES)
    return round(time.perf_counter() - start, 2), round(received[0] / 1e6, 2)


def pages(
    lengths=PAGE_LENGTHS, models=PAGE_MODELS, only: tuple[str, ...] = (), skip: tuple[str, ...] = ()
) -> list[dict]:
    """Every page of the sidebar (or those named in `only`, less those in `skip`: head_effects turns off every head
    in batched forwards, a minute for SmolLM2 at 64 tokens) opened after a sentence of each length, for each model
    (max tokens set to that length): seconds from the click to the page's run finished and every chart drawn and
    painted (CHARTS_DRAWN; the browser's own drawing included), and the megabytes the server sent for it over the
    websocket. Each length starts a new session on the Train page, so the first page that
    reads the sentence pays for its run, as a person's first page would. A bench folder among `models`
    ("folder:gpt2-small", bench.folders) is built if need be and offered to the server. `error`: the first line of
    the page's first exception ("" for none), shown in full by this server (the app's own config hides it)."""
    rows = []
    env = folders.use(models) | {"STREAMLIT_CLIENT_SHOW_ERROR_DETAILS": "full"}
    with harness.app_server(env=env) as url, harness.chromium() as browser:
        for model in models:
            loaded = registry.load(model)
            for tokens in lengths_for(loaded.max_tokens, lengths):
                page, received = sentence_session(browser, url, model, text_of(loaded, tokens), tokens)
                for title, link in each_page(page, only, skip):
                    seconds, mb = open_timed(page, link, received)
                    rows.append(
                        {
                            "model": model,
                            "tokens": tokens,
                            "page": title,
                            "seconds": seconds,
                            "mb": mb,
                            "error": first_error(page),
                        }
                    )
                page.context.close()
    return rows


def first_error(page) -> str:
    """The first line of the page's first exception (its type and message), or "" when it shows none."""
    shown = page.get_by_test_id("stException")
    return shown.first.inner_text().strip().split("\n", 1)[0] if shown.count() else ""


def pages_table(rows: list[dict]) -> str:
    lines = [f"{'model':<17} {'tokens':>6}  {'page':<20} {'seconds':>8} {'MB':>7}  error"]
    lines += [
        f"{r['model']:<17} {r['tokens']:>6}  {r['page']:<20} {r['seconds']:>8.2f} {r['mb']:>7.2f}  {r['error'][:100]}"
        for r in rows
    ]
    return "\n".join(lines)
