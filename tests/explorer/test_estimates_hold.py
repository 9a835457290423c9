"""Estimates hold (issue 50: a corpus "about 6 s" took 13.3 s; a 3-token run's estimate was a thousandth of its time;
a fresh process estimated at fixed rates; an encoder-decoder's first run left out its greedy decoding). The times
themselves are measured by `python -m bench estimates` (bench/estimates.py: each estimate beside its work, back to
back): on a 2-core machine shared with other work their ratios moved between 0.5x and 2.8x from one run of a check
to the next, so no timing is asserted here. These tests hold the plumbing those measurements rest on: the pace
before any run is this machine's own calibration, then the median of its runs; a run's estimate counts every
layer's weights read and its dispatch (what a short text's run spends) besides its products and attention weights;
a batch pays those once; an encoder-decoder's first run counts each greedy step; and the bench's checks run."""

from __future__ import annotations

import math
from dataclasses import astuple

import pytest

from attention_explorer.explorer.run import cost, pace, trace


def test_the_pace_is_the_calibrations_until_runs_say_more(monkeypatch):
    monkeypatch.setattr(pace, "throughput_seconds", lambda: 3.0 * pace.THROUGHPUT_SECONDS)
    pace.forget()  # a fresh process: both parts at its calibration
    assert pace.now() == pace.Pace(3.0, 3.0)
    pace.forget(calibrated=pace.Pace(20.0, 3.0))
    short = pace.OBSERVED_AFTER / 2  # too short to say the machine's pace: mostly the page's work around it
    pace.observe(pace.Seconds(short * 0.4, short * 0.6), 1.0)
    pace.observe(2.0, 1.0)  # a plain float (a model's load, from its files' sizes) has no parts to say it by
    assert pace.now() == pace.Pace(20.0, 3.0)
    for fixed, work in ((0.05, 0.1), (0.05, 0.5), (0.2, 1.0)):  # runs at twice the calibration's paces
        pace.observe(pace.Seconds(fixed, work), 40.0 * fixed + 6.0 * work)
    assert astuple(pace.now()) == pytest.approx((40.0, 6.0))
    ask = cost.ASK_AFTER_SECONDS  # a page asks by the work's size, not by how busy the machine is
    assert not cost.asks_first(pace.Seconds(0.0, ask * 0.95)) and cost.asks_first(pace.Seconds(ask * 1.05, 0.0))


def test_each_part_is_scaled_by_its_own_pace(minilm):
    """The fixed terms (layers, runs) at the latency pace, the work (weights read, multiply-adds, attention weights)
    at the throughput pace; sums and multiples of estimates keep their parts, so the run they admit says both."""
    config = minilm.model.config
    pace.forget(calibrated=pace.Pace(7.0, 2.0))
    terms = cost.forward_terms(config, 64, 1)
    found = cost.forward_seconds(config, 64)
    assert found == pytest.approx(7.0 * terms.fixed_seconds() + 2.0 * terms.work_seconds())
    assert terms.fixed_seconds() == terms.layers * cost.SECONDS_PER_LAYER + terms.runs * cost.SECONDS_PER_RUN
    assert (found.fixed, found.work) == (terms.fixed_seconds(), terms.work_seconds())
    both = 3 * found + cost.layer_seconds(config, 64) / 2
    layer = cost.layer_seconds(config, 64)
    assert both.fixed == pytest.approx(3 * found.fixed + layer.fixed / 2)
    assert both.work == pytest.approx(3 * found.work + layer.work / 2)
    assert sum([found, found]).fitted == pytest.approx(2 * terms.seconds()) == cost.fitted(2 * found)
    assert cost.statistics_seconds(config, 2, 64, 6) == pytest.approx(
        2.0 * 2 * 6 * config.n_heads * 64 * 64 * cost.SECONDS_PER_STATISTIC_WEIGHT
    )
    import pickle  # a cache's copy keeps its parts and its value

    copied = pickle.loads(pickle.dumps(found))
    assert (copied, copied.fixed, copied.work) == (found, found.fixed, found.work)


def observed(latency: float, throughput: float, shares) -> list[tuple[float, float, float]]:
    """Runs of these (fixed, work) parts that took exactly what the two paces say."""
    return [(f, w, latency * f + throughput * w) for f, w in shares]


