"""Many people at once: N real browser sessions against `streamlit run app.py` on loopback, each typing its own
sentences for S seconds. Counts errors, checks every drawn heatmap against the single-user result for the same
sentence, and reports latency from Enter to drawn. Bounded in sessions and time: it stops by itself."""

from __future__ import annotations

import asyncio
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from bench import harness
from explorer import trace
from models import registry

SESSIONS = 20
SECONDS = 60.0
MAX_TOKENS = 128
WAIT_MS = harness.TIMEOUT_MS  # one step may take this long before it counts as an error
SUBJECTS = ("the cat", "a teacher", "my neighbour", "the old river", "every student", "the small robot", "our team")
VERBS = ("watched", "painted", "explained", "carried", "ignored", "followed", "remembered")
OBJECTS = ("the bright moon", "a long letter", "the heavy boxes", "three questions", "the quiet garden", "a map")
DRAWN_Z = "() => { const d = document.querySelectorAll('.js-plotly-plot')[0].data[0]; return d.z; }"


def sentence(session: int, step: int) -> str:
    """A different sentence for every session and step (so the shared cache does not answer for the model)."""
    n = session * 1000 + step
    return (
        f"{SUBJECTS[n % 7].capitalize()} {VERBS[(n // 7) % 7]} {OBJECTS[(n // 49) % 6]} "
        f"on day {session} at hour {step} because it was {'too tired' if n % 2 else 'too wide'}."
    )


@dataclass
class Report:
    sessions: int
    seconds: float | None
    sentences: int | None
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    per_session: list[int] = field(default_factory=list)
    open_latencies: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        lat = sorted(self.latencies)
        return {
            "sessions": self.sessions,
            "seconds": self.seconds,
            "sentences_per_session": self.sentences,
            "sentences": len(lat),
            "errors": len(self.errors),
            "mismatches": len(self.mismatches),
            "p50_s": round(statistics.median(lat), 3) if lat else None,
            "p95_s": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 3) if lat else None,
            "max_s": round(lat[-1], 3) if lat else None,
            "min_sentences_per_session": min(self.per_session) if self.per_session else 0,
            "open_p50_s": round(statistics.median(self.open_latencies), 3) if self.open_latencies else None,
            "open_max_s": round(max(self.open_latencies), 3) if self.open_latencies else None,
        }


async def _open(browser, url: str, report: Report):
    """A new person opening the app: a fresh browser context, the page drawn."""
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_default_timeout(WAIT_MS)
    context.set_default_navigation_timeout(WAIT_MS)
    page = await context.new_page()
    start = time.perf_counter()
    await page.goto(url, timeout=WAIT_MS)
    await page.wait_for_selector(".js-plotly-plot", timeout=WAIT_MS)
    report.open_latencies.append(time.perf_counter() - start)
    return context, page


async def _session(context, page, n: int, loaded, report: Report) -> None:
    done = 0
    deadline = time.monotonic() + report.seconds if report.seconds is not None else float("inf")
    try:
        step = 0
        while time.monotonic() < deadline and (report.sentences is None or step < report.sentences):
            text = sentence(n, step)
            step += 1
            expected = trace.run(loaded, text, MAX_TOKENS)  # the single-user result, computed on its own
            labels = harness.position_labels(harness.escape_tokens(expected.source_tokens))
            box = page.get_by_test_id("stTextInputField").first
            await box.fill(text)
            start = time.perf_counter()
            await box.press("Enter")
            try:
                await page.wait_for_function(harness.DRAWN, arg=[0, labels], timeout=WAIT_MS)
            except Exception as e:  # noqa: BLE001 -- a timeout or a crashed page both count as one error
                report.errors.append(f"session {n} step {step}: {type(e).__name__}: {str(e)[:200]}")
                continue
            report.latencies.append(time.perf_counter() - start)
            if await page.get_by_test_id("stException").count():
                report.errors.append(f"session {n} step {step}: exception shown on the page")
            z = harness.figure_array(await page.evaluate(DRAWN_Z))  # the typed array Plotly holds, as sent
            if not np.array_equal(z, expected.encoder_self.weights[0, 0]):
                worst = float(np.abs(z - expected.encoder_self.weights[0, 0]).max())
                report.mismatches.append(f"session {n} step {step}: max difference {worst:.3g} for {text!r}")
            done += 1
    except Exception as e:  # noqa: BLE001
        report.errors.append(f"session {n}: {type(e).__name__}: {str(e)[:200]}")
    finally:
        report.per_session.append(done)
        await context.close()


async def _run(url: str, report: Report, loaded) -> Report:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
        try:  # everyone opens the app at once, then everyone types for `seconds`
            opened = await asyncio.gather(*(_open(browser, url, report) for _ in range(report.sessions)))
            await asyncio.gather(
                *(_session(context, page, n, loaded, report) for n, (context, page) in enumerate(opened))
            )
        finally:
            await browser.close()
    return report


def run(sessions: int = SESSIONS, seconds: float | None = SECONDS, sentences: int | None = None) -> Report:
    """Start the app on a free loopback port, drive it, stop it. Each session types until `seconds` have passed
    or it has typed `sentences` sentences, whichever comes first (None: no such bound; give at least one)."""
    if seconds is None and sentences is None:
        raise ValueError("give seconds, sentences or both: the run must stop by itself")
    loaded = registry.load("minilm")
    report = Report(sessions, seconds, sentences)
    with harness.app_server() as url, ThreadPoolExecutor(1) as worker:
        # a thread of its own: the caller may already run an event loop (Playwright's sync API under pytest)
        return worker.submit(asyncio.run, _run(url, report, loaded)).result()


def table(summary: dict) -> str:
    return "\n".join(f"{k:>26}  {v}" for k, v in summary.items())
