"""Corpus statistics on a real Dask cluster (explorer.run.corpus_cluster): a LocalCluster of two worker processes on
loopback gives each text the very numbers the in-process run gives it, and pooled means within float64 sums added in
another order (tests/tolerance.py); a worker killed by its PID mid-run loses nothing (its batches run again elsewhere,
each text counted once); a worker that cannot load the model names the model and itself; a real `dask scheduler`
with two `dask worker` processes started from the command line serves `python -m explorer corpus --scheduler`; and an
unreachable scheduler is one line, exit 2, well within 10 s. Everything started here is torn down in `finally`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_explorer.explorer.run import corpus, corpus_cluster, corpus_files, corpus_input
from tests import tolerance

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "the cat sat on a mat while one dog ran after it and the river rose over the old stone bridge"
WORDS = SENTENCE.split()
START_SECONDS = 180  # a worker process importing torch on a busy 2-core machine


def texts(n: int, seed: int = 0) -> list[str]:
    """`n` texts of 4 to 18 words drawn from WORDS (some words repeat, so induction pools positions)."""
    draw = np.random.default_rng(seed)
    return [" ".join(draw.choice(WORDS, size=int(draw.integers(4, 19)))) for _ in range(n)]


@contextlib.contextmanager
def one_thread():
    """torch on one thread here, as on each one-thread worker (a nanny starts it with OMP_NUM_THREADS=1): the same
    kernels in the same order, so a batch's sums are the same numbers on either side."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def in_process(loaded, prepared, batch_size):
    with one_thread():
        return corpus.run(loaded, prepared, batch_size)


