"""A live `streamlit run app.py` on a free loopback port and Debian's headless Chromium (tests and benchmarks)."""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from attention_explorer.explorer.figures.labels import escape_tokens, position_labels

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Every wait on the browser has this limit: generous, since a busy 2-core machine can be many times slower than an
# idle one. A wait ends as soon as what it waits for is there; the limit only says when to give up.
TIMEOUT_MS = 300_000
OPEN_MS = 15_000  # a dropdown's list shows this soon after its click, or the click is tried again

# Counts the app's finished script runs as the server announces them: every message on the app's websocket is a
# ForwardMsg (protobuf); one whose field 6 (script_finished) is set ends a run. A run too quick to show on screen
# is still counted, so a test waits for the run its own action caused, never for a guessed time.
RUN_COUNTER = """(() => {
    window.__finishedRuns = 0;
    const varint = (bytes, at) => {
        let value = 0, shift = 0, byte;
        do { byte = bytes[at++]; value += (byte & 0x7f) * 2 ** shift; shift += 7; } while (byte & 0x80);
        return [value, at];
    };
    const finished = (buffer) => {  // the top-level fields of one ForwardMsg: its script_finished status, or null
        const bytes = new Uint8Array(buffer);
        let at = 0, tag, length;
        while (at < bytes.length) {
            [tag, at] = varint(bytes, at);
            const wire = tag & 7, field = Math.floor(tag / 8);
            if (wire === 0) { let value; [value, at] = varint(bytes, at); if (field === 6) return value; }
            else if (wire === 1) at += 8;
            else if (wire === 2) { [length, at] = varint(bytes, at); at += length; }
            else if (wire === 5) at += 4;
            else return null;
        }
        return null;
    };
    const Native = window.WebSocket;
    function Counting(...args) {
        const socket = new Native(...args);
        socket.addEventListener('message', (event) => {
            const status = event.data instanceof ArrayBuffer ? finished(event.data) : null;
            if (status !== null && status !== 2) {  // 2: ended early for another run, which will finish itself
                window.__finishedRuns += 1;
                window.__lastFinish = status;
            }
        });
        return socket;
    }
    Counting.prototype = Native.prototype;
    Object.assign(Counting, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
    window.WebSocket = Counting;
})()"""
FINISHED_RUNS = "() => window.__finishedRuns || 0"
LAST_FINISH = "() => window.__lastFinish"  # how the last run finished: 0 the whole app, 3 a fragment only
FRAGMENT_RUN = 3  # ForwardMsg.ScriptFinishedStatus.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
NEXT_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"  # painted
# a run has finished since `before`, and the page shows its result: not running, no element left stale
SETTLED = """(before) => (window.__finishedRuns || 0) > before
    && document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-stale="true"]')"""


class Served(str):
    """The app's URL; `.pid` is the server process (its CPU time and memory are read from /proc)."""

    pid: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def app_server(
    timeout: float = 300,
    env: dict[str, str] | None = None,
    command: Callable[[int], list[str]] | None = None,
    cwd: Path = ROOT,
) -> Iterator[Served]:
    """Start the app, wait for /_stcore/health, yield its URL, and stop it afterwards. `env` adds variables;
    `command(port)` replaces the clone's `streamlit run app.py` (an installed `attention-explorer serve`)."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    cmd = (
        command(port)
        if command is not None
        else [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
        ]
    )
    log = tempfile.TemporaryFile()  # noqa: SIM115 -- a file, not a pipe: a full pipe nobody reads stalls the server
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"streamlit did not start: {log.read().decode()[-2000:]}") from None
                time.sleep(0.5)
        served = Served(url)
        served.pid = proc.pid
        yield served
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextlib.contextmanager
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser, width: int = 1400, height: int = 1000):
    """A page in a fresh context (a new person): generous default timeouts and the run counter installed."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    context.add_init_script(RUN_COUNTER)
    return context.new_page()


@contextlib.contextmanager
def rerun(page, timeout: float = TIMEOUT_MS) -> Iterator[None]:
    """The block's action makes the app run its script; wait until a run that began after it has finished."""
    before = page.evaluate(FINISHED_RUNS)
    yield
    page.wait_for_function(SETTLED, arg=before, timeout=timeout)


ASKED = "Run the model on this text"  # a long text's first run asks first (explorer/app/store.asked_first)


def run_if_asked(page) -> bool:
    """Click a long text's ask-first button where the page shows one, and wait for the run; whether it asked."""
    button = page.get_by_test_id("stMain").get_by_role("button", name=ASKED)
    if not button.count():
        return False
    with rerun(page):
        button.first.click()
    return True


