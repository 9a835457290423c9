"""Fixtures over bench.harness: the app on a free loopback port and Debian's headless Chromium."""

from __future__ import annotations

import pytest

from attention_explorer.explorer import navigation
from bench import harness

SCREENSHOTS = harness.ROOT / "artifacts" / "screenshots"
NEXT_FRAMES = harness.NEXT_FRAMES
# per drawn token map (a heatmap whose categories are '3: token'): its categories and the tick labels drawn
TOKEN_MAPS = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => {
    const map = plot.data.find(
        t => t.type === 'heatmap' && t.x && t.y && t.x.length && t.x.every(c => /^\\d+: /.test(c)));
    if (!map) return [];
    const drawn = axis => [...plot.querySelectorAll(`g.${axis} text`)].map(t => t.textContent).filter(s => s.trim());
    return [{x: map.x.length, y: map.y.length, xticks: drawn('xtick'), yticks: drawn('ytick')}];
})"""


@pytest.fixture(scope="session")
def server():
    with harness.app_server() as url:
        yield url


@pytest.fixture
def page(browser):
    page = harness.new_page(browser)
    yield page
    page.context.close()


def screenshot(page, name: str) -> None:
    """Streamlit scrolls inside its own container, so the viewport is made as tall as the content first."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = page.evaluate("""() => document.querySelector('[data-testid="stMain"]')?.scrollHeight || 1000""")
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": min(max(int(height), 1000), 6000)})
    page.evaluate(NEXT_FRAMES)  # the resized layout painted, not a guessed time
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    page.set_viewport_size(size)


def heading(stem: str) -> str:
    """A lesson step's heading as the page writes it: "Step 8 of 16: The stack: every layer and head"."""
    page = navigation.BY_STEM[stem]
    return f"Step {page.step} of {navigation.N_STEPS}: {page.title}"


def step_freely(page) -> None:
    """Step 12 with "Ask the class first" turned off (it asks by default): every word shown as the page opens."""
    with harness.rerun(page):
        page.get_by_text("Ask the class first").click()
