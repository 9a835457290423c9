"""`python -m bench forward|startup|figures|browser|load|memory|cost|estimates|patching|package|corpus|faults|gpu|window
[--json]`: benchmarks, never run as tests (`corpus --cluster`: a Dask LocalCluster against the in-process run). A
model key folder:gpt2-small (bench.folders) is built on first use and offered to the app."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# as the app runs (app.py, attention_explorer/cli.py): OpenMP threads sleep between regions, which makes each of a
# run's many small operations wait for its threads to wake; a bench with spinning threads timed runs the app never makes
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    commands = parser.add_subparsers(dest="command", required=True)
    forward = commands.add_parser(
        "forward", help="the app's first run of a text, and our forward with capture, vs transformers eager"
    )
    forward.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    forward.add_argument("--repeats", type=int, default=None, help="timed pairs (default: 25, fewer past 128 tokens)")
    forward.add_argument("--lengths", type=int, nargs="+", default=None, help="token counts (default 16 128 512)")
    forward.add_argument(
        "--models",
        nargs="+",
        default=["minilm", "gemma3"],
        help="registry keys transformers reads too (folder:gpt2-small too; default minilm and Gemma 3 270M)",
    )
    forward.add_argument(
        "--capture-up-to", type=int, default=None, help="longest text of the capture comparison (default 512)"
    )
    startup = commands.add_parser("startup", help="a model's load time in a new process, again warm, and its memory")
    startup.add_argument("--json", action="store_true")
    startup.add_argument("--model", default="smollm2")
    figures = commands.add_parser("figures", help="text -> every figure of the attention and model-view pages")
    figures.add_argument("--json", action="store_true")
    figures.add_argument("--repeats", type=int, default=7)
    figures.add_argument("--lengths", type=int, nargs="+", default=None)
    browser = commands.add_parser("browser", help="Enter -> heatmaps drawn, in headless Chromium")
    browser.add_argument("--json", action="store_true")
    browser.add_argument("--repeats", type=int, default=3)
    browser.add_argument("--lengths", type=int, nargs="+", default=None)
    browser.add_argument("--pages", action="store_true", help="open every page at 16, 128, 512 tokens: time, MB")
    browser.add_argument(
        "--models", nargs="+", default=None, help="with --pages: model keys, folder:gpt2-small too (default: all four)"
    )
    browser.add_argument("--only", nargs="+", default=(), help="with --pages: these pages only, by path (decoding)")
    browser.add_argument("--skip", nargs="+", default=(), help="with --pages: not these pages (head_effects)")
    load = commands.add_parser("load", help="many browser sessions at once against streamlit run app.py")
    load.add_argument("--json", action="store_true")
    load.add_argument("--sessions", type=int, default=10)
    load.add_argument("--model", default="minilm", help="the model every session opens on (its address names it)")
    load.add_argument(
        "--seconds", type=float, default=None, help="typing time (default 60; each phase's with --long: 240)"
    )
    load.add_argument(
        "--long", type=int, default=0, help="then type again beside this many long texts, each asking for its run (2)"
    )
    load.add_argument("--long-tokens", type=int, default=8192, help="with --long: each long text's tokens")
    load.add_argument("--long-model", default="smollm2", help="with --long: the model the long texts run on")
    load.add_argument(
        "--long-seconds", type=float, default=900.0, help="with --long: a long run's bound, click to drawn"
    )
    load.add_argument("--budget", default="60%", help="with --long: the server's EXPLORER_MEMORY_BUDGET (6GB, 50%%)")
    load.add_argument(
        "--shots", type=Path, default=None, help="with --long: the ask and the waiting line, as PNGs here"
    )
    load.add_argument("--pause", type=float, default=0.0, help="with --long: seconds a person reads each heatmap")
    load.add_argument(
        "--nice-browsers", type=int, default=0, help="with --long: the browsers' priority (10: below the server's)"
    )
    load.add_argument("--sentences", type=int, default=None, help="stop each session after this many sentences")
    load.add_argument("--no-costs", action="store_true", help="skip the one-person CPU and memory measurements")
    load.add_argument(
        "--replicas", type=int, default=0, help="the same sessions through nginx to N app processes, then one process"
    )
    memory = commands.add_parser("memory", help="resident memory after start-up and after many sentences")
    memory.add_argument("--json", action="store_true")
    memory.add_argument("--sentences", type=int, default=500)
    memory.add_argument("--model", default=None, help="long-text mode: this model alone (smollm2, folder:gpt2-small)")
    memory.add_argument("--tokens", type=int, default=2048, help="long-text mode: each text's tokens")
    memory.add_argument("--texts", type=int, default=100, help="long-text mode: distinct texts read")
    patching = commands.add_parser("patching", help="activation patching of every head of SmolLM2 at 20 tokens")
    patching.add_argument("--json", action="store_true")
    patching.add_argument("--repeats", type=int, default=3)
    cost = commands.add_parser("cost", help="admission's memory and time model against real first runs (minutes)")
    cost.add_argument("--json", action="store_true")
    cost.add_argument(
        "--runs", nargs="+", default=None, metavar="MODEL:TOKENS", help="default: minilm 128-512, smollm2 512-8192"
    )
    estimates = commands.add_parser("estimates", help="the time estimates against what happens (issue 50)")
    estimates.add_argument("what", nargs="?", default="checks", choices=["checks", "fit", "reference"])
    package = commands.add_parser("package", help="the console command's export, the import and the notebook API")
    package.add_argument("--json", action="store_true")
    package.add_argument("--repeats", type=int, default=5)
    corpus = commands.add_parser("corpus", help="corpus statistics vs transformers' batched forward, and memory")
    corpus.add_argument("--json", action="store_true")
    corpus.add_argument(
        "--runs", nargs="+", default=None, metavar="MODEL:TEXTS", help="default: minilm:1000 smollm2:200"
    )
    corpus.add_argument("--repeats", type=int, default=3, help="timed pairs per model")
    corpus.add_argument("--batch-size", type=int, default=32)
    corpus.add_argument(
        "--cluster",
        action="store_true",
        help="instead: a Dask LocalCluster against the in-process run on the same cores (minilm:1000 by default)",
    )
    corpus.add_argument("--workers", type=int, default=None, help="with --cluster: worker processes (default: cores)")
    faults = commands.add_parser("faults", help="the fault suite: each fault beside other visitors, the gate's books")
    faults.add_argument("--json", action="store_true")
    faults.add_argument("--gguf", type=Path, default=None, help="the GGUF file whose cache fills the disk (SmolLM2's)")
    gpu = commands.add_parser(
        "gpu", help="first run and every page's compute on a GPU vs transformers (no GPU: says so)"
    )
    gpu.add_argument("--json", action="store_true")
    gpu.add_argument("--device", default="auto", help="cuda, cuda:N, or cpu (the same code on the CPU: a dry run)")
    gpu.add_argument("--lengths", type=int, nargs="+", default=[512, 2048, 8192])
    gpu.add_argument("--models", nargs="+", default=["smollm2", "folder:gpt2-small"], help="keys or model paths")
    gpu.add_argument("--repeats", type=int, default=3, help="timed runs after the first")
    gpu.add_argument("--out", type=Path, default=None, help="write the JSON here too")
    window = commands.add_parser(
        "window", help="a sliding-window layer's band vs the dense path vs float64, and vs transformers (Gemma 3)"
    )
    window.add_argument("--json", action="store_true")
    window.add_argument("--lengths", type=int, nargs="+", default=[2048])
    window.add_argument("--model", default="gemma3", help="a registry key with sliding-window layers")
    window.add_argument("--no-reference", action="store_true", help="without transformers' load and forward")
    args = parser.parse_args(argv)

    if args.command == "window":
        from bench import window as bench_window

        rows = bench_window.run(tuple(args.lengths), args.model, not args.no_reference)
        print(json.dumps(rows) if args.json else bench_window.table(rows))
        return 0
    if args.command == "faults":
        import dataclasses

        from bench import faults as bench_faults

        rows = bench_faults.run(args.gguf)
        print(
            json.dumps([dataclasses.asdict(r) | {"held": r.held} for r in rows])
            if args.json
            else bench_faults.table(rows)
        )
        return 0 if all(r.held for r in rows) else 1

    if args.command == "gpu":
        from bench import gpu as bench_gpu

        return bench_gpu.main(args)

    if args.command == "corpus" and args.cluster:
        from bench import corpus_cluster as bench_cluster

        key, n = (args.runs[0].split(":")[0], int(args.runs[0].split(":")[1])) if args.runs else ("minilm", 1000)
        row = bench_cluster.measure(key, n, args.workers, args.repeats, args.batch_size)
        print(json.dumps(row) if args.json else bench_cluster.table(row))
    elif args.command == "corpus":
        from bench import corpus as bench_corpus

        runs = [(r.split(":")[0], int(r.split(":")[1])) for r in args.runs] if args.runs else bench_corpus.RUNS
        rows = bench_corpus.run(runs, args.repeats, args.batch_size)
        print(json.dumps(rows) if args.json else bench_corpus.table(rows))
    elif args.command == "cost":
        from bench import cost as bench_cost

        runs = [(r.split(":")[0], int(r.split(":")[1])) for r in args.runs] if args.runs else bench_cost.RUNS
        rows = bench_cost.run(runs)
        print(json.dumps(rows) if args.json else bench_cost.table(rows))
    elif args.command == "estimates":
        from bench import estimates as bench_estimates

        bench_estimates.main(args.what)
    elif args.command == "package":
        from bench import package as bench_package

        found = bench_package.run(args.repeats)
        print(json.dumps(found) if args.json else bench_package.table(found))
    elif args.command == "patching":
        from bench import patching as bench_patching

        rows = bench_patching.run(args.repeats)
        print(json.dumps(rows) if args.json else bench_patching.table(rows))
    elif args.command == "forward":
        from bench import forward as bench_forward

        lengths = tuple(args.lengths or bench_forward.LENGTHS)
        most = args.capture_up_to or bench_forward.CAPTURE_UP_TO
        rows = [r for model in args.models for r in bench_forward.run(lengths, args.repeats, None, model, most)]
        print(json.dumps(rows) if args.json else bench_forward.table(rows))
    elif args.command == "startup":
        from bench import startup as bench_startup

        summary = bench_startup.run(args.model)
        print(json.dumps(summary) if args.json else bench_startup.table(summary))
    elif args.command == "figures":
        from bench import figures as bench_figures

        rows = bench_figures.run(tuple(args.lengths or bench_figures.LENGTHS), repeats=args.repeats)
        print(json.dumps(rows) if args.json else bench_figures.table(rows))
    elif args.command == "browser":
        from bench import browser as bench_browser

        if args.pages:
            lengths = tuple(args.lengths or bench_browser.PAGE_LENGTHS)
            models = tuple(args.models or bench_browser.PAGE_MODELS)
            rows = bench_browser.pages(lengths, models, tuple(args.only), tuple(args.skip))
            print(json.dumps(rows) if args.json else bench_browser.pages_table(rows))
        else:
            rows = bench_browser.run(tuple(args.lengths or bench_browser.LENGTHS), repeats=args.repeats)
            print(json.dumps(rows) if args.json else bench_browser.table(rows))
    elif args.command == "load":
        from bench import load as bench_load

        if args.replicas:  # nginx and N replicas against one process, the same sessions
            from bench import replicas as bench_replicas

            rows = bench_replicas.compare(args.replicas, args.sessions, args.seconds or 60.0, args.model)
            print(json.dumps(rows) if args.json else bench_replicas.table(rows))
            return 0
        if args.long:  # the two phases, without the one-person costs
            from bench import load_long

            found = load_long.run(
                sessions=args.sessions,
                seconds=args.seconds or load_long.SECONDS,
                long=args.long,
                long_tokens=args.long_tokens,
                long_model=args.long_model,
                budget=args.budget,
                shots=args.shots,
                long_seconds=args.long_seconds,
                pause=args.pause,
                nice=args.nice_browsers,
            )
        else:
            found = bench_load.run(args.sessions, args.seconds or 60.0, args.sentences, not args.no_costs, args.model)
        summary = found.summary()
        print(json.dumps(summary) if args.json else bench_load.table(summary))
    elif args.command == "memory":
        from bench import memory as bench_memory

        summary = bench_memory.run(args.sentences, args.model, args.tokens, args.texts)
        print(json.dumps(summary) if args.json else bench_memory.table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
