"""The estimate a page says before a long computation, and where it starts asking first: from the work's size."""

from __future__ import annotations

from explorer.run import cost


def test_minilms_every_head_runs_at_once_and_a_second_long_smollm2_run_asks(minilm, smollm2):
    minilm_effects = cost.forward_seconds(minilm.model.config, 512, rows=73)  # 72 heads and the clean run
    assert 5 < minilm_effects < cost.ASK_AFTER_SECONDS  # measured: about 12 s on a 2-core machine
    smollm2_run = cost.forward_seconds(smollm2.model.config, 2048)
    assert 7 < smollm2_run < 15  # measured: about 10 s
    assert cost.asks_first(2 * smollm2_run)  # the reference beside our 30 layers recomputed
    assert not cost.asks_first(cost.forward_seconds(minilm.model.config, 512))


def test_about_says_seconds_minutes_or_hours():
    assert [cost.about(s) for s in (0.2, 7.4, 21, 200, 3200, 3 * 3600)] == [
        "about 1 s",
        "about 7 s",
        "about 20 s",
        "about 3 minutes",
        "about 53 minutes",
        "about 3.0 hours",
    ]
