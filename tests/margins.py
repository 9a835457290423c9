"""The numerical-margin report: how close each float comparison of the suite comes to its bound, under several thread
counts and kernel choices on this one machine (a stand-in for other CPUs and BLAS builds).

    .venv/bin/python -m tests.margins                       # tests/models and tests/explorer, every configuration
    .venv/bin/python -m tests.margins --configs default mkl-compatible -- tests/explorer/test_lens_long.py

Each configuration runs pytest in a new process with EXPLORER_MARGINS set, so that every comparison (assert_within,
np.testing.assert_allclose, torch.testing.assert_close) writes its margin: bound / largest difference (inf when the
two sides are equal). A margin under 10x on your own machine is suspect: another machine may cross it; except a
worst-case bound (assert_within(..., worst_case=True): every rounding an IEEE operation's half ulp, none estimated),
which no machine crosses and which is listed apart, marked "worst case". Not a test:
it runs the tests, several times over, one process at a time.

Only what compares floats runs: of the folders given, the test files that make such a comparison (they name
tests.tolerance, assert_allclose or assert_close); and after the first configuration, only the tests that recorded a
comparison under it (the same tests make the same comparisons under every configuration), so each further
configuration costs a fraction of the first.

A long run can be taken in parts, into one --keep folder, and the report reads every configuration's log there:
`--from default.jsonl --below 1000` runs only the tests that recorded a margin under 1,000x under that earlier
configuration (a comparison a hundred times above 10x would need another order of the same sums to multiply its
error a hundredfold; other orders move it by a few times); `--update` reruns the given tests (a changed test) and
replaces only their records in the folder's logs, keeping every other test's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
SUSPECT = 10.0  # a margin under this on one machine may not hold on the next

# name -> environment: OpenMP's thread count (how products are split), ATen's vectorised kernels, MKL's code path
CONFIGS: dict[str, dict[str, str]] = {
    "default": {},
    "1-thread": {"OMP_NUM_THREADS": "1"},
    "4-threads": {"OMP_NUM_THREADS": "4"},
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},
    "aten-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "mkl-compatible": {"MKL_CBWR": "COMPATIBLE"},
    "mkl-avx2": {"MKL_CBWR": "AVX2"},
}
NEEDS_MKL = {"mkl-compatible", "mkl-avx2"}


def available() -> list[str]:
    """The configurations this machine can run (MKL's only where torch is built with it)."""
    return [name for name in CONFIGS if name not in NEEDS_MKL or torch.backends.mkl.is_available()]


def run(config: str, paths: list[str], log: Path) -> int:
    """pytest over paths under one configuration, its margins appended to log and its output (with the slowest
    tests' durations) written beside it; pytest's exit status."""
    env = {**os.environ, **CONFIGS[config], "EXPLORER_MARGINS": str(log), "HF_HUB_OFFLINE": "1"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "not e2e",
        "--durations=25",
        *paths,
    ]
    print(f"== {config}: {' '.join(f'{k}={v}' for k, v in CONFIGS[config].items()) or '(as installed)'}", flush=True)
    done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.with_suffix(".out").write_text(done.stdout, encoding="utf-8")
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "(no output)", flush=True)
    if done.returncode not in (0, 5):
        failures = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
        print("\n".join(failures), flush=True)
    return done.returncode


COMPARES = ("tolerance", "assert_allclose", "assert_close")


def comparing(paths: list[str]) -> list[str]:
    """The test files under paths (files or folders) that make a float comparison, sorted."""
    found = []
    for given in paths:
        if "::" in given:  # one test, as pytest names it: it runs as given
            found.append(given)
            continue
        path = Path(given)
        files = [path] if path.is_file() else sorted((ROOT / path).rglob("test_*.py"))
        found += [str(f.relative_to(ROOT)) if f.is_absolute() else str(f) for f in files if _compares(f)]
    return found


def _compares(path: Path) -> bool:
    text = (path if path.is_absolute() else ROOT / path).read_text(encoding="utf-8")
    return any(word in text for word in COMPARES)


def recorded(log: Path, below: float = math.inf) -> list[str]:
    """The test ids that wrote a margin to log (those with a margin under `below` there), in their first order."""
    if not log.is_file():
        return []
    lowest: dict[str, float] = {}
    for line in log.read_text().splitlines():
        found = json.loads(line)
        lowest[found["test"]] = min(lowest.get(found["test"], math.inf), found["margin"])
    return [t for t, margin in lowest.items() if "::" in t and (margin < below or math.isinf(below))]


