"""`serve --replicas N`'s parts without a browser: the nginx configuration it writes (checked by nginx itself), each
replica's share of the memory budget, and the one-line refusals (no replicas, a port in use, no nginx) that leave
nothing running. The replicas behind a real nginx with real browsers: tests/e2e/test_replicas.py."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys

import pytest
import torch

from attention_explorer import cli, replicas
from bench import harness

UPSTREAMS = ["127.0.0.1:8701", "10.0.0.6:8501", "[::1]:8502"]


def nginx_or_skip() -> str:
    try:
        return replicas.find_nginx()
    except replicas.ReplicaError:
        pytest.skip("nginx is not installed (make test installs it when run as root)")


def test_the_configuration_pins_each_replica_and_nginx_accepts_it(tmp_path):
    text = replicas.config(UPSTREAMS, ["127.0.0.1:8600"], tmp_path)
    assert "@@" not in text and "ip_hash;" not in text  # a room behind one address is not one visitor
    for i, address in enumerate(UPSTREAMS):
        assert f'"{address}" ae_{i};' in text  # the cookie naming a replica leads to its own upstream
        pinned = text.split(f"upstream ae_{i} {{", 1)[1].split("}", 1)[0].split(";")
        assert pinned[0].split() == ["server", address, "max_fails=1", "fail_timeout=5s"]  # itself first...
        backups = sorted(line.split()[1] for line in pinned if "backup" in line)
        assert backups == sorted(u for u in UPSTREAMS if u != address)  # ...the others only when it is down
    any_servers = text.split("upstream ae_any {", 1)[1].split("}", 1)[0]
    assert [line.split()[1] for line in any_servers.strip().splitlines()] == UPSTREAMS
    assert "proxy_set_header Upgrade $http_upgrade;" in text and "proxy_read_timeout 1d;" in text
    assert f"pid {tmp_path}/nginx.pid;" in text and f"proxy_temp_path {tmp_path}/temp/proxy;" in text

    nginx = nginx_or_skip()
    for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp_path / "temp" / name).mkdir(parents=True)
    (tmp_path / "nginx.conf").write_text(text)
    checked = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
    assert "syntax is ok" in checked.stderr


def test_each_replica_gets_its_share_of_the_budget_and_one_cookie_secret(monkeypatch):
    seen = {}

    def fake_serve(host, port, command, envs, upstreams=()):
        seen.update(host=host, port=port, envs=envs, command=command(9999))
        return 0

    monkeypatch.setattr(replicas, "serve", fake_serve)
    monkeypatch.delenv("STREAMLIT_SERVER_COOKIE_SECRET", raising=False)
    assert cli.serve(["--replicas", "3", "--port", "8600", "--memory-budget", "9GB"]) == 0
    assert [env["EXPLORER_MEMORY_BUDGET"] for env in seen["envs"]] == ["3000000000"] * 3
    secrets = {env["STREAMLIT_SERVER_COOKIE_SECRET"] for env in seen["envs"]}
    assert len(secrets) == 1 and len(secrets.pop()) == 64
    assert seen["command"][-4:] == ["--server.address", "127.0.0.1", "--server.port", "9999"]  # loopback only
    assert (seen["host"], seen["port"]) == ("localhost", 8600)


@pytest.mark.parametrize("argv", [["--replicas", "0"], ["--replicas", "-2"]])
def test_no_replicas_is_one_line_and_exit_2(capsys, monkeypatch, argv):
    monkeypatch.setattr(subprocess, "Popen", None)  # nothing may start
    assert cli.serve([*argv, "--port", "8600"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--replicas" in err and "1 or more" in err


def test_without_nginx_it_says_how_to_install_it(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(replicas, "DEBIAN_NGINX", str(tmp_path / "nginx"))
    monkeypatch.setattr(subprocess, "Popen", None)
    assert cli.serve(["--replicas", "2", "--port", "8600"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "apt-get install nginx" in err


def test_a_port_in_use_is_one_line_exit_2_and_nothing_left_running(capsys, monkeypatch):
    nginx_or_skip()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with monkeypatch.context() as m:
            m.setattr(subprocess, "Popen", None)  # checked before any process starts
            assert cli.serve(["--replicas", "2", "--host", "127.0.0.1", "--port", str(port)]) == 2
    assert capsys.readouterr().err.strip() == f"error: port {port} on 127.0.0.1 is in use: give another with --port"

    with socket.socket() as taken:  # the console command's own exit
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "attention_explorer", "serve", "--replicas", "2", "--host", "127.0.0.1"]
            + ["--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=harness.ROOT,
        )
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: port {port} on 127.0.0.1 is in use: give another with --port"
    assert done.stdout == ""  # it said nothing of starting


GB = 10**9


@pytest.mark.parametrize(
    ("flags", "share"),
    [
        ([], 18 * GB),  # 90% of the 60 GB free at start, once, split three ways
        (["--gpu-memory-budget", "30GB"], 10 * GB),
        (["--gpu-memory-budget", "75%"], 20 * GB),  # a share of the GPU's 80 GB
    ],
)
def test_each_replica_gets_its_share_of_the_gpu_budget(monkeypatch, flags, share):
    """On a GPU (a fake one: torch.cuda.mem_get_info says 60 GB of 80 GB are free, as tests/explorer/
    test_device_books.py's), each replica's books get an even share of the GPU budget, as of --memory-budget."""
    from attention_explorer.explorer.run import device_books

    seen = {}

    def fake_serve(host, port, command, envs, upstreams=()):
        seen.update(envs=envs)
        return 0

    monkeypatch.setattr(replicas, "serve", fake_serve)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda where=None: (60 * GB, 80 * GB))
    monkeypatch.delenv(device_books.GPU_BUDGET_ENV, raising=False)
    assert replicas.GPU_BUDGET_ENV == device_books.GPU_BUDGET_ENV
    argv = ["--replicas", "3", "--port", "8600", "--memory-budget", "9GB", "--device", "cuda", *flags]
    assert cli.serve(argv) == 0
    assert [env[device_books.GPU_BUDGET_ENV] for env in seen["envs"]] == [str(share)] * 3
    assert [env["EXPLORER_MEMORY_BUDGET"] for env in seen["envs"]] == ["3000000000"] * 3
    # what each replica's app reads: its share, in bytes
    assert device_books.budget_from(seen["envs"][0][device_books.GPU_BUDGET_ENV], torch.device("cuda")) == share


def test_on_the_cpu_no_replica_gets_a_gpu_budget(monkeypatch):
    seen = {}
    monkeypatch.setattr(replicas, "serve", lambda host, port, command, envs, upstreams=(): seen.update(envs=envs))
    monkeypatch.delenv("EXPLORER_GPU_MEMORY_BUDGET", raising=False)
    monkeypatch.delenv("EXPLORER_DEVICE", raising=False)
    cli.serve(["--replicas", "2", "--port", "8600", "--memory-budget", "9GB", "--device", "cpu"])
    assert all("EXPLORER_GPU_MEMORY_BUDGET" not in env for env in seen["envs"])
