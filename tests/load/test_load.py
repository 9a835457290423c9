"""Twenty people at once against `streamlit run app.py` on loopback for a minute: no errors, and everyone sees
exactly what a single user sees for the same sentence. Latency is reported by `python -m bench load`, not asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import harness, load

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.timeout(900)
def test_twenty_sessions_for_a_minute_get_the_single_user_result():
    if not Path(harness.CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it when run as root)")
    report = load.run(sessions=20, seconds=60)
    summary = report.summary()
    print(load.table(summary))
    assert report.errors == [] and report.mismatches == []
    assert len(report.open_latencies) == 20 and min(report.per_session) >= 1  # every session typed and saw a result