def forget(log: Path, paths: list[str]) -> None:
    """Drop from log the records of the tests that paths name (a file, or one test as pytest names it)."""
    if not log.is_file():
        return

    def named(test: str) -> bool:
        return any(test == p or test.startswith(p + "::") or test.startswith(p + "[") for p in paths)

    kept = [line for line in log.read_text().splitlines() if not named(json.loads(line)["test"])]
    log.write_text("".join(line + "\n" for line in kept))


def report(logs: dict[str, Path], top: int) -> list[dict]:
    """The lowest margin of each comparison over every configuration, lowest first."""
    worst: dict[tuple[str, str], dict] = {}
    for config, log in logs.items():
        if not log.is_file():
            continue
        for line in log.read_text().splitlines():
            found = json.loads(line)
            key = (found["test"], found["what"])
            if key not in worst or found["margin"] < worst[key]["margin"]:
                worst[key] = {**found, "config": config}
    rows = sorted(worst.values(), key=lambda r: r["margin"])
    print(f"\n{len(rows)} comparisons; the {min(top, len(rows))} lowest margins (bound / largest difference):")
    print(f"{'margin':>10}  {'largest diff':>12}  {'bound':>10}  {'scale':>10}  {'config':<14} comparison")
    for r in rows[:top]:
        margin = "equal" if math.isinf(r["margin"]) else f"{r['margin']:.3g}x"
        flag = "  (worst case: no machine crosses it)" if r.get("worst_case") else ""
        flag = flag or ("  <-- under 10x" if r["margin"] < SUSPECT else "")
        print(
            f"{margin:>10}  {r['worst']:12.3g}  {r['bound']:10.3g}  {r['scale']:10.3g}  {r['config']:<14} "
            f"{r['test']} {r['what']}{flag}"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.margins", description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=None, help="default: every one")
    parser.add_argument("--top", type=int, default=25, help="how many of the lowest margins to list")
    parser.add_argument("--keep", type=Path, default=None, help="a folder to keep each configuration's margins in")
    parser.add_argument("--from", dest="earlier", type=Path, default=None, help="run the tests recorded in this log")
    parser.add_argument("--below", type=float, default=math.inf, help="with --from: those with a margin under this")
    parser.add_argument("--update", action="store_true", help="replace only these tests' records in the kept logs")
    parser.add_argument("paths", nargs="*", default=["tests/models", "tests/explorer"])
    args = parser.parse_args(argv)
    configs = args.configs or available()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="margins-"))
    folder.mkdir(parents=True, exist_ok=True)
    logs = {config: folder / f"{config}.jsonl" for config in configs}
    statuses = {}
    if args.earlier is not None:
        paths = recorded(args.earlier, args.below)
        print(f"{len(paths)} tests of {args.earlier} recorded a margin under {args.below:g}x", flush=True)
    else:
        paths = comparing(args.paths)
        print(f"{len(paths)} test files compare floats", flush=True)
    for i, config in enumerate(configs):
        if args.update:  # what was named goes, a file that no longer compares floats too
            forget(logs[config], paths if args.earlier is not None else [*paths, *args.paths])
        else:
            logs[config].unlink(missing_ok=True)
        if i == 1 and args.earlier is None and not args.update:  # from here on, what compared under the first
            paths = recorded(logs[configs[0]]) or paths
            print(f"{len(paths)} tests recorded a comparison: the next configurations run these", flush=True)
        statuses[config] = run(config, paths, logs[config])
    everything = {config: folder / f"{config}.jsonl" for config in CONFIGS}  # earlier parts' logs too
    rows = report({c: log for c, log in everything.items() if log.is_file()}, args.top)
    failed = [c for c, s in statuses.items() if s not in (0, 5)]
    suspect = sum(r["margin"] < SUSPECT and not r.get("worst_case") for r in rows)
    proven = sum(r["margin"] < SUSPECT and bool(r.get("worst_case")) for r in rows)
    print(
        f"\nfailed under: {', '.join(failed) or 'none'}; margins under {SUSPECT:g}x: {suspect} "
        f"(and {proven} worst-case bounds under {SUSPECT:g}x, which no machine crosses); logs in {folder}"
    )
    return 1 if failed or suspect else 0


if __name__ == "__main__":
    sys.exit(main())
