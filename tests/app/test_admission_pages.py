"""Admission in the app: with a small memory budget (EXPLORER_MEMORY_BUDGET, as `serve --memory-budget` sets it), a
text whose run cannot fit is refused with one line and what would fit, nothing is drawn from it, and another session's
sentence still runs and draws the model's own numbers. The process's resident memory is fixed here, so the room the
budget leaves is exact."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.app import shelf, state, store, waiting
from attention_explorer.explorer.run import admission, caps, cost, trace
from bench.inputs import text_of
from tests.app import new_app
from tests.figdata import array, plain, spec

pytestmark = pytest.mark.slow

HELD = 1_000 * 10**6  # what the process holds, as the gate reads it
ROOM = 40 * 10**6  # what the budget leaves a run: a 512-token MiniLM run needs more, an 8-token one less


@pytest.fixture
def small_budget(monkeypatch, minilm):
    """The server started with --memory-budget 1040MB while it holds 1,000 MB, MiniLM loaded (its load is admitted
    like any run: tests/app/test_every_door.py): a new gate reads it. Its caches give nothing back here (they are
    empty but for the model the pages read), so the room is exactly ROOM."""
    shelf.get_model("minilm")
    monkeypatch.setattr(waiting, "_caches", tuple)
    monkeypatch.setattr(admission, "resident_bytes", lambda: HELD)
    monkeypatch.setenv("EXPLORER_MEMORY_BUDGET", f"{(HELD + ROOM) // 10**6}MB")
    caps.current.cache_clear()
    waiting.gate.clear()
    store.shared().clear()
    yield
    monkeypatch.undo()
    caps.current.cache_clear()
    waiting.gate.clear()


def opened(text: str, tokens: int):
    at = new_app("attention")
    at.session_state[state.MAX_TOKENS] = tokens  # as the sidebar's Max tokens sets it
    at.run()  # MiniLM's example sentence: short, it fits
    assert not at.error
    return at.sidebar.text_area[0].set_value(text).run()  # the visitor's text (too long for an address)


def test_a_run_past_the_budget_is_refused_with_what_fits_and_another_session_still_runs(small_budget, minilm):
    config = minilm.model.config
    long_text, short_text = text_of(minilm, 512), "The cat sat."
    needed = cost.forward_bytes(config, 512)
    assert needed > ROOM > cost.forward_bytes(config, len(minilm.tokenizer.encode(short_text, 512).ids))

    refused = opened(long_text, 512)
    assert not refused.exception and not refused.get("plotly_chart")  # nothing drawn from a run not made
    (said,) = [plain(e.value) for e in refused.error]
    most = cost.most_tokens(config, ROOM)
    assert 8 < most < 512
    assert said == (
        f"This run needs about {admission.gigabytes(needed)} of memory, and this server lets one run have "
        f"{admission.gigabytes(ROOM)} now (its memory budget, {admission.gigabytes(HELD + ROOM)}, less what it "
        f"already holds; set with serve --memory-budget). At most {most:,} tokens fit now: lower Max tokens in the "
        "sidebar."
    )
    assert waiting.gate().running() == 0  # the refused run holds nothing

    other = opened(short_text, 512)  # another visitor, meanwhile: a short sentence fits and runs
    assert not other.exception and not other.error
    drawn = array(spec(other.get("plotly_chart")[0])["data"][0]["z"])
    kept = trace.run(minilm, short_text, 512, keep_all=True).encoder_self.weights
    assert any(np.array_equal(drawn, head) for layer in kept for head in layer)

    refused.sidebar.number_input[0].set_value(most).run()  # what the line advised fits
    assert not refused.exception and not refused.error and refused.get("plotly_chart")
