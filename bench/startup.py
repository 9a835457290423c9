"""A model's load time in a new process (imports included), its load again once the process holds it (a dict, as the
app's shelf), and the process's resident memory with it loaded and one 128-token run made:
`python -m bench startup --model smollm2`."""

from __future__ import annotations

import json
import subprocess
import sys

from bench import folders

# run in a fresh interpreter: what a new server process pays, imports and all
CHILD = """
import json, resource, sys, time
start = time.perf_counter()
from attention_explorer.models import registry
loaded = registry.load(sys.argv[1])
first = time.perf_counter() - start
cache = {}
def cached(key):
    if key not in cache:
        cache[key] = registry.load(key)
    return cache[key]
cached(sys.argv[1])
again = time.perf_counter()
cached(sys.argv[1])
warm = time.perf_counter() - again
import gc, os
from attention_explorer.explorer.run import trace
from bench.inputs import text_of
trace.run(loaded, text_of(loaded, 128), 128)  # one sentence of 128 tokens through every page's run
gc.collect()
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
with open("/proc/self/statm") as f:
    rss_mb = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
print(json.dumps({"model": sys.argv[1], "new_process_s": round(first, 2), "warm_s": round(warm, 6),
                  "rss_mb": round(rss_mb), "peak_rss_mb": round(peak_mb)}))
"""


def run(model: str = "smollm2") -> dict:
    """Load `model` in a new Python process and report its times and memory."""
    folders.use([model])  # folder:gpt2-small: built if need be; the variable travels to the new process
    out = subprocess.run([sys.executable, "-c", CHILD, model], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(summary: dict) -> str:
    return (
        f"{summary['model']}: new process {summary['new_process_s']:.2f} s (imports included), again when held "
        f"{summary['warm_s'] * 1000:.3f} ms, resident memory {summary['rss_mb']} MB after a 128-token run (peak "
        f"{summary['peak_rss_mb']} MB while loading)"
    )
