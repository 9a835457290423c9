"""A real `streamlit run app.py` on a free loopback port, and Debian's headless Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server():
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [
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
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"streamlit did not become healthy: {proc.stdout.read().decode()[-2000:]}")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it when run as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield context.new_page()
    context.close()


def wait_until_idle(page, timeout: float = 60_000) -> None:
    """Until Streamlit's running indicator is gone and the page is drawn."""
    page.wait_for_timeout(300)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)
    page.wait_for_timeout(300)


def type_sentence(page, text: str) -> None:
    box = page.get_by_test_id("stTextInputField").first
    box.fill("")
    box.type(text, delay=5)
    box.press("Enter")
    wait_until_idle(page)


def tick_labels(page, chart_index: int = 0, axis: str = "xtick") -> list[str]:
    chart = page.locator(".js-plotly-plot").nth(chart_index)
    return [t.text_content() for t in chart.locator(f"g.{axis} text").all()]


def screenshot(page, name: str) -> None:
    """Streamlit scrolls inside its own container, so the viewport is made as tall as the content first."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 1000")
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": min(max(int(height), 1000), 6000)})
    page.wait_for_timeout(500)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    page.set_viewport_size(size)
