"""A producer of one-shot jobs for `recheck bench --mode jobs-steady | jobs-saturated`.

`python -m bench.producer RATE STAMPS_FILE`: single-row INSERTs into the jobs table, each its own
autocommit (durable) transaction, exactly as an application enqueues a job: `INSERT INTO
bench_jobs () VALUES ()`, the due column defaulting to now (bench_produce). RATE inserts per
second (0: as fast as it can) until SIGTERM or SIGINT; then it writes when each job's INSERT had
returned (bench/stamps.py) and prints one JSON line: jobs inserted, errors, seconds, and how far
behind its schedule it fell at most.

Several processes, not threads: one Python process cannot send 2,000 durable transactions a
second on this 2-core machine, and the GIL would make threads measure Python. A paced producer
keeps a fixed schedule (the k-th insert at start + k / RATE, the first at a random phase so that
producers do not insert in step); when it falls behind it inserts without pausing until it has
caught up, so a stall shows as a burst of late jobs, never as fewer jobs (an open-loop load).
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import sys
import time
from array import array
from pathlib import Path

import pymysql

from bench.stamps import write_commits
from recheck.commands.launch import launch
from recheck.shared.config import Workload
from recheck.shared.mysql.db import Database, DatabaseDown
from recheck.shared.mysql.sql import Queries

RECONNECT_PAUSE = 0.1  # seconds after a failed INSERT (the connection is opened again)

_stopping = False


def _stop(_signum, _frame) -> None:
    global _stopping
    _stopping = True


def produce(workload: Workload, rate: float, stamps: Path) -> int:
    sql = Queries(workload, "bench").bench_produce
    db = Database(workload)
    ids, times = array("q"), array("d")
    errors, behind_max = 0, 0.0
    period = 1.0 / rate if rate > 0 else 0.0
    cursor = db.conn.cursor()
    began = time.time()
    next_at = time.monotonic() + random.random() * period
    while not _stopping:
        if period:
            wait = next_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            else:
                behind_max = max(behind_max, -wait)
            next_at += period
        try:
            cursor.execute(sql)
        except (pymysql.err.MySQLError, DatabaseDown):
            errors += 1
            db.close()
            time.sleep(RECONNECT_PAUSE)
            with contextlib.suppress(pymysql.err.MySQLError, DatabaseDown):
                cursor = db.conn.cursor()
            continue
        times.append(time.time())
        ids.append(cursor.lastrowid)
    seconds = time.time() - began
    db.close()
    write_commits(stamps, ids, times)
    report = {"inserted": len(ids), "errors": errors, "seconds": round(seconds, 3),
              "behind_max_s": round(behind_max, 3)}  # fmt: skip
    print(json.dumps(report), flush=True)
    return 0


USAGE = "usage: python -m bench.producer RATE STAMPS_FILE  (RATE inserts/s, 0: as fast as it can)"


def main(argv: list[str]) -> int:
    try:
        rate, stamps = float(argv[0]), Path(argv[1])
    except (IndexError, ValueError):
        print(USAGE, file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return launch("bench-producer", lambda settings: produce(settings.default_workload(), rate, stamps))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
