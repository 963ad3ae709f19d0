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
