"""Many people at once: N real browser sessions against `streamlit run app.py` on loopback, each typing its own
sentences for S seconds. Counts errors, checks every drawn heatmap against the single-user result for the same
sentence, and reports latency from Enter to drawn. Bounded in sessions and time: it stops by itself."""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from bench import folders, harness, proc

SESSIONS = 20
SECONDS = 60.0
MAX_TOKENS = 128
WAIT_MS = harness.TIMEOUT_MS  # one step may take this long before it counts as an error
SUBJECTS = ("the cat", "a teacher", "my neighbour", "the old river", "every student", "the small robot", "our team")
VERBS = ("watched", "painted", "explained", "carried", "ignored", "followed", "remembered")
OBJECTS = ("the bright moon", "a long letter", "the heavy boxes", "three questions", "the quiet garden", "a map")
# the heatmap's numbers as Plotly holds them, and its title ("Layer 3, head 1"): the page opens on a head chosen
# from the model's own weights for each sentence, so the check reads which head it drew
DRAWN_Z = """() => { const plot = document.querySelectorAll('.js-plotly-plot')[0];
    return [plot.data[0].z, plot.layout.title.text]; }"""
TITLE = re.compile(r"Layer (\d+), head (\d+)")
PAGES = sorted(p.stem for p in (harness.ROOT / "explorer" / "pages").glob("[!_]*.py"))  # each page's address
# each sentence is typed right after a page switch by the menus, as a class does: first another page, then the
# heatmap, typing as soon as its page is drawn (a browser that redrew the sidebar after a switch once cut every
# later sentence to 3 tokens)
DETOURS = ("8. The stack: every layer and head", "Overview: the lesson's map", "Head view", "Q/K/V on one page")
HEATMAP = "Attention heatmap"
FILLER = ("slowly", "and", "then", "quietly", "again", "after", "lunch", "with", "some", "friends")
COST_REPEATS = 5


def sentence(session: int, step: int) -> str:
    """A different sentence for every session and step (so the shared cache does not answer for the model)."""
    n = session * 1000 + step
    return (
        f"{SUBJECTS[n % 7].capitalize()} {VERBS[(n // 7) % 7]} {OBJECTS[(n // 49) % 6]} "
        f"on day {session} at hour {step} because it was {'too tired' if n % 2 else 'too wide'}."
    )


def twenty_words(step: int) -> str:
    """A new 20-word sentence for each step (the issue's yardstick for the cost of a new sentence)."""
    words = sentence(900, step).rstrip(".").split()
    return " ".join([*words, *FILLER][:20]) + "."


@dataclass
class Costs:
    """What the server process itself spends (CPU seconds from /proc, not the browsers') and holds."""

    cpu_per_sentence_s: float = 0.0  # a new 20-word sentence on the default page, Enter to drawn
    cpu_per_picker_s: float = 0.0  # a layer or head change on the default page
    rss_first_page_mb: float = 0.0  # once the first page is drawn
    rss_every_page_mb: float = 0.0  # after every page has been opened once with every model
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)

    def summary(self) -> dict:
        return {
            "server_cpu_per_sentence_s": round(self.cpu_per_sentence_s, 4),
            "server_cpu_per_picker_s": round(self.cpu_per_picker_s, 4),
            "capacity_sentences_per_s": round(self.cores / self.cpu_per_sentence_s, 1)
            if self.cpu_per_sentence_s
            else None,
            "capacity_pickers_per_s": round(self.cores / self.cpu_per_picker_s, 1) if self.cpu_per_picker_s else None,
            "server_rss_first_page_mb": round(self.rss_first_page_mb),
            "server_rss_every_page_mb": round(self.rss_every_page_mb),
        }


