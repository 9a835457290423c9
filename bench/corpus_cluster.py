"""Corpus statistics on a Dask LocalCluster (explorer.run.corpus_cluster) against the same run in this process, on the
same cores: in-process torch on N threads, the cluster N worker processes of one thread each (goal: at most 1.2x the
in-process time at 1,000 MiniLM texts of 20-40 tokens, batches of 32). Both warm: the cluster started and the model
loaded on every worker before the timed runs (that start is reported on its own). And the scaling on paper: tasks per
worker, bytes each task carries out and back, each task's compute and what the cluster adds per task."""

from __future__ import annotations

import os
import pickle
import statistics
import time

TARGET_RATIO = 1.2
PAPER_TEXTS = 100_000  # the corpus the paper figures are for


def measure(key: str = "minilm", n: int = 1000, workers: int | None = None, repeats: int = 3, batch_size: int = 32):
    """Timed pairs, in-process and on the cluster, alternating which goes first; medians and their ratio."""
    import torch

    from attention_explorer.explorer.run import corpus, corpus_cluster, corpus_input
    from attention_explorer.models import registry
    from bench.corpus import LONGEST, texts_of

    workers = workers or os.cpu_count() or 1
    torch.set_num_threads(workers)  # the same cores: N threads here, N one-thread workers there
    loaded = registry.load(key)
    prepared = corpus_input.prepare(loaded, corpus_input.from_texts(texts_of(loaded, n)), LONGEST)
    parts = corpus.batches(prepared, batch_size, corpus.reading_stack(loaded).layers[0].self_attn.n_heads)
    began = time.perf_counter()
    with corpus_cluster.connected(workers=workers) as client:
        client.wait_for_workers(workers)
        started = time.perf_counter() - began
        corpus_cluster.run(loaded, prepared, client, key, batch_size)  # warm: every worker loads the model
        warm = time.perf_counter() - began

        def here():
            return corpus.run(loaded, prepared, batch_size)

        def there():
            return corpus_cluster.run(loaded, prepared, client, key, batch_size)

        here()
        mine, cluster = [], []
        for i in range(repeats):
            for fn in (here, there) if i % 2 == 0 else (there, here):
                began = time.perf_counter()
                fn()
                (mine if fn is here else cluster).append(time.perf_counter() - began)
        on_workers = client.run(lambda: sorted(corpus_cluster._MODELS))
    ratio = statistics.median(b / a for a, b in zip(mine, cluster, strict=True))
    out_bytes = [len(pickle.dumps((corpus_cluster.worker_batch_sums, key, b))) for b in parts]
    back_bytes = len(pickle.dumps(corpus.batch_sums(loaded, parts[len(parts) // 2])))
    in_s, cluster_s = statistics.median(mine), statistics.median(cluster)
    per_task = in_s * workers / len(parts)  # one task's compute on one core
    added = (cluster_s - in_s) * workers / len(parts)  # what the cluster adds per task, on one core
    paper_tasks = -(-PAPER_TEXTS // batch_size)
    return {
        "load_average": round(os.getloadavg()[0], 1),  # other work on the machine: 2 cores shared bend the ratio
        "model": key,
        "texts": len(prepared.encodings),
        "workers": workers,
        "batch_size": batch_size,
        "tasks": len(parts),
        "tasks_per_worker": round(len(parts) / workers, 1),
        "repeats": repeats,
        "in_process_s": round(in_s, 3),
        "cluster_s": round(cluster_s, 3),
        "ratio": round(ratio, 3),
        "cluster_start_s": round(started, 2),
        "first_run_s": round(warm - started, 2),
        "models_on_workers": sorted({tuple(m) for m in on_workers.values()}),
        "bytes_out_median": int(statistics.median(out_bytes)),
        "bytes_out_max": max(out_bytes),
        "bytes_back": back_bytes,
        "task_compute_s": round(per_task, 4),
        "task_added_s": round(added, 4),
        "paper_texts": PAPER_TEXTS,
        "paper_tasks": paper_tasks,
        "paper_mb_out": round(paper_tasks * statistics.median(out_bytes) / 2**20, 1),
        "paper_mb_back": round(paper_tasks * back_bytes / 2**20, 1),
    }


def table(row: dict) -> str:
    """The timings, then the paper figures: W workers of one core take about paper_tasks * (compute + added) / W."""
    lines = [
        f"{row['model']}: {row['texts']:,} texts, batches of {row['batch_size']} = {row['tasks']} tasks; "
        f"{row['workers']} cores ({row['tasks_per_worker']} tasks a worker); load average {row['load_average']}",
        f"in-process (torch on {row['workers']} threads): {row['in_process_s']:.2f} s",
        f"LocalCluster ({row['workers']} workers x 1 thread): {row['cluster_s']:.2f} s  ratio {row['ratio']:.3f} "
        f"(target <= {TARGET_RATIO}: {'met' if row['ratio'] <= TARGET_RATIO else 'NOT met'})",
        f"cold start: cluster up in {row['cluster_start_s']:.1f} s, first run (model loaded on each worker) "
        f"{row['first_run_s']:.1f} s",
        f"a task carries {row['bytes_out_median']:,} bytes out (largest {row['bytes_out_max']:,}: the model's key and "
        f"the batch's token ids) and {row['bytes_back']:,} back (its HeadSums)",
        f"a task computes {row['task_compute_s'] * 1000:.0f} ms on one core; the cluster adds "
        f"{row['task_added_s'] * 1000:.0f} ms a task",
    ]
    for w in (8, 64, 512):
        seconds = row["paper_tasks"] * (row["task_compute_s"] + max(row["task_added_s"], 0)) / w
        lines.append(
            f"on paper, {row['paper_texts']:,} texts on {w} one-core workers: {row['paper_tasks']:,} tasks, "
            f"{row['paper_tasks'] / w:,.0f} a worker, {row['paper_mb_out']} MB out and {row['paper_mb_back']} MB back "
            f"in all, about {seconds / 60:.1f} min"
        )
    return "\n".join(lines)
