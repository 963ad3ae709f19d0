"""The peers' periodic job, one run of it: `python -m bench.peers.enqueue STRATEGY WORKERS BATCH`.

It waits until WORKERS workers are listening, says "ready" on stdout, waits for "go" on stdin
(the bench takes its first sample in between), then reads the due ids by primary-key keyset,
BATCH at a time, and enqueues each page as it comes (one task per page, or per id for the
per-row peers). Its report goes to stdout as one JSON line: when the read started (the
database clock, as checked_at reads it), the seconds spent reading and enqueueing, the ids and
tasks. Then it idles until stopped, so that its CPU time stays readable to the bench.
"""

from __future__ import annotations

import json
import sys
import time

from bench.peers import CELERY_PEERS, PEERS, QUEUE, per_row
from recheck.commands.launch import launch
from recheck.shared.config import Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.sql import Queries

READY_TIMEOUT = 120.0


class Broker:
    """Enqueue one batch or one row, and count the workers listening."""

    def __init__(self, strategy: str, redis_url: str):
        self.per_row = per_row(strategy)
        if strategy in CELERY_PEERS:
            from bench.peers import celery_app

            self.app = celery_app.app
            task = celery_app.check_row if self.per_row else celery_app.check_batch
            self.send = task.delay
            self.listening = lambda: len(self.app.control.ping(timeout=0.5))
        else:
            import redis
            from rq import Queue, Worker

            from bench.peers import work

            connection = redis.Redis.from_url(redis_url)
            queue = Queue(QUEUE, connection=connection)
            function = work.check_row if self.per_row else work.check_batch
            self.send = lambda arg: queue.enqueue(function, arg, result_ttl=0)  # no result kept
            self.listening = lambda: Worker.count(connection=connection, queue=queue)

    def wait_for(self, workers: int) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while (listening := self.listening()) < workers:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {listening} of {workers} workers listening after {READY_TIMEOUT:g} s")
            time.sleep(0.2)

    def enqueue(self, ids: list[int]) -> int:
        """Tasks sent for these ids."""
        if not self.per_row:
            self.send(ids)
            return 1
        for row_id in ids:
            self.send(row_id)
        return len(ids)


def run_job(workload: Workload, broker: Broker, batch: int) -> dict:
    db = Database(workload)
    queries = Queries(workload, "bench")
    started = float(db.scalar(queries.bench_peer_clock))
    read = enqueue = 0.0
    after, ids_seen, tasks = 0, 0, 0
    while True:
        began = time.perf_counter()
        ids = [row[0] for row in db.query(queries.bench_peer_read_due, {"after": after, "limit": batch})]
        read += time.perf_counter() - began
        if not ids:
            break
        began = time.perf_counter()
        tasks += broker.enqueue(ids)
        enqueue += time.perf_counter() - began
        after, ids_seen = ids[-1], ids_seen + len(ids)
    db.close()
    return {"read_started": started, "read_seconds": round(read, 3), "enqueue_seconds": round(enqueue, 3),
            "ids": ids_seen, "tasks": tasks}  # fmt: skip


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in PEERS or not all(a.isdigit() and int(a) > 0 for a in argv[1:]):
        print(f"usage: python -m bench.peers.enqueue {{{','.join(PEERS)}}} WORKERS BATCH", file=sys.stderr)
        return 2
    strategy, workers, batch = argv[0], int(argv[1]), int(argv[2])

    def body(settings) -> int:
        workload = settings.default_workload()
        broker = Broker(strategy, settings.redis_url)
        broker.wait_for(workers)
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            return 1  # the bench went away before the start
        print(json.dumps(run_job(workload, broker, batch)), flush=True)
        sys.stdin.read()  # until the bench closes it (or stops this process)
        return 0

    return launch(f"bench-enqueue-{strategy}", body)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
