"""explorer.run.corpus's map on a Dask cluster (the `distributed` package): a LocalCluster of worker processes on this
machine, or any scheduler's workers (started by hand, by dask-jobqueue on SLURM or PBS, by dask-kubernetes), all with
the same client code. No streamlit.

Each task carries plain values: the model's registry key or path (a path that exists on the workers) and one Batch
of token ids (a few KB). A worker loads the model on its first task and keeps it for its life (`worker_model`), so
nothing large travels per task; what comes back is the batch's HeadSums. The client takes the sums as the futures
finish (as_completed, in whatever order), keyed by batch index: a task Dask ran twice (its worker died after it
finished, or a retry) counts once; it adds them in the batches' order, as corpus.run does. A worker that dies mid-run
loses nothing: the scheduler runs its batches again on another worker. The batches are those `corpus.run` makes, so
each text's own values are the same numbers whichever worker ran it, and the pooled means are the in-process run's,
bit for bit.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distributed import Client

    from attention_explorer.explorer.run.corpus import Batch, HeadSums
    from attention_explorer.explorer.run.corpus_input import Prepared
    from attention_explorer.explorer.run.corpus_stats import CorpusStats
    from attention_explorer.models.registry import LoadedModel

CONNECT_SECONDS = 5  # an unreachable scheduler is said to be so after this long
RETRIES = 2  # a task that raised runs again this many times (a worker that died is the scheduler's to handle)

_MODELS: dict[str, LoadedModel] = {}  # this worker process's models by key or path: loaded once, kept
_LOADING = threading.Lock()  # a worker's threads load a model once between them


class ClusterError(RuntimeError):
    """The cluster cannot be reached, or a batch could not run on it: one line that says where and why."""


class WorkerModelError(ClusterError):
    """A worker could not load the model: names the model and the worker."""


def worker_model(model: str) -> LoadedModel:
    """The model `model` names (a registry key, or a path on this worker), loaded on this worker's first task and kept
    for the worker's life; WorkerModelError names the model and this worker when it cannot be loaded."""
    with _LOADING:
        if model not in _MODELS:
            from attention_explorer.models import registry

            try:
                _MODELS[model] = registry.load(model) if model in registry.MODELS else registry.from_path(model)
            except Exception as e:  # whatever it is, the person needs the model and the worker
                raise WorkerModelError(f"worker {_this_worker()} cannot load the model {model!r}: {e}") from None
        return _MODELS[model]


def _this_worker() -> str:
    from distributed import get_worker

    try:
        address = get_worker().address
    except ValueError:  # not inside a worker (a test calling this directly)
        address = "(not a Dask worker)"
    return f"{address} on {socket.gethostname()}"


def worker_batch_sums(model: str, batch: Batch) -> HeadSums:
    """The task: one batch's HeadSums on a worker, with the worker's copy of the model (corpus.batch_sums)."""
    from attention_explorer.explorer.run import corpus

    return corpus.batch_sums(worker_model(model), batch)


def run(
    loaded: LoadedModel,
    prepared: Prepared,
    client: Client,
    model: str,
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    retries: int = RETRIES,
) -> CorpusStats:
    """corpus.run's statistics with the map on `client`'s workers: every batch a task (`model` the key or path the
    workers load, the model `loaded` is here), the sums added here as the tasks finish; `progress(texts done, texts)`
    after each batch first comes back. ClusterError when a batch fails past its retries."""
    import numpy as np
    from distributed import as_completed

    from attention_explorer.explorer.run import corpus
    from attention_explorer.explorer.run.corpus import HeadSums

    layers = corpus.reading_stack(loaded).layers
    shape = (len(layers), layers[0].self_attn.n_heads)  # (L, H): the workers' model must be this one
    parts = corpus.batches(prepared, batch_size, shape[1])
    run_id = uuid.uuid4().hex[:12]  # keys of this run alone: two runs on one scheduler never share a result
    keys = [f"corpus-batch-{run_id}-{i}" for i in range(len(parts))]
    batch_of = {key: i for i, key in enumerate(keys)}
    futures = client.map(worker_batch_sums, [model] * len(parts), parts, key=keys, retries=retries, pure=False)
    sums = counts = None  # float64 (S, L, H) and int64 (S,), from the first batch back
    texts = {}  # batch -> its (index, per_text, strongest)
    waiting, added = {}, 0  # batch -> its (sums, counts) until every batch before it is added; how many are
    done, total = 0, len(prepared.encodings)
    try:
        for future in as_completed(futures, loop=client.loop):
            i = batch_of[future.key]
            part = _result(future)
            future.release()  # the worker may forget it now
            if i in texts:  # already counted (Dask ran it again): once only
                continue
            if part.sums.shape[1:] != shape:
                raise ClusterError(f"the workers' model {model!r} has another shape than {loaded.key} here")
            texts[i] = (part.index, part.per_text, part.strongest)
            waiting[i] = (part.sums, part.counts)
            while added in waiting:  # float64 sums added in the batches' order, as corpus.run adds them: the same
                # pooled means bit for bit, whatever order the tasks finish in (only batches finished early wait)
                part_sums, part_counts = waiting.pop(added)
                sums = part_sums.copy() if sums is None else sums + part_sums
                counts = part_counts.copy() if counts is None else counts + part_counts
                added += 1
            done += len(parts[i])
            if progress is not None:
                progress(done, total)
    finally:
        client.cancel([f for f in futures if not f.done()])  # a failed or interrupted run leaves nothing queued
    ordered = [texts[i] for i in range(len(parts))]
    pooled = HeadSums(sums, counts, *(np.concatenate([t[j] for t in ordered]) for j in range(3)))
    return corpus.finish(loaded, prepared, pooled)