@dataclass
class Report:
    sessions: int
    seconds: float | None
    sentences: int | None
    pause: float = 0.0  # seconds each session waits after a sentence is drawn (reading it) before the next
    latencies: list[float] = field(default_factory=list)
    drawn_at: list[float] = field(default_factory=list)  # time.monotonic() when each latency ended, in its order
    errors: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    per_session: list[int] = field(default_factory=list)
    open_latencies: list[float] = field(default_factory=list)
    costs: Costs | None = None
    # while the sessions type: the server's CPU, everyone else's (browsers, this script, other load) and the
    # machine's idle time, all cores added up. Idle time left over means the browsers were not the bottleneck.
    server_cpu_s: float = 0.0
    other_cpu_s: float = 0.0
    idle_cpu_s: float = 0.0
    wall_s: float = 0.0

    def summary(self) -> dict:
        lat = sorted(self.latencies)
        return {
            **(self.costs.summary() if self.costs else {}),
            "sessions": self.sessions,
            "seconds": self.seconds,
            "sentences_per_session": self.sentences,
            "pause_s": self.pause,
            "sentences": len(lat),
            "errors": len(self.errors),
            "mismatches": len(self.mismatches),
            "p50_s": round(statistics.median(lat), 3) if lat else None,
            "p95_s": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 3) if lat else None,
            "max_s": round(lat[-1], 3) if lat else None,
            "min_sentences_per_session": min(self.per_session) if self.per_session else 0,
            "open_p50_s": round(statistics.median(self.open_latencies), 3) if self.open_latencies else None,
            "open_max_s": round(max(self.open_latencies), 3) if self.open_latencies else None,
            "typing_wall_s": round(self.wall_s, 1),
            "typing_server_cpu_s": round(self.server_cpu_s, 1),
            "typing_other_cpu_s": round(self.other_cpu_s, 1),
            "typing_idle_cpu_s": round(self.idle_cpu_s, 1),
        }


async def new_context(browser, width: int = 1200, height: int = 900):
    """A new person's browser: every wait bounded by WAIT_MS, the run counter installed."""
    context = await browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(WAIT_MS)
    context.set_default_navigation_timeout(WAIT_MS)
    await context.add_init_script(harness.RUN_COUNTER)
    return context


async def goto(page, url: str, timeout: float = WAIT_MS) -> None:
    """A new document, its first script run finished (each wait up to `timeout` ms)."""
    await page.goto(url, timeout=timeout)
    await page.wait_for_function(harness.SETTLED, arg=0, timeout=timeout)


async def act(page, action) -> None:
    """Run `action` (a coroutine function) and wait for the script run it started to finish."""
    before = await page.evaluate(harness.FINISHED_RUNS)
    await action()
    await page.wait_for_function(harness.SETTLED, arg=before, timeout=WAIT_MS)


async def open_session(browser, url: str, report: Report, model: str = ""):
    """A new person opening the app on its first page, as a class does: a fresh browser context, the page drawn;
    `model`: opened at an address naming that model (as a teacher's shared link does)."""
    context = await new_context(browser)
    page = await context.new_page()
    start = time.perf_counter()
    # people click on as soon as the menus are there, charts drawn or not
    await goto(page, f"{url}/?{urllib.parse.urlencode({'model': model})}" if model else url)
    report.open_latencies.append(time.perf_counter() - start)
    return context, page


async def _switch(page, title: str) -> None:
    """Open a page by its menu entry and wait for its run to finish (its charts may still be drawing)."""
    sections = page.get_by_test_id("stTopNavSection")
    links = page.get_by_test_id("stTopNavDropdownLink")
    for i in range(await sections.count()):
        await sections.nth(i).click()
        await links.first.wait_for(timeout=WAIT_MS)
        found = links.filter(has=page.get_by_text(title, exact=True))
        if await found.count():
            await act(page, found.first.click)
            return
        await page.keyboard.press("Escape")
        await links.first.wait_for(state="detached", timeout=WAIT_MS)
    raise LookupError(f"no page titled {title!r} in the navigation")


