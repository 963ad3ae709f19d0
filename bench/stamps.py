"""When each one-shot job was committed and when the check started on it (`recheck bench`'s jobs
modes, bench/jobs.py), measured directly on this host's clock rather than inferred.

- The producers (bench/producer.py) write `commits-N.txt`: one line `id unix_time` per job, the
  time taken right after their autocommit INSERT returned, i.e. after its commit.
- The check every strategy runs in the jobs modes, `bench.stamps:stamp` (a batch check that does
  nothing, as `recheck.workers.demo:noop`), appends one line `unix_time id id ...` per call to
  `check-PID.txt` in $BENCH_STAMPS: the time it was called, before it does anything.

commit -> check start is what the issue's latency target names. It can come out slightly
negative: the server commits before the producer's client sees the reply, and a worker can start
the job in between. The workers' own lateness (due time -> written back, on the database clock)
stays the other figure: an upper bound of this one. The stamps also count how many times the
check was called for each job: a job handled twice, whatever the table says.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

ENV = "BENCH_STAMPS"  # the folder the check writes its stamps into (unset: it writes none)
COMMITS = "commits-*.txt"
CHECKS = "check-*.txt"

_files: dict[int, int] = {}  # pid -> descriptor of this process's stamps file


def stamp(ids: list) -> list[None]:
    """A batch check that does nothing but note the time it was called and for which ids: one
    O_APPEND write per call (atomic, unbuffered: nothing is lost when the worker stops)."""
    started = time.time()
    folder = os.environ.get(ENV)
    if folder:
        line = f"{started:.6f} {' '.join(map(str, ids))}\n"
        os.write(_descriptor(folder), line.encode())
    return [None] * len(ids)


def _descriptor(folder: str) -> int:
    pid = os.getpid()  # a forked child must not write into its parent's file
    if pid not in _files:
        path = os.path.join(folder, f"check-{pid}.txt")
        _files[pid] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    return _files[pid]


def write_commits(path: Path, ids: Iterable[int], times: Iterable[float]) -> None:
    """A producer's stamps, written once when it stops."""
    with open(path, "w") as file:
        file.writelines(f"{row_id} {at:.6f}\n" for row_id, at in zip(ids, times, strict=True))


def read_commits(folder: Path) -> dict[int, float]:
    """id -> when its INSERT had committed, over every producer's file."""
    commits = {}
    for path in sorted(folder.glob(COMMITS)):
        for line in path.read_text().splitlines():
            row_id, at = line.split()
            commits[int(row_id)] = float(at)
    return commits


def parse_checks(lines: Iterable[str]) -> tuple[dict[int, float], Counter]:
    """(id -> the first time the check started on it, id -> how many times it was called for it)
    from the check's stamp lines."""
    first: dict[int, float] = {}
    calls: Counter = Counter()
    for line in lines:
        at_text, *ids = line.split()
        at = float(at_text)
        for row_id in map(int, ids):
            calls[row_id] += 1
            if row_id not in first or at < first[row_id]:
                first[row_id] = at
    return first, calls


def read_checks(folder: Path) -> tuple[dict[int, float], Counter]:
    return parse_checks(
        line for path in sorted(folder.glob(CHECKS)) for line in path.read_text().splitlines()
    )


def start_delays(
    commits: dict[int, float], starts: dict[int, float], since: float, until: float
) -> tuple[list[float], int]:
    """Seconds from commit to the check's first start, sorted, for the jobs committed within
    [since, until], and how many of those the check never started."""
    delays, unseen = [], 0
    for row_id, committed in commits.items():
        if since <= committed <= until:
            started = starts.get(row_id)
            if started is None:
                unseen += 1
            else:
                delays.append(started - committed)
    delays.sort()
    return delays, unseen


def quantile(ordered: list[float], q: float, unseen: int = 0) -> float | None:
    """The q-quantile (nearest rank) of the sorted values and `unseen` more that are larger than
    any (jobs never started): None when the rank falls among those, or when there is nothing."""
    total = len(ordered) + unseen
    if not total:
        return None
    rank = max(1, -(-round(q * total * 1_000_000) // 1_000_000))  # ceil(q * total), without float noise
    return ordered[rank - 1] if rank <= len(ordered) else None