def _result(future) -> HeadSums:
    """A finished task's HeadSums; its failure as one ClusterError line (the worker's own message where it has one)."""
    from distributed.scheduler import KilledWorker

    try:
        return future.result()
    except ClusterError:
        raise
    except KilledWorker as e:
        raise ClusterError(f"a batch of texts took down every worker it ran on ({e})") from None
    except Exception as e:
        raise ClusterError(f"a batch failed on the cluster: {type(e).__name__}: {e}") from None


def probe(scheduler: str, timeout: float = CONNECT_SECONDS) -> None:
    """A plain TCP connection to a tcp:// scheduler's address, before anything heavy is imported: ClusterError in one
    line, within `timeout` seconds, when nothing listens there (other protocols are left to Client)."""
    address = scheduler.removeprefix("tcp://")
    if "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"{scheduler} is no scheduler address: give tcp://HOST:PORT (a scheduler's port is 8786)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        raise ClusterError(f"cannot reach the Dask scheduler at {scheduler} ({reason})") from None


@contextlib.contextmanager
def connected(scheduler: str | None = None, workers: int | None = None) -> Iterator[Client]:
    """A Client of the scheduler at `scheduler` (tcp://HOST:8786), or of a LocalCluster of `workers` worker processes
    on this machine (one thread each, on 127.0.0.1, no dashboard), closed on the way out. ClusterError in one line when
    the scheduler cannot be reached within CONNECT_SECONDS."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError(
            "a corpus on a cluster needs Dask's distributed: pip install 'attention-explorer[cluster]'"
        ) from None
    if (scheduler is None) == (workers is None):
        raise ValueError("give a scheduler's address or a number of workers (one of them)")
    if workers is not None:
        if workers < 1:
            raise ClusterError(f"--workers must be at least 1, not {workers}")
        import dask

        with (
            # no statistical profiler on the workers: it samples each worker thread's stack every 10 ms, for a dashboard
            # this cluster does not have (with it, one worker took 1.5x the in-process time, without it 1.0-1.14x)
            dask.config.set({"distributed.worker.profile.enabled": False}),
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                # no dashboard; the scheduler's own HTTP routes (health) on a free loopback port, not 8787
                scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                silence_logs=logging.ERROR,
            ) as cluster,
            Client(cluster, set_as_default=False) as client,
        ):
            yield client
        return
    probe(scheduler)
    client = Client.__new__(Client)  # kept by name: a failed start is closed here, not by a traceback at exit
    try:
        with _quiet():
            client.__init__(scheduler, timeout=CONNECT_SECONDS, set_as_default=False)
    except Exception as e:  # something listens there that is no Dask scheduler, or it went away
        with contextlib.suppress(Exception), _quiet():
            client.close(timeout=1)
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ClusterError(f"cannot reach the Dask scheduler at {scheduler} ({reason})") from None
    try:
        yield client
    finally:
        client.close()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """distributed's own log lines held back while connecting: its failure is said once, by ClusterError."""
    log = logging.getLogger("distributed")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)
