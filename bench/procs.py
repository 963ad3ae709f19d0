"""CPU time and memory of processes, through psutil (the benchmark and soak tools only)."""

from __future__ import annotations

import os

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


def wakeups(pid: int) -> int | None:
    """Times the process's threads have slept and been woken so far (their voluntary context
    switches, from /proc: Linux only); None if it is gone. Each wake-up costs a VM far more than
    the work it wakes for, and unlike CPU time the count hardly moves with the machine's speed."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    return sum(voluntary_switches(f"/proc/{pid}/task/{tid}/status") for tid in threads)


def thread_cpu_seconds(pid: int) -> float | None:
    """CPU seconds the process's live threads have run so far, to the nanosecond (their
    schedstat: Linux only); None if it is gone. cpu_seconds comes in clock ticks (10 ms): over
    30 s of an idle worker's 0.4 % of a core, a tick either way is 8 %. A thread that has ended
    takes its time with it: for processes whose threads live as long as they do."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as file:
                total += int(file.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def voluntary_switches(status: str) -> int:
    """A thread's voluntary context switches (0 if it has just ended)."""
    try:
        with open(status) as file:
            for line in file:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_mb(pid: int) -> float | None:
    """Resident memory in MB; None if the process is gone."""
    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return None