async def _costs(browser, url: str, pid: int, loaded) -> Costs:
    """One person at a time: the server's CPU per new sentence and per picker change, and its memory."""
    costs = Costs()
    context = await new_context(browser)
    page = await context.new_page()
    await goto(page, f"{url}/attention")  # the heatmap is chart 0; the first page is the overview
    await page.wait_for_selector(".js-plotly-plot", timeout=WAIT_MS)
    costs.rss_first_page_mb = proc.rss_mb(pid)
    box = harness.sentence_box(page)
    spent = []
    for step in range(COST_REPEATS + 1):  # the first is a warm-up
        text = twenty_words(step)
        run = trace.run(loaded, text, MAX_TOKENS)  # its tokens as the pages show them ('␣cat', not 'Ġcat')
        labels = harness.position_labels(harness.escape_tokens(run.readable(run.source_tokens)))
        await box.fill(text)
        before = proc.cpu_seconds(pid)
        await act(page, lambda: box.press(harness.RUN_KEY))
        await page.wait_for_function(harness.DRAWN, arg=[0, labels], timeout=WAIT_MS)
        spent.append(proc.cpu_seconds(pid) - before)
    costs.cpu_per_sentence_s = statistics.median(spent[1:])
    spent = []
    for step in range(COST_REPEATS + 1):
        picker, count = ("layer", 6) if step % 2 == 0 else ("head", 12)
        select = page.get_by_test_id("stMain").get_by_role("combobox", name=picker.capitalize(), exact=True)
        shown = await select.input_value()  # "layer 3": the next one (the shown one would rerun nothing)
        option = int(shown.split()[-1]) % count + 1 if shown.split()[-1].isdigit() else 1
        await select.click()
        before = proc.cpu_seconds(pid)
        await act(page, page.get_by_role("option", name=f"{picker} {option}", exact=True).click)
        spent.append(proc.cpu_seconds(pid) - before)
    costs.cpu_per_picker_s = statistics.median(spent[1:])
    for key in registry.MODELS:  # every page once with every model, each on its own example
        example = registry.load(key).example
        for name in PAGES:
            query = urllib.parse.urlencode({"model": key, "text": example})
            await goto(page, f"{url}/{name}?{query}")
        print(f"every page with {key}: server holds {proc.rss_mb(pid):.0f} MB", file=sys.stderr, flush=True)
    costs.rss_every_page_mb = proc.rss_mb(pid)
    await context.close()
    return costs


def until(seconds: float | None):
    """A session's `going` for a phase of `seconds` from now (None: no time bound)."""
    deadline = time.monotonic() + seconds if seconds is not None else float("inf")
    return lambda: time.monotonic() < deadline


async def _session(page, n: int, loaded, report: Report, going, first_step: int = 0) -> None:
    """One person typing new sentences while `going()` holds (and fewer than report.sentences); `first_step`: where
    its sentences start, so that a later phase types sentences no cache holds."""
    done = 0
    try:
        step = first_step
        while going() and (report.sentences is None or step - first_step < report.sentences):
            if step > first_step and report.pause:
                await asyncio.sleep(report.pause)
                if not going():
                    break
            text = sentence(n, step)
            step += 1
            await _switch(page, DETOURS[(n + step) % len(DETOURS)])
            await _switch(page, HEATMAP)  # where the sessions type and chart 0 is read
            box = harness.sentence_box(page)
            await box.fill(text)
            start = time.perf_counter()
            try:
                before = await page.evaluate(harness.FINISHED_RUNS)
                await box.press(harness.RUN_KEY)
                # the single-user result, computed on its own while the server runs the sentence
                expected = trace.run(loaded, text, MAX_TOKENS)
                labels = harness.position_labels(harness.escape_tokens(expected.readable(expected.source_tokens)))
                await page.wait_for_function(harness.SETTLED, arg=before, timeout=WAIT_MS)
                shown = await page.get_by_test_id("stSidebar").get_by_test_id("stNumberInputField").first.input_value()
                if shown != str(MAX_TOKENS):  # the sentence is cut: its whole tokens would never be drawn
                    report.errors.append(f"session {n} step {step}: Max tokens shows {shown}, not {MAX_TOKENS}")
                    continue
                await page.wait_for_function(harness.DRAWN, arg=[0, labels], timeout=WAIT_MS)
            except Exception as e:  # noqa: BLE001 -- a timeout or a crashed page both count as one error
                report.errors.append(f"session {n} step {step}: {type(e).__name__}: {str(e)[:200]}")
                continue
            report.latencies.append(time.perf_counter() - start)
            report.drawn_at.append(time.monotonic())
            if await page.get_by_test_id("stException").count():
                report.errors.append(f"session {n} step {step}: exception shown on the page")
            drawn, title = await page.evaluate(DRAWN_Z)
            z = harness.figure_array(drawn)  # the typed array Plotly holds, as sent
            named = TITLE.search(title or "")
            if named is None:
                report.errors.append(f"session {n} step {step}: no head named in the title {title!r}")
                continue
            kind = loaded.family.kinds[0]  # the heatmap opens on the model's first attention kind
            weights = expected.attention(kind).weights[int(named[1]) - 1, int(named[2]) - 1]
            if not np.array_equal(z, weights):
                worst = float(np.abs(z - weights).max())
                report.mismatches.append(f"session {n} step {step}: max difference {worst:.3g} for {text!r}")
            done += 1
    except Exception as e:  # noqa: BLE001
        report.errors.append(f"session {n}: {type(e).__name__}: {str(e)[:200]}")
    finally:
        report.per_session.append(done)


