"""`attention-explorer serve --replicas N` on a free loopback port (tests and benchmarks): nginx's pid, each replica's
address and pid, and nginx's access log, read as the command prints and writes them. `python -m bench load
--replicas 2`: the same sessions through the proxy and against one process, on the same machine."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import harness

STARTED = re.compile(r"attention explorer at (\S+): nginx \(pid (\d+)\) in front of (.+)")
PIDS = re.compile(r"replica pids ([\d ]+); logs and nginx's configuration in (\S+)")
# deploy/nginx.conf.template's log_format
LINE = re.compile(r'(\S+) (\S+) (\d+) "([^"]*)" upstream="([^"]*)" agent="([^"]*)"')


class Front(str):
    """The proxy's URL; `.nginx` its pid, `.replicas` {address: pid} in start order, `.prefix` nginx's folder,
    `.pid` the first replica and `.pids` every replica (their CPU time is read from /proc)."""

    nginx: int
    replicas: dict[str, int]
    prefix: Path
    process: subprocess.Popen
    pid: int
    pids: list[int]


@dataclass(frozen=True)
class Request:
    """One line of nginx's access log."""

    start: float  # time.time() when nginx received it
    end: float
    status: int
    request: str
    upstreams: tuple[str, ...]  # each replica tried, in order: the last one answered
    agent: str

    @property
    def served_by(self) -> str:
        return self.upstreams[-1]


def access_log(front: Front) -> list[Request]:
    found = []
    for line in (front.prefix / "access.log").read_text().splitlines():
        end, took, status, request, upstreams, agent = LINE.fullmatch(line).groups()
        tried = tuple(u.strip() for u in upstreams.split(",") if u.strip() not in ("", "-"))
        found.append(Request(float(end) - float(took), float(end), int(status), request, tried, agent))
    return found


@contextlib.contextmanager
def proxy_server(replicas: int = 2, env: dict[str, str] | None = None, timeout: float = 600) -> Iterator[Front]:
    """Start `serve --replicas` on a free loopback port, wait until it says it serves, yield, and stop it (SIGTERM:
    nginx and every replica with it)."""
    port = harness.free_port()
    command = [sys.executable, "-m", "attention_explorer", "serve", "--replicas", str(replicas)]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a full pipe nobody reads stalls the command
        process = subprocess.Popen(command, cwd=harness.ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while True:
                log.seek(0)
                text = log.read().decode(errors="replace")
                started, pids = STARTED.search(text), PIDS.search(text)
                if started and pids:
                    break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"serve --replicas did not start: {text[-2000:]}")
                time.sleep(0.25)
            front = Front(started[1].replace("localhost", "127.0.0.1"))
            front.nginx = int(started[2])
            addresses = started[3].strip().split(", ")
            front.pids = [int(p) for p in pids[1].split()]
            front.replicas = dict(zip(addresses, front.pids, strict=True))
            front.prefix = Path(pids[2])
            front.process = process
            front.pid = front.pids[0]
            yield front
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def compare(replicas: int, sessions: int, seconds: float, model: str) -> dict:
    """The same sessions typing for the same time against one process, then through nginx to `replicas` processes:
    p50/p95 from Enter to drawn, each side's errors and mismatches."""
    from bench import load

    rows = {}
    for name, n in (("one process", 0), (f"nginx + {replicas} replicas", replicas)):
        summary = load.run(sessions, seconds, None, costs=False, model=model, replicas=n).summary()
        print(f"{name}: {summary}", file=sys.stderr, flush=True)
        rows[name] = {k: summary[k] for k in ("sessions", "sentences", "errors", "mismatches", "p50_s", "p95_s")}
        rows[name]["max_s"] = summary["max_s"]
        rows[name]["open_p50_s"] = summary["open_p50_s"]
        rows[name]["typing_server_cpu_s"] = summary["typing_server_cpu_s"]
    return rows


def table(rows: dict) -> str:
    keys = list(next(iter(rows.values())))
    head = f"{'':>22}" + "".join(f"{k:>22}" for k in rows)
    return "\n".join([head, *(f"{k:>22}" + "".join(f"{str(r[k]):>22}" for r in rows.values()) for k in keys)])