SHARES = ((0.01, 0.01), (0.01, 0.05), (0.06, 0.2), (0.01, 0.4), (0.06, 2.0), (0.3, 0.1))  # short runs, long runs


def test_a_fit_recovers_known_paces():
    """Runs that took what paces (25, 4) say: fitted from a calibration that said them, the two come back; from one
    that said (1, 1), the fit is the least-squares solution of the objective its docstring writes (solved here by
    numpy, from the calibration scaled to the runs' level), and the runs, not the calibration, set it (nearer the
    runs' paces than the calibration's)."""
    import numpy as np

    runs = observed(25.0, 4.0, SHARES)
    found = pace.fit(runs, pace.Pace(25.0, 4.0))
    assert found.latency == pytest.approx(25.0) and found.throughput == pytest.approx(4.0)
    level = float(np.median([t / (f + w) for f, w, t in runs]))  # took / estimated at (1, 1)
    prior = pace.Pace(level, level)
    rows = [[f / t, w / t] for f, w, t in runs] + [[pace.PRIOR / prior.latency, 0], [0, pace.PRIOR / prior.throughput]]
    targets = [1.0] * len(runs) + [pace.PRIOR, pace.PRIOR]
    found = pace.fit(runs, pace.Pace(1.0, 1.0))
    # with six runs the fit leaves each out in turn and keeps the one whose five it holds closest: one of numpy's
    # solutions over five of them
    solutions = []
    for left in range(len(runs)):
        keep = [i for i in range(len(runs)) if i != left] + [len(runs), len(runs) + 1]
        solutions.append(np.linalg.lstsq(np.array(rows)[keep], np.array(targets)[keep], rcond=None)[0])
    assert any((found.latency, found.throughput) == pytest.approx(tuple(s), rel=1e-9) for s in solutions)
    assert abs(found.latency - 25.0) < abs(1.0 - 25.0) / 2 and abs(found.throughput - 4.0) < abs(1.0 - 4.0) / 2


def test_one_odd_run_does_not_move_the_pace():
    """A run that took 50 times or a fiftieth of what the others say (a machine paused, a block that did less than
    its estimate) is left out; no number of odd runs moves either pace beyond its limits."""
    runs = observed(25.0, 4.0, SHARES)
    truth = pace.Pace(25.0, 4.0)
    for odd in (50.0, 1 / 50):
        f, w, t = runs[2]
        found = pace.fit([*runs, (f, w, t * odd)], truth)
        assert found.latency == pytest.approx(25.0) and found.throughput == pytest.approx(4.0)
    slow = [(f, w, 1e6 * t) for f, w, t in runs]
    fast = [(f, w, 1e-6 * t) for f, w, t in runs]
    assert pace.fit(slow, truth) == pace.Pace(pace.LIMITS[1], pace.LIMITS[1])
    assert pace.fit(fast, truth) == pace.Pace(pace.LIMITS[0], pace.LIMITS[0])


def test_an_admitted_run_reports_what_it_estimated(monkeypatch):
    """The gate observes an admitted block's estimate, parts and all, against the time it took; a model's load
    (estimated from its files' sizes, not from a run's terms) is not observed: a cached load that took a fifth of its
    estimate set step 9's pace to its floor (0.1)."""
    from attention_explorer.explorer.app import shelf
    from attention_explorer.explorer.run import admission

    now = [0.0]
    gate = admission.Gate(budget=2**40, resident=lambda: 0, clock=lambda: now[0])
    seen: list[tuple] = []
    monkeypatch.setattr(admission, "observe", lambda estimate, took: seen.append((estimate, took)))
    estimate = pace.Seconds(0.02, 0.3)
    with gate.admitted(admission.Cost(estimate, 0)):
        now[0] = 1.5
    assert seen == [(estimate, 1.5)] and (seen[0][0].fixed, seen[0][0].work) == (0.02, 0.3)
    load = shelf.load_cost("minilm")
    assert load.lane == "load" and not load.observed
    with gate.admitted(load):
        now[0] = 2.0
    assert len(seen) == 1