def assert_same_statistics(found, expected) -> None:
    """Each text's values and strongest positions bit for bit (its batch ran the same computation); counts exactly;
    the pooled means bit for bit too (the client adds the batches' float64 sums in their order, as corpus.run does)."""
    np.testing.assert_array_equal(found.per_text, expected.per_text)
    np.testing.assert_array_equal(found.strongest_at, expected.strongest_at)
    np.testing.assert_array_equal(found.counts, expected.counts)
    assert found.texts == expected.texts and found.tokens == expected.tokens
    assert np.all(expected.per_text[~np.isnan(expected.per_text)] >= 0)  # the bound's terms are non-negative
    np.testing.assert_array_equal(np.isnan(found.means), np.isnan(expected.means))
    finite = ~np.isnan(expected.means)
    # bound 0: the same float64 sums added in the same order, then the same division (recorded as equal)
    tolerance.assert_within(found.means[finite], expected.means[finite], 0.0, "pooled means, cluster vs in-process")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of 2 worker processes, one thread each, on 127.0.0.1 and no dashboard (the --workers path)."""
    with corpus_cluster.connected(workers=2) as found:
        found.wait_for_workers(2, timeout=START_SECONDS)
        yield found


def test_workers_run_torch_on_one_thread_each(client):
    """Each worker's torch runs one thread: the workers' processes are the parallelism (and one_thread holds)."""
    threads = client.run(torch.get_num_threads)
    assert len(threads) == 2 and set(threads.values()) == {1}


def test_a_worker_that_cannot_load_the_model_names_the_model_and_itself(client, minilm, tmp_path):
    prepared = corpus_input.prepare(minilm, corpus_input.from_texts(texts(4)), 32)
    missing = str(tmp_path / "not-on-the-workers")
    with pytest.raises(corpus_cluster.WorkerModelError) as raised:
        corpus_cluster.run(minilm, prepared, client, missing, batch_size=2, retries=1)
    message = str(raised.value)
    assert missing in message and "cannot load the model" in message
    assert f"on {socket.gethostname()}" in message
    assert any(f"worker {address} " in message for address in client.scheduler_info()["workers"])
    assert "\n" not in message


def test_the_cluster_equals_the_in_process_run_and_loads_the_model_once_per_worker(client, minilm):
    prepared = corpus_input.prepare(minilm, corpus_input.from_texts(texts(24, seed=1)), 32)
    n_batches = len(corpus.batches(prepared, 4, 12))
    seen = []
    found = corpus_cluster.run(minilm, prepared, client, "minilm", 4, progress=lambda d, n: seen.append((d, n)))
    assert_same_statistics(found, in_process(minilm, prepared, 4))
    assert len(seen) == n_batches and seen[-1] == (24, 24)
    assert [d for d, _ in seen] == sorted({d for d, _ in seen})  # rising: every batch counted once
    # the worker-level cache: one model object per worker process, kept between runs
    ids = client.run(lambda: {k: id(m) for k, m in corpus_cluster._MODELS.items()})
    corpus_cluster.run(minilm, prepared, client, "minilm", 8)
    assert client.run(lambda: {k: id(m) for k, m in corpus_cluster._MODELS.items()}) == ids
    assert all(list(models) == ["minilm"] for models in ids.values())


def test_a_worker_killed_mid_run_loses_nothing_and_counts_nothing_twice(client, minilm):
    """SIGKILL one worker's process after the first batch comes back: the scheduler runs its batches on the other
    (and on the one its nanny starts again), every text is counted once, and the statistics are those of the
    in-process run."""
    prepared = corpus_input.prepare(minilm, corpus_input.from_texts(texts(48, seed=2)), 32)
    n_batches = len(corpus.batches(prepared, 2, 12))
    pids = client.run(os.getpid)
    victim_address, victim = sorted(pids.items())[0]
    seen = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        if len(seen) == 1:
            os.kill(victim, signal.SIGKILL)

    scheduler = client.cluster.scheduler
    logged = len(scheduler.transition_log)
    found = corpus_cluster.run(minilm, prepared, client, "minilm", 2, progress=progress)
    assert not alive(victim)
    assert victim_address not in client.scheduler_info()["workers"]  # the scheduler let the dead worker go
    client.wait_for_workers(2, timeout=START_SECONDS)  # and its nanny started a fresh worker process in its place
    assert victim not in client.run(os.getpid).values()
    # some batch was on the dead worker when it died and was sent back to be run again ("processing" -> "released")
    lost = [e for e in list(scheduler.transition_log)[logged:] if str(e[0]).startswith("corpus-batch-")]
    assert any(e[1] == "processing" and e[2] == "released" for e in lost), "no batch was lost with the worker"
    assert seen == sorted(seen) and seen[-1] == 48 and len(seen) == n_batches  # each batch counted once
    assert_same_statistics(found, in_process(minilm, prepared, 2))


def test_the_api_takes_a_client(client, minilm):
    import attention_explorer as ae

    lines = texts(10, seed=5)
    found = ae.corpus("minilm", lines, max_tokens=32, batch_size=4, client=client)
    prepared = corpus_input.prepare(minilm, corpus_input.from_texts(lines), 32)
    assert_same_statistics(found, in_process(minilm, prepared, 4))


@pytest.mark.slow
def test_attention_explorer_corpus_with_workers_starts_and_stops_its_own_local_cluster(minilm, tmp_path, capsys):
    from attention_explorer import cli

    lines = texts(12, seed=6)
    (tmp_path / "texts.txt").write_text("\n".join(lines), encoding="utf-8")
    argv = ["corpus", "--model", "minilm", "--file", str(tmp_path / "texts.txt"), "--max-tokens", "32"]
    argv += ["--batch-size", "4", "--format", "json", "--workers", "2"]
    before = children()
    assert cli.main(argv) == 0
    assert children() <= before  # its worker processes (and their nannies) are gone once it returns
    document = json.loads(capsys.readouterr().out)
    prepared = corpus_input.prepare(minilm, corpus_input.from_texts(lines), 32)
    expected = {(r["layer"], r["head"]): r["entropy"] for r in in_process(minilm, prepared, 4).rows()}
    assert len(corpus.batches(prepared, 4, 12)) > 1  # several batches, pooled in their order: the same bits
    found = [r["entropy"] for r in document["rows"]]
    tolerance.assert_within(found, [expected[(r["layer"], r["head"])] for r in document["rows"]], 0.0, "entropy")
    assert main_error(["corpus", "--model", "minilm", "--sample", "--workers", "0"], capsys) == (
        2,
        "error: --workers must be at least 1, not 0",
    )


def children() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}


def main_error(argv, capsys):
    from attention_explorer.explorer.__main__ import main

    code = main(argv)
    return code, capsys.readouterr().err.strip()


@pytest.mark.slow
def test_smollm2_on_the_cluster_equals_the_in_process_run(client, smollm2):
    prepared = corpus_input.prepare(smollm2, corpus_input.from_texts(texts(6, seed=3)), 24)
    found = corpus_cluster.run(smollm2, prepared, client, "smollm2", 2)
    assert_same_statistics(found, in_process(smollm2, prepared, 2))


# -- a cluster started from the command line


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


NO_DASHBOARD = ("--no-dashboard", "--dashboard-address", "127.0.0.1:0")  # its HTTP routes on loopback, any free port


def dask_command(*argv: str) -> list[str]:
    """The `dask` command of this environment (its console script beside the interpreter, else `python -m dask`)."""
    script = Path(sys.executable).with_name("dask")
    return [str(script), *argv] if script.exists() else [sys.executable, "-m", "dask", *argv]


def stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM to every one at once, then SIGKILL to any not gone within 30 s."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


@pytest.fixture
def command_line_cluster(tmp_path):
    """`dask scheduler` and two `dask worker` processes on 127.0.0.1, free ports, no dashboard, started as a person
    starts them (the workers find this checkout on PYTHONPATH, from another folder); all stopped in `finally`."""
    address = f"tcp://127.0.0.1:{free_port()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    logs = [(tmp_path / f"{name}.log").open("w") for name in ("scheduler", "worker-1", "worker-2")]
    started = []
    try:
        port = address.rsplit(":", 1)[1]
        started.append(
            subprocess.Popen(
                dask_command("scheduler", "--host", "127.0.0.1", "--port", port, *NO_DASHBOARD),
                cwd=tmp_path,
                env=env,
                stdout=logs[0],
                stderr=subprocess.STDOUT,
            )
        )
        for log in logs[1:]:
            worker = ("worker", address, "--host", "127.0.0.1", "--nthreads", "1", *NO_DASHBOARD)
            started.append(
                subprocess.Popen(dask_command(*worker), cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
            )
        with distributed.Client(address, timeout=START_SECONDS) as probe:
            probe.wait_for_workers(2, timeout=START_SECONDS)
        yield address
    finally:
        stop(started)
        for log in logs:
            log.close()


@pytest.mark.slow
def test_the_cli_runs_on_a_scheduler_and_workers_started_from_the_command_line(command_line_cluster, minilm, tmp_path):
    lines = texts(20, seed=4)
    corpus_file = tmp_path / "texts.jsonl"
    corpus_file.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(lines)))
    out = tmp_path / "stats.json"
    command = [sys.executable, "-m", "explorer", "corpus", "--model", "minilm", "--file", str(corpus_file)]
    command += ["--max-tokens", "32", "--batch-size", "4", "--format", "json", "--out", str(out)]
    command += ["--scheduler", command_line_cluster]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    found = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert found.returncode == 0, found.stderr
    document = json.loads(out.read_text())
    prepared = corpus_input.prepare(minilm, corpus_files.read(corpus_file), 32)
    expected = in_process(minilm, prepared, 4)
    assert document["texts"] == 20 and document["model"] == "minilm"
    rows = {(r["layer"], r["head"]): r for r in expected.rows()}
    assert len(corpus.batches(prepared, 4, 12)) > 1  # several batches, pooled in their order
    for row in document["rows"]:
        want = rows[(row["layer"], row["head"])]
        for name, value in row.items():
            if isinstance(value, float):
                # bound 0: the batches' sums pooled in their order, as in-process; JSON keeps a float's bits
                tolerance.assert_within(value, want[name], 0.0, f"{name} of head {row['layer']}.{row['head']}")
            else:
                assert value == want[name], name


def test_an_unreachable_scheduler_is_one_line_and_exit_2_within_10_seconds(tmp_path):
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    command = [sys.executable, "-m", "explorer", "corpus", "--model", "minilm", "--sample", "--scheduler", address]
    began = time.monotonic()
    found = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - began
    assert found.returncode == 2
    assert found.stderr.strip().count("\n") == 0 and address in found.stderr and "cannot reach" in found.stderr
    assert found.stdout == ""
    assert took < 10, f"took {took:.1f} s"
