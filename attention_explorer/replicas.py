"""A class across replicas: `attention-explorer serve --replicas N` starts N app processes on free loopback ports and
Debian's nginx in front of them on --port, each browser kept on one replica by a cookie nginx sets
(deploy/nginx.conf.template says how). nginx runs from a temporary prefix folder of its own (its configuration, pid,
logs and temporary files; no system configuration is read or touched) and everything stops together.

`--upstream HOST:PORT ...` runs the same nginx in front of replicas started on other machines (deploy/README.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import grp
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

NGINX_INSTALL = "apt-get install nginx"
DEBIAN_NGINX = "/usr/sbin/nginx"  # where Debian puts it: on root's PATH, not always on a user's
TEMPLATE = "deploy/nginx.conf.template"
COOKIE = "ae_replica"  # the cookie nginx sets: the address of the replica that served the browser
SERVED_HEADER = "X-Replica"  # nginx's response header naming that replica
START_TIMEOUT = 600.0  # a replica's first page needs torch and the app imported: minutes on a busy machine
GPU_BUDGET_ENV = (
    "EXPLORER_GPU_MEMORY_BUDGET"  # explorer.run.device_books's (that module imports torch; this one does not)
)
UPLOAD_MB = 200  # Streamlit's server.maxUploadSize default


class ReplicaError(Exception):
    """A reason `serve --replicas` cannot start, in one line (exit 2)."""


def find_nginx() -> str:
    """nginx's path: on PATH, or Debian's /usr/sbin/nginx (not on a user's PATH); ReplicaError when missing."""
    found = shutil.which("nginx") or (DEBIAN_NGINX if os.access(DEBIAN_NGINX, os.X_OK) else None)
    if found is None:
        raise ReplicaError(
            f"--replicas needs nginx in front of the app and none was found: install it with `{NGINX_INSTALL}` "
            "(Debian, Ubuntu; `brew install nginx` on macOS)"
        )
    return found


def listen_addresses(host: str, port: int) -> list[tuple[int, str]]:
    """(family, address) that `host` names and this machine can bind; ReplicaError when the port is taken."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ReplicaError(f"--host {host!r}: {e.strerror}") from None
    found = []
    for family, _, _, _, address in dict.fromkeys(infos):
        if family not in (socket.AF_INET, socket.AF_INET6) or (family, address[0]) in found:
            continue
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(
                socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
            )  # as nginx binds: a closed port in TIME_WAIT is free
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind(address[:2])
            except OSError as e:
                if e.errno == errno.EADDRNOTAVAIL:
                    continue  # ::1 named by localhost on a machine without IPv6
                if e.errno == errno.EADDRINUSE:
                    raise ReplicaError(f"port {port} on {host} is in use: give another with --port") from None
                raise ReplicaError(f"cannot listen on {host}:{port}: {e.strerror}") from None
        found.append((family, address[0]))
    if not found:
        raise ReplicaError(f"--host {host!r} names no address this machine can listen on")
    return found


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (held together while chosen, so none repeats)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def template_text() -> str:
    """deploy/nginx.conf.template: inside the package in a wheel, at the repository's top level in a clone."""
    here = Path(__file__).resolve().parent
    for where in (here / TEMPLATE, here.parent / TEMPLATE):
        if where.is_file():
            return where.read_text()
    raise FileNotFoundError(TEMPLATE)


def config(upstreams: list[str], listen: list[str], prefix: Path, upload_mb: int = UPLOAD_MB) -> str:
    """The nginx configuration: the template with the replicas' addresses (HOST:PORT), nginx's `listen` arguments and
    its prefix folder filled in."""
    pad = " " * 8
    pinned = []
    for i, own in enumerate(upstreams):
        servers = [f"server {own} max_fails=1 fail_timeout=5s;"]
        servers += [f"server {other} backup;" for other in upstreams if other != own]
        pinned.append(f"    upstream ae_{i} {{\n" + "".join(f"{pad}{s}\n" for s in servers) + "    }")
    fills = {
        "@@ANY@@": "\n".join(f"{pad}server {u} max_fails=1 fail_timeout=5s;" for u in upstreams),
        "@@PINNED@@": "\n".join(pinned),
        "@@COOKIES@@": "\n".join(f'{pad}"{u}" ae_{i};' for i, u in enumerate(upstreams)),
        "@@LISTEN@@": "\n".join(f"{pad}listen {address};" for address in listen),
        "@@UPLOAD_MB@@": str(upload_mb),
        "@@PREFIX@@": str(prefix),
        "@@USER@@": _worker_user(),
    }
    text = template_text()
    for key, value in fills.items():
        text = text.replace(key, value)
    return text


def _worker_user() -> str:
    """The `user` line: as root, nginx's workers run as `nobody` (the prefix's temporary folders are theirs)."""
    if os.geteuid() != 0:
        return "# not root: the workers run as this user"
    nobody = pwd.getpwnam("nobody")
    return f"user nobody {grp.getgrgid(nobody.pw_gid).gr_name};"


def budget_shares(budget: int, n: int) -> list[int]:
    """Each of n replicas' memory budget in bytes: an even share of the whole."""
    return [budget // n] * n


def _die_with_parent() -> None:
    """In a child before it runs: Linux sends it SIGTERM when this process dies, even by SIGKILL (nothing left)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Replica:
    """One app process: its address, its process and its log file."""

    address: str
    process: subprocess.Popen
    log: Path


@dataclass
class Front:
    """nginx and the replicas behind it, as started."""

    url: str
    prefix: Path
    nginx: subprocess.Popen
    replicas: list[Replica]


def _listen_arg(family: int, address: str, port: int) -> str:
    return f"[{address}]:{port}" if family == socket.AF_INET6 else f"{address}:{port}"


def _nginx_writable(prefix: Path) -> None:
    """As root nginx's workers run as `nobody`: they must reach the prefix and write its temporary files."""
    for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / "temp" / name).mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return
    prefix.chmod(0o711)
    nobody = pwd.getpwnam("nobody")
    for folder in [prefix / "temp", *(prefix / "temp").iterdir()]:
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)