def counted_calls(monkeypatch, name: str) -> list[float]:
    """pace's calibration `name` run for real, each time it returns kept in the list returned, in call order."""
    calls: list[float] = []
    real = getattr(pace, name)

    def counted() -> float:
        calls.append(real())
        return calls[-1]

    monkeypatch.setattr(pace, name, counted)
    return calls


def test_a_fresh_process_calibrates_once_on_its_own_machine(monkeypatch):
    """The first estimate times the calibration (this machine's own work, so it holds on another CPU), once, after
    WARM uncounted (a server idle while a class answers read 1-4x on its first ones): later estimates reuse it until
    runs say more."""
    calls = counted_calls(monkeypatch, "throughput_seconds")
    pace.forget()
    first = pace.now()
    each = pace.WARM + pace.REPEATS  # the calls a calibration makes: WARM run first, not counted
    assert len(calls) == each and all(c > 0 for c in calls)
    expected = min(max(sorted(calls[pace.WARM :])[pace.REPEATS // 2] / pace.THROUGHPUT_SECONDS, 0.1), 200.0)
    assert (first.latency, first.throughput) == pytest.approx((expected, expected))
    pace.now()
    assert len(calls) == each


def test_a_pace_says_the_last_kept_for_seconds_only(monkeypatch):
    """A server's load comes and goes: a calibration made while pip ran beside it said 2.4x for the rest of the
    process ("about 7 s" for a 2.9 s reveal). Runs observed KEPT_FOR seconds ago are dropped, and with none left a
    calibration as old is made again by the next estimate."""
    clock = [1000.0]
    measured = [2.4]  # the calibration's pace, as the machine is now
    monkeypatch.setattr(pace.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(pace, "throughput_seconds", lambda: measured[0] * pace.THROUGHPUT_SECONDS)
    pace.forget()
    assert pace.now() == pace.Pace(2.4, 2.4)
    measured[0] = 1.0  # the machine quiet again
    clock[0] += pace.KEPT_FOR - 1
    assert pace.now() == pace.Pace(2.4, 2.4)  # kept KEPT_FOR seconds
    clock[0] += 2
    assert pace.now() == pace.Pace(1.0, 1.0)  # older: calibrated again
    for fixed, work in ((0.05, 0.1), (0.05, 0.5), (0.2, 1.0)):  # runs at 3x: the fit follows them
        pace.observe(pace.Seconds(fixed, work), 3.0 * (fixed + work))
    assert astuple(pace.now()) == pytest.approx((3.0, 3.0))
    clock[0] += pace.KEPT_FOR / 2
    pace.observe(pace.Seconds(0.1, 0.4), 2.0 * 0.1 + 2.0 * 0.4)  # a newer run at 2x
    clock[0] += pace.KEPT_FOR / 2  # the first three are KEPT_FOR old: the fit is the newest run's
    assert astuple(pace.now()) == pytest.approx((2.0, 2.0))
    measured[0] = 1.5
    clock[0] += pace.KEPT_FOR  # no run left, and the calibration older than KEPT_FOR: made again
    assert pace.now() == pace.Pace(1.5, 1.5)
    pace.forget(calibrated=pace.Pace(7.0, 7.0))  # a pace given (a test's) is kept however long
    clock[0] += 10 * pace.KEPT_FOR
    assert pace.now() == pace.Pace(7.0, 7.0)


def test_a_gguf_reference_load_goes_at_pythons_own_pace(monkeypatch):
    """transformers reads a GGUF file's fields and names in Python on one core, which a busy machine slows less than
    the threaded products of the throughput calibration: its estimate takes a Python calibration of its own, made once
    and kept PYTHON_FOR seconds (a page saying it twice says the same), made again after forget()."""
    calls: list[int] = []
    clock = [1000.0]
    monkeypatch.setattr(pace, "python_seconds", lambda: calls.append(1) or 4.0 * pace.PYTHON_SECONDS)
    monkeypatch.setattr(pace.time, "monotonic", lambda: clock[0])
    pace.forget(calibrated=pace.Pace(50.0, 50.0))  # threaded work 50x slower: not what the load follows
    parameters = 10**8
    load = cost.reference_load_seconds(parameters, gguf=True)
    assert load == pytest.approx(parameters * cost.GGUF_SECONDS_PER_PARAMETER * 4.0)
    each = pace.PYTHON_WARM + pace.REPEATS  # the calls one calibration makes
    assert len(calls) == each
    clock[0] += pace.PYTHON_FOR - 1
    assert cost.reference_load_seconds(parameters, gguf=True) == load and len(calls) == each
    clock[0] += 2  # older than PYTHON_FOR: measured again
    monkeypatch.setattr(pace, "python_seconds", lambda: calls.append(1) or 2.0 * pace.PYTHON_SECONDS)
    assert cost.reference_load_seconds(parameters, gguf=True) == pytest.approx(load / 2)
    assert len(calls) == 2 * each
    pace.forget(calibrated=pace.Pace(50.0, 50.0))
    cost.reference_load_seconds(parameters, gguf=True)
    assert len(calls) == 3 * each
    # a folder's weights are read, not parsed: at the throughput pace
    folder = cost.reference_load_seconds(parameters, gguf=False)
    assert folder == pytest.approx(parameters * cost.FOLDER_SECONDS_PER_PARAMETER * 50.0)


def test_pythons_pace_is_the_median_of_its_real_calibrations(monkeypatch):
    """Python's pace times its own work here (so it holds on another CPU): the median of REPEATS real calibrations
    over PYTHON_SECONDS, after PYTHON_WARM not counted (a core waking from idle runs the first slower), made once and
    then reused."""
    calls = counted_calls(monkeypatch, "python_seconds")
    pace.forget()
    found = pace.python_pace()
    assert len(calls) == pace.PYTHON_WARM + pace.REPEATS and all(c > 0 for c in calls)
    counted_ones = sorted(calls[pace.PYTHON_WARM :])
    expected = min(max(counted_ones[pace.REPEATS // 2] / pace.PYTHON_SECONDS, pace.LIMITS[0]), pace.LIMITS[1])
    assert found == pytest.approx(expected)
    assert pace.python_pace() == found and len(calls) == pace.PYTHON_WARM + pace.REPEATS


def test_a_short_runs_estimate_counts_every_weight_read_and_every_layer(smollm2, minilm):
    """At 3 tokens a run reads every weight matrix once and dispatches every layer: the estimate's fixed terms are
    the real model's matrices (not the embeddings, read a row a token) and layers."""
    for loaded in (minilm, smollm2):
        config, model = loaded.model.config, loaded.model
        terms = cost.forward_terms(config, 3, 1, loaded.family.next_token_head)
        layers = [*(model.encoder.layers if model.encoder else ()), *(model.decoder.layers if model.decoder else ())]
        matrices = sum(p.numel() for layer in layers for p in layer.parameters() if p.dim() == 2)
        output = config.d_model * config.target_vocab_size if loaded.family.next_token_head else 0
        assert terms.parameters == matrices + output
        assert terms.layers == len(layers) and terms.runs == 1
        # the fixed part is most of a short run's estimate, little of a long one's
        fixed = cost.Terms(parameters=terms.parameters, layers=terms.layers, runs=terms.runs).seconds()
        assert fixed > 0.5 * terms.seconds()
        long = cost.forward_terms(config, 512, 1, loaded.family.next_token_head).seconds()
        assert fixed < 0.5 * long


def test_a_batch_reads_its_weights_once(minilm):
    config = minilm.model.config
    one, eight = cost.forward_terms(config, 64, 1), cost.forward_terms(config, 64, 8)
    assert eight.parameters == one.parameters and eight.layers == one.layers
    assert eight.macs == 8 * one.macs and eight.weights == 8 * one.weights
    pace.forget(calibrated=1.0)
    once, each = (cost.layer_seconds(config, 64, rows=r) for r in (1, 2))
    assert math.isclose(each - once, once - cost.Terms(parameters=one.parameters / 6, layers=1).seconds())


def test_an_encoder_decoders_first_run_counts_its_greedy_decoding(translate, smollm2):
    """An encoder-decoder's first run decodes greedily before its forward: each step runs every decoder layer over
    its newest position and the output layer over the vocabulary; a decoder-only model's first run has none."""
    config = translate.model.config
    steps = trace.target_budget(9)
    terms = cost.greedy_terms(config, 9, steps)
    output = config.d_model * config.target_vocab_size
    assert terms.layers == config.n_encoder_layers + steps * config.n_decoder_layers
    assert terms.parameters >= steps * output
    pace.forget(calibrated=1.0)
    assert cost.greedy_seconds(config, 9, steps) == pytest.approx(terms.seconds())
    assert cost.greedy_seconds(smollm2.model.config, 9, steps) == 0.0


def test_the_app_admits_a_first_run_with_its_greedy_decoding(translate):
    from attention_explorer.explorer.app import state, store

    choice = state.Choice("translate", "the small cat sees the dog", translate.max_tokens)
    tokens = store.tokens_of(choice)
    pace.forget(calibrated=1.0)
    forward = store.text_cost("translate", tokens).seconds
    decoding = cost.greedy_seconds(translate.model.config, tokens, trace.target_budget(tokens))
    assert store.first_run_cost(choice).seconds == pytest.approx(forward + decoding) and decoding > 0


def test_the_bench_measures_every_estimate():
    """`python -m bench estimates` runs each check and gives a finite positive ratio (one repeat, MiniLM only, here)."""
    from bench import estimates

    found = estimates.checks(repeats=1, models=("minilm",), lengths=(3, 16))
    # 2 lengths fresh and after; translate; the corpus; every head, every layer, one layer off; step 9's reveal
    assert len(found) == 2 * 2 + 2 + 3 + 1, found
    assert all(c.took > 0 and c.estimate > 0 and math.isfinite(c.ratio) for c in found), found
    table = estimates.check_table(found).splitlines()
    assert "within 1.5x" in table[0] and len(table) == len(found) + 2
    assert all(line.split()[-1] in ("yes", "no") for line in table[1:-1])
    read = [c for c in found if c.estimate >= estimates.READ_AFTER]  # the figures a visitor reads
    under = [c for c in found if c.estimate < estimates.READ_AFTER]  # said as "under a second"
    assert table[-1].endswith(
        f"of the {len(read)} read as a figure (1 s or more), {sum(c.within == 'yes' for c in read)} within 1.5x; "
        f"of the {len(under)} said as under a second, {sum(c.took < 1 for c in under)} took under a second"
    ), table[-1]


def _layer_calls(loaded, setup, clean, corrupt, patches, monkeypatch) -> tuple[list, list]:
    """(the layers patching.seconds counts, the layers patching.measure runs): each (queries, keys, batch rows)."""
    from attention_explorer.explorer.experiments import patching

    said: list[tuple[int, int, int]] = []
    layer_seconds = cost.layer_seconds

    def counted(config, queries, keys=None, cross=False, rows=1):
        said.append((queries, keys, rows))
        return layer_seconds(config, queries, keys, cross, rows)

    with monkeypatch.context() as patched:
        patched.setattr(cost, "layer_seconds", counted)
        patching.seconds(loaded, setup, patches)
    tokens, ran = len(setup.clean_ids), []
    # the layer's arguments (x, memory, mask, memory mask, head patch, window): the rows from `window` on are computed
    hooks = [
        layer.register_forward_pre_hook(lambda _, args: ran.append((tokens - args[5], tokens, args[0].size(0))))
        for layer in loaded.model.decoder.layers
    ]
    try:
        patching.measure(loaded, setup, clean, corrupt, patches)
    finally:
        for hook in hooks:
            hook.remove()
    return said, ran


@pytest.mark.parametrize("chunk_bytes", [None, 1])  # the chunks measure makes, and one batch row a chunk
def test_patchings_estimate_counts_the_layers_its_batches_run(induction, monkeypatch, chunk_bytes):
    """Issue 50: patching's estimate counts what _patched runs: each layer once per chunk over the batch rows joined by
    then (not once per row), over the changed window (the last layer: its measured row), and no run for a patch that
    changes nothing; counted here against every layer call of the real measurement (each grid of the step)."""
    from attention_explorer.explorer.experiments import patching

    if chunk_bytes is not None:
        monkeypatch.setattr(patching, "BATCH_BYTES", chunk_bytes)
    setup = patching.setup(
        induction, "alpha bravo seven kilo alpha bravo seven", "alpha bravo seven lima alpha bravo seven", "kilo",
        "lima", 64,
    )  # fmt: skip
    clean, corrupt = (patching.read(induction, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))
    for patches in (
        patching.residual_patches(induction, setup),
        patching.head_patches(induction),
        patching.position_patches(setup, 1, 2),
    ):
        said, ran = _layer_calls(induction, setup, clean, corrupt, patches, monkeypatch)
        assert said == ran and ran, (said, ran)


def _forwards_said_and_run(stack, estimate, work, monkeypatch) -> tuple[list, list]:
    """(the forwards an estimate counts, the forwards its work runs): each (batch rows, tokens), the latter as they
    enter the stack's first layer."""
    said: list[tuple[int, int]] = []
    with monkeypatch.context() as patched:
        patched.setattr(cost, "forward_seconds", lambda c, tokens, rows=1, *rest: said.append((rows, tokens)) or 0)
        estimate()
    ran: list[tuple[int, int]] = []
    hook = stack.layers[0].register_forward_pre_hook(lambda _, args: ran.append(tuple(args[0].shape[:2])))
    try:
        work()
    finally:
        hook.remove()
    return said, ran


@pytest.mark.parametrize(
    ("model", "text"),
    [("minilm", "The cat the dog chased sat on the warm mat"), ("induction", "alpha bravo seven kilo alpha bravo")],
)
def test_the_experiments_estimates_count_the_forwards_they_run(model, text, monkeypatch, minilm, induction):
    """Issue 50 (step 9's reveal said 2x what it ran): each experiment's estimate counts the forwards its run makes,
    each with its batch rows (every layer's heads off: the clean run and the layers' rows; an outcome: its trace and
    the two one-row forwards scoring it), counted against the rows entering the model's first layer; and work kept in
    the shared store, by this session or another, is estimated at 0."""
    from attention_explorer.explorer.app import experiment_runs, shelf, state

    choice = state.Choice(model, text, 32)
    loaded = shelf.model(model)  # the copy the runs use
    experiment_runs.get_answer(choice)
    stack = loaded.model.encoder or loaded.model.decoder
    for estimate, work in (
        (lambda: experiment_runs.layer_effects_seconds(choice), lambda: experiment_runs.get_layer_effects(choice)),
        (lambda: experiment_runs.effects_left(choice, "zero")[2], lambda: experiment_runs.get_effects(choice, "zero")),
        (
            lambda: experiment_runs.outcome_seconds(choice, None, "zero"),
            lambda: experiment_runs.get_outcome(choice, experiment_runs.top_layer(choice), "zero"),
        ),
    ):
        said, ran = _forwards_said_and_run(stack, estimate, work, monkeypatch)
        assert [rows for rows, _ in said] == [rows for rows, _ in ran], (said, ran)
        # each over the answer's tokens: a decoder-only model's scored rows are its text less the last
        assert all(0 <= s - r <= 1 for (_, s), (_, r) in zip(said, ran, strict=True)), (said, ran)
    kept = (
        experiment_runs.layer_effects_seconds(choice),
        experiment_runs.effects_left(choice, "zero")[2],
        experiment_runs.outcome_seconds(choice, experiment_runs.top_layer(choice), "zero"),
    )
    assert kept == (0.0, 0.0, 0.0)
    assert experiment_runs.outcome_seconds(choice, None, "zero") > 0  # heads not known yet: never kept


@pytest.mark.slow
def test_read_outs_sized_by_a_forward_they_need_not_run_say_no_pace(smollm2):
    """Issue 50: the logit lens and an attribution read off a decoder-only model's kept run, and its text scored from
    that run, are admitted at a forward's size but run none: were their quick times observed, a few of them pulled the
    pace to its floor (a reveal said 0.02 s for a 0.56 s run)."""
    from attention_explorer.explorer.app import cached, experiment_runs, state

    choice = state.Choice("smollm2", "The capital of Japan is the city of", 32)  # a read-out long enough to observe
    answer = experiment_runs.get_read_answer(choice)  # the text's first run: observed, as every run that says a pace
    pace.forget(calibrated=pace.Pace(3.0, 5.0))
    experiment_runs.get_lens(choice, 0)
    experiment_runs.get_attribution(choice, 0, answer.targets[0])
    cached.get_scored(choice, "")
    assert pace.now() == pace.Pace(3.0, 5.0)