async def phase(pid: int | list[int], pages: list, loaded, report: Report, going, first_step: int = 0) -> None:
    """Every opened page types sentences while `going()` holds; the server's CPU (every replica's, given a list),
    everyone else's and the machine's idle time meanwhile go into `report`."""
    pids = pid if isinstance(pid, list) else [pid]
    server_cpu = lambda: sum(proc.cpu_seconds(p) for p in pids if proc.alive(p))
    server, (busy, idle), start = server_cpu(), proc.machine_cpu_seconds(), time.monotonic()
    await asyncio.gather(*(_session(page, n, loaded, report, going, first_step) for n, page in enumerate(pages)))
    report.wall_s = time.monotonic() - start
    report.server_cpu_s = server_cpu() - server
    now_busy, now_idle = proc.machine_cpu_seconds()
    report.other_cpu_s = now_busy - busy - report.server_cpu_s  # the browsers, this script, anything else
    report.idle_cpu_s = now_idle - idle


async def _run(url: str, report: Report, loaded, costs: bool, model: str = "") -> Report:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
        try:
            if costs:
                report.costs = await _costs(browser, url, url.pid, loaded)
            # everyone opens the app at once, then everyone types for `seconds`
            opened = await asyncio.gather(*(open_session(browser, url, report, model) for _ in range(report.sessions)))
            pids = getattr(url, "pids", url.pid)  # behind nginx: every replica
            await phase(pids, [page for _, page in opened], loaded, report, until(report.seconds))
            for context, _ in opened:
                await context.close()
        finally:
            await browser.close()
    return report


def run(
    sessions: int = SESSIONS,
    seconds: float | None = SECONDS,
    sentences: int | None = None,
    costs: bool = False,
    model: str = "minilm",
    replicas: int = 0,
) -> Report:
    """Start the app on a free loopback port, drive it, stop it. Each session types until `seconds` have passed
    or it has typed `sentences` sentences, whichever comes first (None: no such bound; give at least one).
    `costs` first measures, one person at a time, the server's CPU per sentence and per picker change and its memory;
    `replicas`: through nginx to that many app processes (`serve --replicas`, bench.replicas) instead of one."""
    if seconds is None and sentences is None:
        raise ValueError("give seconds, sentences or both: the run must stop by itself")
    env = folders.use([model])  # folder:gpt2-small: built if need be, and offered to the server
    loaded = registry.load(model)
    report = Report(sessions, seconds, sentences)
    from bench import replicas as fronts

    server = fronts.proxy_server(replicas, env=env) if replicas else harness.app_server(env=env)
    with server as url, ThreadPoolExecutor(1) as worker:
        # a thread of its own: the caller may already run an event loop (Playwright's sync API under pytest)
        return worker.submit(asyncio.run, _run(url, report, loaded, costs, model)).result()


def table(summary: dict) -> str:
    return "\n".join(f"{k:>26}  {v}" for k, v in summary.items())
