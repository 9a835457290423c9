"""CPU time and resident memory of processes, read from /proc (Linux): what the server itself spends, apart from
the browsers that drive it."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": the command may hold spaces


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far (its own threads; not its children)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15 of proc(5)


def _status_mb(pid: int, name: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1]) / 1024  # in kB
    return 0.0


def rss_mb(pid: int) -> float:
    return _status_mb(pid, "VmRSS")


def peak_rss_mb(pid: int) -> float:
    """The most resident memory the process has held at any moment of its life (VmHWM, the high-water mark)."""
    return _status_mb(pid, "VmHWM")


def alive(pid: int) -> bool:
    """Whether the process is still running: there, and neither a zombie nor dead."""
    try:
        return _stat(pid)[0] not in ("Z", "X")
    except OSError:
        return False


def machine_cpu_seconds() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot, every core added up (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields) - idle) / TICK, idle / TICK


def descendants(pid: int) -> list[int]:
    """Every process started by `pid`, its children's children too (/proc/<pid>/stat's parent ids)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(_stat(int(entry.name))[1])  # ppid: field 4 of proc(5)
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found
