"""CPU time and memory of processes, through psutil (the benchmark and soak tools only)."""

from __future__ import annotations

import psutil


def pids_named(name: str) -> list[int]:
    """Every running process whose name is `name` (e.g. mariadbd, redis-server)."""
    found = []
    for process in psutil.process_iter(["name"]):
        if process.info["name"] == name:
            found.append(process.pid)
    return found


def pid_from_file(path: str | None) -> int | None:
    """The running process a server's pid file names, if this machine has it."""
    try:
        with open(path or "") as file:
            pid = int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if psutil.pid_exists(pid) else None


def server_pids(name: str, pid: int | None) -> list[int]:
    """The one server process a benchmark talks to (`pid`, as the server itself reported it, if it
    runs on this machine); else, as a fallback, every process of that name."""
    if pid is not None and psutil.pid_exists(pid):
        try:
            if psutil.Process(pid).name() == name:
                return [pid]
        except psutil.Error:
            pass
    return pids_named(name)


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds the process has used so far; None if it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def rss_mb(pid: int) -> float | None:
    """Resident memory in MB; None if the process is gone."""
    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return None
