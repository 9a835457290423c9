"""Several people at once against `streamlit run app.py` on loopback: no errors, and everyone sees exactly what a
single user sees for the same sentence. Bounded by sentences, not seconds, so a slow or busy machine runs the same
test, only longer; few browsers, so the browsers do not starve the server on 2 cores. Latency and the 20-session
run are `python -m bench load`'s job, not asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import harness, load

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SESSIONS = 3
SENTENCES = 4  # each, typed while the others type theirs


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("model", ["minilm", "smollm2"])  # an encoder, and a real 30-layer decoder
def test_sessions_typing_at_once_each_get_the_single_user_result(model):
    if not Path(harness.CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it when run as root)")
    report = load.run(sessions=SESSIONS, seconds=None, sentences=SENTENCES, model=model)
    print(load.table(report.summary()))
    assert report.errors == [] and report.mismatches == []
    assert report.per_session == [SENTENCES] * SESSIONS  # every session typed every sentence and checked its figure
    assert len(report.latencies) == SESSIONS * SENTENCES