def open_app(page, url: str) -> None:
    """Open an address (a new document, so its run count starts at 0) and wait for its first run to finish."""
    page.goto(url, timeout=TIMEOUT_MS)
    page.wait_for_function(SETTLED, arg=0, timeout=TIMEOUT_MS)
    page.wait_for_selector(".js-plotly-plot", timeout=TIMEOUT_MS)


def set_max_tokens(page, n: int) -> None:
    box = page.get_by_test_id("stSidebar").get_by_test_id("stNumberInputField").first  # not a page's own input
    box.fill(str(n))
    with rerun(page):
        box.press("Enter")


def menu_link(page, title: str):
    """The navigation's link to the page titled `title`, its menu in the header opened (the links of a closed menu
    are not in the page)."""
    sections = page.get_by_test_id("stTopNavSection")
    links = page.get_by_test_id("stTopNavDropdownLink")
    for i in range(sections.count()):
        sections.nth(i).click()
        links.first.wait_for(timeout=TIMEOUT_MS)
        found = links.filter(has=page.get_by_text(title, exact=True))
        if found.count():
            return found.first
        page.keyboard.press("Escape")
        links.first.wait_for(state="detached", timeout=TIMEOUT_MS)
    raise LookupError(f"no page titled {title!r} in the navigation")


def menu_titles(page) -> list[str]:
    """Every page's title, menu by menu, in the navigation's order."""
    sections = page.get_by_test_id("stTopNavSection")
    links = page.get_by_test_id("stTopNavDropdownLink")
    titles = []
    for i in range(sections.count()):
        sections.nth(i).click()
        links.first.wait_for(timeout=TIMEOUT_MS)
        titles += [link.locator("span").last.inner_text().strip() for link in links.all()]
        page.keyboard.press("Escape")
        links.first.wait_for(state="detached", timeout=TIMEOUT_MS)
    return titles


def open_page(page, title: str) -> None:
    """Open a page by its menu entry, as a person does, and wait for the run it starts to finish."""
    link = menu_link(page, title)
    with rerun(page):
        link.click()


def reveal(page) -> None:
    """Answer a lesson step's predict-then-reveal question with its first option, and reveal the answer."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: PLC0415 -- as chromium(): test tools

    box = page.get_by_test_id("stMain").get_by_role("combobox", name="Your class's answer")
    option = page.get_by_role("option").first
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:  # a click that lands while the page is being redrawn can leave the list shut: open it again
        box.click()
        try:
            option.wait_for(timeout=OPEN_MS)
            break
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise
            page.keyboard.press("Escape")
    with rerun(page):
        option.click()
    with rerun(page):
        page.get_by_role("button", name=re.compile("^Reveal")).click()


RUN_KEY = "Control+Enter"  # applies the sidebar's multi-line sentence box (Enter alone starts a new line)


def sentence_box(page):
    """The sidebar's sentence box (a text area), not a page's own input."""
    return page.get_by_test_id("stSidebar").get_by_test_id("stTextArea").locator("textarea").first


def type_sentence(page, text: str, press_enter: bool = True) -> None:
    """Type (or, when long, paste) a sentence into the sidebar and, with `press_enter`, run it with Ctrl+Enter."""
    box = sentence_box(page)
    box.fill("")
    box.type(text, delay=5) if len(text) < 200 else box.fill(text)
    if press_enter:
        with rerun(page):
            box.press(RUN_KEY)


DRAWN = """([index, expected]) => {
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    const x = plot && plot.data && plot.data[0] && plot.data[0].x;
    return !!x && x.length === expected.length && expected.every((label, i) => x[i] === label)
        && !document.querySelector('[data-testid="stStatusWidget"]');
}"""


def wait_for_tokens(page, tokens: list[str], chart_index: int = 0, timeout: float = TIMEOUT_MS) -> None:
    """Until heatmap `chart_index` is drawn with these tokens (its x categories are 'position: token')."""
    expected = position_labels(escape_tokens(tokens))  # exactly what head_heatmap sends
    page.wait_for_function(DRAWN, arg=[chart_index, expected], timeout=timeout)


def tick_labels(page, chart_index: int = 0, axis: str = "xtick") -> list[str]:
    chart = page.locator(".js-plotly-plot").nth(chart_index)
    return [t.text_content() for t in chart.locator(f"g.{axis} text").all()]


def figure_array(value) -> np.ndarray:
    """A plain list or a {"dtype", "bdata", "shape"} typed array, as numpy."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape:
            dims = [int(s) for s in str(shape).split(",")] if isinstance(shape, str) else list(shape)
            data = data.reshape(dims)
        return data
    return np.asarray(value)
