"""`python -m bench forward [--json]`: benchmarks, never run as tests."""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    commands = parser.add_subparsers(dest="command", required=True)
    forward = commands.add_parser("forward", help="from-scratch forward with capture vs transformers eager")
    forward.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    forward.add_argument("--repeats", type=int, default=25)
    forward.add_argument("--lengths", type=int, nargs="+", default=None, help="token counts (default 16 128 512)")
    args = parser.parse_args(argv)

    if args.command == "forward":
        from bench import forward as bench_forward

        rows = bench_forward.run(tuple(args.lengths or bench_forward.LENGTHS), repeats=args.repeats)
        print(json.dumps(rows) if args.json else bench_forward.table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
