"""The seed articles' MySQL queue-table strategies, run by `recheck bench` beside recheck.

Each strategy's worker claims due rows its own way straight from MySQL, runs the same check,
writes results back with the same fenced statement as recheck's workers and publishes the
same heartbeat facts (checks, duplicates, lateness), so the benchmark measures only the
difference in how rows are claimed:

- for_update:     SELECT ... FOR UPDATE in a transaction (workers queue on the same rows)
- skip_locked:    SELECT ... FOR UPDATE SKIP LOCKED
- update_limit:   UPDATE ... SET owner = CONNECTION_ID() ... LIMIT n, then SELECT them
- last_insert_id: UPDATE ... SET id = LAST_INSERT_ID(id) ... LIMIT 1, one row per claim

And the floor (`floor`), not a strategy but the yardstick: FLOOR_PROCESSES workers each write
their own slice of the ids (`python -m bench.strategies floor ROWS SLICE SLICES`) with one
primary-key UPDATE per FLOOR_BATCH ids, the least MySQL work any design must do per check, in
the same shape whatever the other strategies' workers and batch. Drain mode only.

`python -m bench.strategies NAME [CONSUMERS]` runs one such worker process with CONSUMERS
claiming threads (`recheck bench --consumers N`), each on a MySQL connection of its own and
holding what it claimed while the check runs, as the articles' consumers do. A per-row check is
called row after row within a claim. Crash recovery is out of scope: a claimed row of a killed
update_limit worker stays claimed, as in the articles without a reaper.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import sys
import threading

import pymysql

from recheck.commands.launch import launch
from recheck.shared.config import Workload
from recheck.shared.core.entries import Item, make_entry
from recheck.shared.core.records import WorkerBeat
from recheck.shared.mysql.db import RETRYABLE, Database
from recheck.shared.mysql.sql import Queries
from recheck.shared.process.loop import Service
from recheck.shared.process.metrics import RecentMax, worker_metrics
from recheck.shared.process.presence import Presence
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.workers.checks import Outcome, batch_outcomes, check_kind, load_check, outcome_of
from recheck.workers.writing.completer import Counters
from recheck.workers.writing.writeback import WriteBack

log = logging.getLogger(__name__)

STRATEGIES = ("for_update", "skip_locked", "update_limit", "last_insert_id")
FLOOR = "floor"
FLOOR_PROCESSES = 3  # the floor's shape is fixed, so that every run's ratios compare
FLOOR_BATCH = 2000


class StrategyWorker(Service):
    """One process of a strategy: `consumers` claimers, each a thread with a MySQL connection of
    its own (the articles' consumers), sharing one heartbeat."""

    role = "bench-worker"

    def heartbeat_keys(self) -> list[str]:
        return [self.presence.key]

    def __init__(self, settings: Workload, strategy: str, consumers: int = 1):
        if strategy not in (*STRATEGIES, FLOOR):
            raise ValueError(f"unknown strategy {strategy!r}; one of {', '.join(STRATEGIES)}")
        super().__init__([settings])
        self.settings = settings
        self.strategy = strategy
        self.queries = Queries(settings, "bench")
        self.check = load_check(settings.check)
        self.kind = check_kind(self.check, settings.check_kind)
        self.counters = Counters()
        self.metrics = worker_metrics()
        self.lateness_max = RecentMax()  # as recheck's workers publish it
        self.conflicts = 0  # deadlocks and lock wait timeouts, retried
        self.lock = threading.Lock()  # consumers share the counters and the histogram
        self.store, self.db, self.life = self.parts_for(settings)
        self.claimers = [Claimer(self, self.db)]
        self.claimers += [Claimer(self, Database(settings)) for _ in range(consumers - 1)]
        self.presence = Presence(self.store, "worker", self.id, settings.deployment.heartbeat_ttl)
        self._beating = threading.Event()

    def startup(self) -> None:
        for claimer in self.claimers:
            claimer.writeback.learn_table()
        self.beat()
        threading.Thread(target=self._heartbeat_loop, daemon=True).start()
        for claimer in self.claimers[1:]:
            threading.Thread(target=self._consume, args=(claimer,), daemon=True).start()

    def beat(self) -> None:
        c = self.counters
        buckets, _ = self.metrics.lateness.snapshot()
        self.presence.publish(
            WorkerBeat(
                **self.presence.identity(),  # type: ignore[arg-type]
                kind=self.strategy,
                checked=c.checked,
                failed=c.failed,
                stale=c.stale,
                rate=round(c.rate(), 1),
                lateness_buckets=buckets,
                lateness_max=round(self.lateness_max.value(), 4),
                conflicts=self.conflicts,
            )
        )

    def _heartbeat_loop(self) -> None:
        while not self._beating.wait(self.settings.deployment.heartbeat_interval):
            with contextlib.suppress(*REDIS_DOWN):
                self.beat()

    def _consume(self, claimer: Claimer) -> None:
        """A consumer thread besides the main loop's: claim, check, write, until the stop."""
        while not self.stopping:
            try:
                pause = claimer.poll()
            except Exception as error:  # a benchmark consumer: log, back off, go on
                log.warning("consumer: %s: %s", type(error).__name__, error)
                pause = 1.0
            if pause:
                self.wait(pause)

    def shutdown(self) -> None:
        self._beating.set()
        with contextlib.suppress(*REDIS_DOWN):
            self.presence.withdraw()

    def poll(self) -> float:
        return self.claimers[0].poll()

    def outcomes(self, ids: list) -> list[Outcome]:
        """The check's outcomes; a per-row check is called row after row, as one consumer would."""
        if self.kind != "row":
            return batch_outcomes(ids, self.check(list(ids)))
        if inspect.iscoroutinefunction(self.check):
            return [outcome_of(asyncio.run(self.check(i))) for i in ids]
        return [outcome_of(self.check(i)) for i in ids]

    def record(self, items: list[Item], written, now_ms: int) -> None:
        lateness = [(now_ms - item.due_ms) / 1000 for item in items]
        with self.lock:
            self.metrics.lateness.observe_many(lateness)
            self.lateness_max.observe(max(lateness))
            c = self.counters
            c.checked += written.succeeded
            c.failed += written.failed
            c.stale += written.stale  # claimed, but someone had written that due time: a duplicate


class Claimer:
    """One consumer: claims due rows its strategy's way on its own connection, checks, writes."""

    def __init__(self, worker: StrategyWorker, db: Database):
        self.worker = worker
        self.db = db
        self.strategy = worker.strategy
        self.queries = worker.queries
        self.settings = worker.settings
        self.writeback = WriteBack(worker.settings, db)

    def poll(self) -> float:
        try:
            return self.claim_and_write()
        except pymysql.err.OperationalError as error:
            if error.args and error.args[0] in RETRYABLE:  # deadlock or lock wait timeout: retry
                self.db.rollback()
                with self.worker.lock:
                    self.worker.conflicts += 1
                return 0.0
            raise

    def claim_and_write(self) -> float:
        conn = self.db.conn
        if self.strategy in ("for_update", "skip_locked"):
            # The claim's locks are held until COMMIT: the check and the write happen inside the
            # transaction, as in the articles (and the transaction stays open while checks run).
            claim = self.queries.bench_claim_for_update
            if self.strategy == "skip_locked":
                claim = self.queries.bench_claim_skip_locked
            conn.begin()
            try:
                items = self.items(self.db.query(claim, {"limit": self.settings.worker_batch}))
                if items:
                    self.write(items)
                conn.commit()
            except Exception:
                self.db.rollback()
                raise
        elif self.strategy == "update_limit":
            self.db.execute(self.queries.bench_claim_update_limit, {"limit": self.settings.worker_batch})
            items = self.items(self.db.query(self.queries.bench_claimed))
            if items:
                self.write(items)
                self.db.execute(self.queries.bench_release)
        else:  # last_insert_id: one row per claim
            claimed = self.db.execute(self.queries.bench_claim_last_insert_id)
            items = self.items(self.db.query(self.queries.bench_last_claimed)) if claimed else []
            if items:
                self.write(items)
                self.db.execute(self.queries.bench_release)
        return 0.0 if items else self.settings.deployment.poll_interval

    def items(self, rows) -> list[Item]:
        return [Item(make_entry(row_id, due_ms), row_id, due_ms) for row_id, due_ms in rows]

    def write(self, items: list[Item]) -> None:
        outcomes = self.worker.outcomes([item.id for item in items])
        written = self.writeback.write(items, outcomes)
        self.worker.record(items, written, self.writeback.db_now_ms())


class FloorWorker(StrategyWorker):
    """Writes ids first..last (its slice of a freshly seeded drain table) in batches, blind."""

    def __init__(self, settings: Workload, first: int, last: int):
        super().__init__(settings, FLOOR)
        self.next_id, self.last = first, last
        self.interval_us = round(settings.interval * 1_000_000)

    def poll(self) -> float:
        if self.next_id > self.last:
            return self.settings.deployment.poll_interval  # its slice is done: idle like a drained strategy
        upto = min(self.next_id + FLOOR_BATCH - 1, self.last)
        ids = list(range(self.next_id, upto + 1))
        self.db.execute(self.queries.bench_floor_write, {"interval_us": self.interval_us, "ids": ids})
        self.next_id = upto + 1
        self.counters.checked += len(ids)
        return 0.0


def floor_slice(rows: int, index: int, slices: int) -> tuple[int, int]:
    """Ids of slice `index` of `slices` over ids 1..rows: contiguous, as even as can be."""
    return rows * index // slices + 1, rows * (index + 1) // slices


USAGE = f"usage: python -m bench.strategies {{{','.join(STRATEGIES)}}} [CONSUMERS] | floor ROWS SLICE SLICES"


def main(argv: list[str]) -> int:
    if argv[:1] == [FLOOR] and len(argv) == 4 and all(a.isdigit() for a in argv[1:]):
        rows, index, slices = (int(a) for a in argv[1:])
        if index < slices:
            first, last = floor_slice(rows, index, slices)
            return launch("bench-floor", lambda env: serve(FloorWorker(env.default_workload(), first, last)))
    if len(argv) in (1, 2) and argv[0] in STRATEGIES and (argv[1:] or ["1"])[0].isdigit():
        strategy, consumers = argv[0], max(int((argv[1:] or ["1"])[0]), 1)
        return launch(
            f"bench-{strategy}",
            lambda env: serve(StrategyWorker(env.default_workload(), strategy, consumers)),
        )
    print(USAGE, file=sys.stderr)
    return 2


def serve(worker: StrategyWorker) -> int:
    worker.install_signal_handlers()
    worker.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