def _stop(process: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_healthy(url: str, process: subprocess.Popen, log: Path, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if process.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            raise ReplicaError(f"{url} stopped at start (exit {process.returncode}): {' '.join(tail)[:300]}")
        if time.monotonic() > deadline:
            raise ReplicaError(f"{url} did not answer within {START_TIMEOUT:.0f} s")
        time.sleep(0.25)


def _nginx_error(prefix: Path) -> str:
    errors = (prefix / "error.log").read_text(errors="replace").strip().splitlines() if prefix.exists() else []
    return errors[-1].split("] ", 1)[-1] if errors else "no message"


@contextlib.contextmanager
def started(
    host: str,
    port: int,
    command: Callable[[int], list[str]] | None,
    envs: list[dict[str, str]],
    upstreams: list[str] = (),
) -> Iterator[Front]:
    """nginx on host:port in front of len(envs) replicas on free loopback ports, each started by `command(port)`
    with its own environment (or, with `upstreams`, in front of those addresses alone); everything stopped and the
    prefix folder removed on leaving. ReplicaError, one line, when something cannot start (nothing left running)."""
    nginx = find_nginx()
    listen = listen_addresses(host, port)
    prefix = Path(tempfile.mkdtemp(prefix="attention-explorer-replicas-"))
    replicas: list[Replica] = []
    proxy = None
    try:
        ports = free_ports(len(envs))
        addresses = list(upstreams) or [f"127.0.0.1:{p}" for p in ports]
        for p, env in zip(ports, envs, strict=True):
            log = prefix / f"replica-{p}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    command(p), env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
                )
            replicas.append(Replica(f"127.0.0.1:{p}", process, log))
        _nginx_writable(prefix)
        conf = prefix / "nginx.conf"
        conf.write_text(config(addresses, [_listen_arg(f, a, port) for f, a in listen], prefix))
        with (prefix / "nginx.out").open("wb") as out:
            proxy = subprocess.Popen(
                [nginx, "-p", str(prefix), "-c", str(conf), "-g", "daemon off;"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        family, address = listen[0]
        connect = "127.0.0.1" if address == "0.0.0.0" else "::1" if address == "::" else address
        deadline = time.monotonic() + 30
        while True:  # nginx is listening, or says why it is not
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                if s.connect_ex((connect, port)) == 0:
                    break
            if proxy.poll() is not None or time.monotonic() > deadline:
                raise ReplicaError(f"nginx did not start: {_nginx_error(prefix)}")
            time.sleep(0.1)
        deadline = time.monotonic() + START_TIMEOUT
        for replica in replicas:
            _wait_healthy(f"http://{replica.address}", replica.process, replica.log, deadline)
        shown = "localhost" if host in ("", "0.0.0.0", "::") else host
        yield Front(f"http://{shown}:{port}", prefix, proxy, replicas)
    finally:
        if proxy is not None:
            _stop(proxy, signal.SIGQUIT)  # nginx's graceful stop: requests under way finish
        for replica in replicas:
            _stop(replica.process)
        shutil.rmtree(prefix, ignore_errors=True)


def replica_environments(
    env: dict[str, str], n: int, budget: int, gpu_budget: int | None = None
) -> list[dict[str, str]]:
    """Each replica's environment: its share of the memory budget and, on a GPU, of the GPU's memory budget (each
    replica's books see only its own process's allocations), and one cookie secret for all (a signed cookie from one
    replica is read by the one a visitor fails over to)."""
    secret = env.get("STREAMLIT_SERVER_COOKIE_SECRET") or secrets.token_hex(32)
    gpu = [{}] * n if gpu_budget is None else [{GPU_BUDGET_ENV: str(s)} for s in budget_shares(gpu_budget, n)]
    return [
        {**env, "EXPLORER_MEMORY_BUDGET": str(share), "STREAMLIT_SERVER_COOKIE_SECRET": secret, **on_gpu}
        for share, on_gpu in zip(budget_shares(budget, n), gpu, strict=True)
    ]


class _Stopped(Exception):
    pass


def _raise_stopped(signum, frame):
    raise _Stopped


def serve(
    host: str,
    port: int,
    command: Callable[[int], list[str]],
    envs: list[dict[str, str]],
    upstreams: list[str] = (),
) -> int:
    """Run nginx and the replicas until Ctrl+C or SIGTERM (exit 0), or until nginx stops (exit 1); a replica that
    stops is said once, and its visitors go to the others. Exit 2, one line, when it cannot start."""
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        with started(host, port, command, envs, upstreams) as front:
            behind = ", ".join(r.address for r in front.replicas) or ", ".join(upstreams)
            pids = " ".join(str(r.process.pid) for r in front.replicas)
            print(f"attention explorer at {front.url}: nginx (pid {front.nginx.pid}) in front of {behind}", flush=True)
            if pids:
                print(f"replica pids {pids}; logs and nginx's configuration in {front.prefix}", flush=True)
            said = set()
            while front.nginx.poll() is None:
                for replica in front.replicas:
                    if replica.process.poll() is not None and replica.address not in said:
                        said.add(replica.address)
                        print(
                            f"replica {replica.address} (pid {replica.process.pid}) stopped with exit code "
                            f"{replica.process.returncode}: its visitors go to the others",
                            file=sys.stderr,
                            flush=True,
                        )
                time.sleep(0.5)
            print(f"nginx stopped: {_nginx_error(front.prefix)}", file=sys.stderr)
            return 1
    except ReplicaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (_Stopped, KeyboardInterrupt):
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
