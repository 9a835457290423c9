"""A class typing beside long texts: `python -m bench load --long N`. The same short sessions type twice: first alone
(the baseline), then while N more people each paste an 8,192-token text on SmolLM2 and ask for its first run (the
admission gate's proof under load: explorer/run/admission.py). Reports the short sessions' median and p95 Enter to
drawn in each phase and their ratios (target: at most 1.5), their errors (target: 0), the server's peak resident
memory (VmHWM) against the memory budget it was given, whether it is still alive, and each long session's ask, wait
and time to drawn. `--shots DIR`: the first long session's ask and the second's waiting line, at 1600 x 900."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from attention_explorer.explorer.run import caps
from attention_explorer.models import registry
from bench import folders, harness, load, proc
from bench.browser import CHARTS_DRAWN
from bench.inputs import text_of

LONG_MODEL = "smollm2"
LONG_TOKENS = 8192
SECONDS = 240.0  # each phase's typing at least: one SmolLM2 first run at 8,192 tokens takes ~160 s on two cores
LONG_SECONDS = 900.0  # a long session's bound from its click to drawn (the second waits for the first)
BUDGET = "60%"  # the server's EXPLORER_MEMORY_BUDGET (its own default is 60% of the machine's memory)
TARGET_RATIO = 1.5
STAGGER_S = 5.0  # a long session asks this long after the one before it asked: the line's order is known
POLL_S = 1.0
RENICE_S = 2.0
BESIDE_FIRST_STEP = 500  # the second phase's sentences start here: none is cached from the first
ASKED = "starts only when you ask"  # explorer/app/waiting.ask_first's line
WAITING = "Waiting"  # explorer/app/waiting.place_line's
REFUSED = "This run needs about"  # explorer/app/waiting.refusal_line's
RUN_BUTTON = "Run the model on this text"


@dataclass
class Long:
    """One person with a long text: what the page said, and how long it took."""

    asked: str = ""  # the ask-first box, as shown
    waiting: str = ""  # the first "Waiting ..." line it showed, if any
    waited_s: float = 0.0  # from its click to the last time it showed that line
    click_to_drawn_s: float | None = None  # None: never drawn
    error: str = ""
    progress: str = ""  # its progress bar's last words seen ("Running the model... layer 12 of 30")
    clicked_at: float = 0.0  # time.monotonic() of its click, and of its end (drawn or not)
    ended_at: float = 0.0


@dataclass
class LongReport:
    baseline: load.Report
    beside: load.Report
    budget: str
    budget_bytes: int
    long_model: str = LONG_MODEL
    long_tokens: int = LONG_TOKENS
    longs: list[Long] = field(default_factory=list)
    nice: int = 0  # the browsers' priority (os.setpriority); 0: as launched
    peak_after_baseline_mb: float = 0.0
    peak_mb: float = 0.0
    alive: bool = False

    def summary(self) -> dict:
        a, b = self.baseline.summary(), self.beside.summary()

        def ratio(key: str) -> float | None:
            return round(b[key] / a[key], 2) if a[key] and b[key] else None

        found = {
            "sessions": self.baseline.sessions,
            "long_sessions": len(self.longs),
            "long_text": f"{self.long_model}, {self.long_tokens:,} tokens",
            "baseline_sentences": a["sentences"],
            "baseline_p50_s": a["p50_s"],
            "baseline_p95_s": a["p95_s"],
            "beside_sentences": b["sentences"],
            "beside_p50_s": b["p50_s"],
            "beside_p95_s": b["p95_s"],
            "p50_ratio": ratio("p50_s"),
            "p95_ratio": ratio("p95_s"),
            "errors": a["errors"] + b["errors"],
            "mismatches": a["mismatches"] + b["mismatches"],
            "pause_s": a["pause_s"],
            "browsers_nice": self.nice,
            "baseline_wall_s": a["typing_wall_s"],
            "baseline_server_cpu_s": a["typing_server_cpu_s"],
            "baseline_other_cpu_s": a["typing_other_cpu_s"],
            "baseline_idle_cpu_s": a["typing_idle_cpu_s"],
            "beside_wall_s": b["typing_wall_s"],
            "beside_server_cpu_s": b["typing_server_cpu_s"],
            "beside_other_cpu_s": b["typing_other_cpu_s"],
            "beside_idle_cpu_s": b["typing_idle_cpu_s"],
            "memory_budget": self.budget,
            "budget_mb": round(self.budget_bytes / 2**20),
            "peak_rss_after_baseline_mb": round(self.peak_after_baseline_mb),
            "peak_rss_mb": round(self.peak_mb),
            "under_budget": self.peak_mb * 2**20 < self.budget_bytes,
            "server_alive": self.alive,
        }
        for i, one in enumerate(self.longs, 1):
            drawn = one.click_to_drawn_s
            found[f"long_{i}_click_to_drawn_s"] = round(drawn, 1) if drawn is not None else None
            found[f"long_{i}_waited_s"] = round(one.waited_s, 1)
            found[f"long_{i}_waiting"] = one.waiting or None
            found[f"long_{i}_asked"] = one.asked or None
            found[f"long_{i}_progress"] = one.progress or None
            found[f"long_{i}_error"] = one.error or None
        ratios = (found["p50_ratio"], found["p95_ratio"])
        # the targets; the long runs drawn is said apart (on a busy machine they may not end in the bound)
        found["targets_met"] = (
            all(r is not None and r <= TARGET_RATIO for r in ratios)
            and found["errors"] == 0
            and found["under_budget"]
            and self.alive
        )
        found["long_runs_drawn"] = sum(one.click_to_drawn_s is not None for one in self.longs)
        during = sorted(
            lat
            for lat, at in zip(self.beside.latencies, self.beside.drawn_at, strict=True)
            if any(one.clicked_at <= at - lat and at <= one.ended_at for one in self.longs)
        )
        found["during_long_runs_sentences"] = len(during)
        found["during_long_runs_p50_s"] = round(statistics.median(during), 3) if during else None
        found["during_long_runs_p95_s"] = (
            round(during[min(len(during) - 1, int(0.95 * len(during)))], 3) if during else None
        )
        found["baseline_errors_seen"] = self.baseline.errors[:3]
        found["beside_errors_seen"] = self.beside.errors[:3]
        return found


async def _text(locator) -> str:
    """The text of the first element `locator` finds now, or '' (it may go while it is read: a run ends)."""
    try:
        return (await locator.first.inner_text(timeout=2000)).strip() if await locator.count() else ""
    except Exception:  # noqa: BLE001 -- Playwright's timeout: gone meanwhile
        return ""


async def _alert_text(page, has_text: str) -> str:
    """The text of the first alert holding `has_text` (without its icon's name), or ''."""
    return await _text(page.get_by_test_id("stAlert").filter(has_text=has_text).get_by_test_id("stMarkdownContainer"))


async def _long_session(browser, url: str, n: int, text: str, report: LongReport, asked: list, shots, seconds: float):
    """Open the heatmap on the long model, set Max tokens, paste the text, wait for the ask, ask (after the session
    before has), and wait for the heatmap: saying meanwhile what the page showed."""
    one = report.longs[n]
    context = await load.new_context(browser, 1600, 900)
    try:
        page = await context.new_page()
        address = f"{url}/attention?{urllib.parse.urlencode({'model': report.long_model})}"
        await load.goto(page, address, timeout=load.WAIT_MS)
        tokens = page.get_by_test_id("stSidebar").get_by_test_id("stNumberInputField").first
        await tokens.fill(str(report.long_tokens))
        await load.act(page, lambda: tokens.press("Enter"))
        box = harness.sentence_box(page)
        await box.fill(text)  # pasted, not typed key by key: 46,000 characters
        await load.act(page, lambda: box.press(harness.RUN_KEY))
        ask = page.get_by_test_id("stAlert").filter(has_text=ASKED)
        await ask.first.wait_for(timeout=load.WAIT_MS)
        one.asked = await _alert_text(page, ASKED)
        if shots and n == 0:
            await ask.first.scroll_into_view_if_needed()
            await page.screenshot(path=str(shots / "long_1_ask_first.png"))
        if n:
            await asked[n - 1].wait()  # the line's order: the one before asks first
            await asyncio.sleep(STAGGER_S)
        before = await page.evaluate(harness.FINISHED_RUNS)
        start, one.clicked_at = time.perf_counter(), time.monotonic()
        _say(f"long {n + 1}: asked for its run")
        await page.get_by_role("button").filter(has_text=RUN_BUTTON).first.click()
        asked[n].set()
        while not await page.evaluate(harness.SETTLED, before):
            if time.perf_counter() - start > seconds:
                raise TimeoutError(f"not drawn {seconds:.0f} s after its click (last seen: {one.progress!r})")
            one.progress = await _text(page.get_by_test_id("stProgress")) or one.progress
            if line := await _alert_text(page, WAITING):
                one.waited_s = time.perf_counter() - start
                if not one.waiting:
                    one.waiting = line
                    _say(f"long {n + 1}: {line}")
                    if shots and n == 1:
                        await page.get_by_test_id("stAlert").filter(has_text=WAITING).first.scroll_into_view_if_needed()
                        await page.screenshot(path=str(shots / "long_2_waiting.png"))
            await asyncio.sleep(POLL_S)
        if refused := await _alert_text(page, REFUSED):
            raise RuntimeError(f"refused: {refused[:200]}")
        if await page.get_by_test_id("stException").count():
            raise RuntimeError("exception shown on the page")
        await page.wait_for_function(CHARTS_DRAWN, timeout=load.WAIT_MS)
        if not await page.locator(".js-plotly-plot").count():
            raise RuntimeError("no heatmap drawn")
        one.click_to_drawn_s = time.perf_counter() - start
        _say(f"long {n + 1}: drawn {one.click_to_drawn_s:.0f} s after its click")
    except Exception as e:  # noqa: BLE001 -- a timeout, a refusal or a crashed page: said, and the others go on
        one.error = f"{type(e).__name__}: {str(e)[:300]}"
        _say(f"long {n + 1}: {one.error}")
    finally:
        one.ended_at = time.monotonic()
        asked[n].set()  # a session that failed before asking holds nobody up
        await context.close()


async def _lower_browsers(server: int, nice: int) -> None:
    """Every RENICE_S: this bench's own processes but the server (the browsers, their driver) at `nice`, so that the
    server gets the CPU it would have with its visitors' browsers on their own machines. Chromium sets some of its
    processes' priorities itself (its browser and GPU processes at -8), hence again and again."""
    while True:
        spared = {server, *proc.descendants(server)}
        for pid in proc.descendants(os.getpid()):
            if pid not in spared:
                with contextlib.suppress(OSError):  # gone meanwhile
                    for thread in os.listdir(f"/proc/{pid}/task"):  # Linux: a priority is each thread's own
                        os.setpriority(os.PRIO_PROCESS, int(thread), nice)
        await asyncio.sleep(RENICE_S)


def _say(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


async def _run(url, report: LongReport, loaded, texts: list[str], shots, long_seconds: float) -> LongReport:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
        lowering = asyncio.create_task(_lower_browsers(url.pid, report.nice)) if report.nice else None
        try:
            short = report.baseline
            opened = await asyncio.gather(
                *(load.open_session(browser, url, short, "minilm") for _ in range(short.sessions))
            )
            pages = [page for _, page in opened]
            _say(f"baseline: {short.sessions} sessions type for {short.seconds:.0f} s")
            await load.phase(url.pid, pages, loaded, short, load.until(short.seconds))
            _say(f"baseline: {len(short.latencies)} sentences, {len(short.errors)} errors; the long sessions open")
            report.peak_after_baseline_mb = proc.peak_rss_mb(url.pid)
            asked = [asyncio.Event() for _ in texts]
            longs = [
                asyncio.create_task(_long_session(browser, url, n, text, report, asked, shots, long_seconds))
                for n, text in enumerate(texts)
            ]
            await asked[0].wait()  # the class types again from the first long run's click
            typing = load.until(report.beside.seconds)

            def going() -> bool:  # at least the phase's seconds, and on while a long session is under way
                return typing() or not all(task.done() for task in longs)

            _say("beside: the short sessions type again")
            await load.phase(url.pid, pages, loaded, report.beside, going, BESIDE_FIRST_STEP)
            _say(f"beside: {len(report.beside.latencies)} sentences, {len(report.beside.errors)} errors")
            await asyncio.gather(*longs)
            report.peak_mb = proc.peak_rss_mb(url.pid)
            report.alive = proc.alive(url.pid) and await asyncio.to_thread(_healthy, url)
            for context, _ in opened:
                await context.close()
        finally:
            if lowering is not None:
                lowering.cancel()
            await browser.close()
    return report


def run(
    sessions: int = 10,
    seconds: float = SECONDS,
    long: int = 2,
    long_tokens: int = LONG_TOKENS,
    long_model: str = LONG_MODEL,
    budget: str = BUDGET,
    shots: Path | None = None,
    long_seconds: float = LONG_SECONDS,
    pause: float = 0.0,
    nice: int = 0,
) -> LongReport:
    """Start the app with `budget` as its memory budget, run the baseline then the phase beside `long` long texts,
    stop it. Each long session pastes its own text (a different first sentence), so no cached run answers another."""
    env = {**folders.use(["minilm"]), caps.MEMORY_BUDGET_ENV: budget}
    loaded, long_loaded = registry.load("minilm"), registry.load(long_model)
    texts = [f"Reader {n + 1} pasted this. " + text_of(long_loaded, long_tokens) for n in range(long)]
    report = LongReport(
        load.Report(sessions, seconds, None, pause),
        load.Report(sessions, seconds, None, pause),
        budget,
        caps.parse_memory(budget, caps.total_memory()),  # as the server reads it (caps.from_environ)
        long_model,
        long_tokens,
        [Long() for _ in texts],
        nice,
    )
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    with harness.app_server(env=env) as url, ThreadPoolExecutor(1) as worker:
        return worker.submit(asyncio.run, _run(url, report, loaded, texts, shots, long_seconds)).result()
