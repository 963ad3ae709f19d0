"""`recheck bench --mode poll`: what one dispatcher poll costs as the table grows.

The table is seeded to each size in turn (rows added on top of the previous size), every row
overdue with due times spread over an hour, then a fresh dispatcher runs a fixed number of
polls through the real code path (keyset page from MySQL, dedup push into Redis). Per poll:
wall time, the dispatcher's own CPU, mariadbd's and redis-server's CPU (psutil), and the
index rows MySQL read (its Handler_read_* counters). Flat figures from 1,000,000 to
10,000,000 rows mean the per-poll cost does not depend on the table size.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.procs import cpu_seconds, pids_named
from recheck.commands.base import ProgressLine
from recheck.commands.seed import seed
from recheck.dispatcher.dispatcher import Dispatcher, DuePusher
from recheck.dispatcher.lease import Lease
from recheck.shared.config import Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.sql import Queries
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.keys import Keys
from recheck.shared.redis.store import Store

OWNER = "bench-poll"
CLEAR_EVERY = 5  # polls between emptying the queue, so backpressure never stops the dispatcher
INDEX_READS = ("Handler_read_first", "Handler_read_key", "Handler_read_last", "Handler_read_next",
               "Handler_read_prev")  # fmt: skip


@dataclass
class PollCost:
    rows: int
    polls: int
    ids_per_poll: float
    wall_ms_p50: float
    wall_ms_p99: float
    dispatcher_cpu_ms: float
    mariadbd_cpu_ms: float
    redis_cpu_ms: float
    index_rows_read: float


def process_cpu(names: tuple[str, ...]) -> float:
    return sum(cpu_seconds(pid) or 0.0 for name in names for pid in pids_named(name))


def handler_reads(db: Database) -> tuple[int, int]:
    """(index rows, other rows: e.g. the page's temporary table) read by this session so far."""
    rows = dict(db.query(Queries(db.workload, "bench").bench_handler_reads))
    index = sum(int(rows[name]) for name in INDEX_READS)
    other = sum(int(v) for k, v in rows.items() if k not in INDEX_READS and k != "Handler_read_rnd_deleted")
    return index, other


def status_overhead(db: Database) -> tuple[int, int]:
    """What reading the counters adds to them by itself."""
    first, second = handler_reads(db), handler_reads(db)
    return second[0] - first[0], second[1] - first[1]


def measure(settings: Workload, rows: int, polls: int) -> PollCost:
    store = Store(connect_redis(settings.deployment), Keys(settings.deployment.key_prefix))
    store.clear()
    Lease(store, OWNER, ttl_seconds=3600).hold()
    pusher = DuePusher(settings, Database(settings), store, OWNER)
    dispatcher = Dispatcher(settings, pusher)
    dispatcher.poll()  # the first page also sets up the epoch marker: not a typical poll
    overhead = status_overhead(pusher.rows.db)[0]
    walls, reads = [], []
    cpu_before = (time.process_time(), process_cpu(("mariadbd",)), process_cpu(("redis-server",)))
    dispatched_before = dispatcher.dispatched
    for number in range(polls):
        if number % CLEAR_EVERY == 0:
            store.drop_transit()
            dispatcher.depth = 0
        before = handler_reads(pusher.rows.db)[0]
        started = time.perf_counter()
        dispatcher.poll()
        walls.append((time.perf_counter() - started) * 1000)
        reads.append(handler_reads(pusher.rows.db)[0] - before - overhead)
    own, mysql, cache = (
        time.process_time() - cpu_before[0],
        process_cpu(("mariadbd",)) - cpu_before[1],
        process_cpu(("redis-server",)) - cpu_before[2],
    )
    walls.sort()
    pusher.rows.db.close()
    return PollCost(
        rows=rows,
        polls=polls,
        ids_per_poll=round((dispatcher.dispatched - dispatched_before) / polls, 1),
        wall_ms_p50=round(statistics.median(walls), 2),
        wall_ms_p99=round(walls[min(len(walls) - 1, int(0.99 * len(walls)))], 2),
        dispatcher_cpu_ms=round(own / polls * 1000, 2),
        mariadbd_cpu_ms=round(mysql / polls * 1000, 2),
        redis_cpu_ms=round(cache / polls * 1000, 2),
        index_rows_read=round(statistics.mean(reads), 1),
    )


def run_poll_bench(settings: Workload, sizes: list[int], polls: int, out: Path, say=print) -> list[PollCost]:
    settings = settings.evolve(
        **{"table": "bench_rows", "key_prefix": "bench", "interval": 3600.0, "high_water": 10_000_000}
    )
    db = Database(settings)
    queries = Queries(settings, "bench")
    db.execute(queries.bench_drop_table)
    db.execute(queries.bench_create_table)
    results, have = [], 0
    for size in sorted(sizes):
        seed(settings, db, size - have, start_in_s=-3600.0, progress=ProgressLine("seeding"))
        have = size
        db.query(queries.bench_analyze)  # fresh index statistics for the size just reached
        say(f"  {size:,} rows: {polls} polls of {settings.dispatch_batch:,} ids")
        results.append(measure(settings, size, polls))
    db.execute(queries.bench_drop_table)
    db.close()
    Store(connect_redis(settings.deployment), Keys(settings.deployment.key_prefix)).clear()
    say("")
    say(f"{'rows':>12} {'ids/poll':>9} {'wall p50':>9} {'wall p99':>9} {'dispatcher CPU':>15} "
        f"{'mariadbd CPU':>13} {'redis CPU':>10} {'index rows read':>16}")  # fmt: skip
    for r in results:
        say(f"{r.rows:>12,} {r.ids_per_poll:>9,.0f} {r.wall_ms_p50:>7.2f}ms {r.wall_ms_p99:>7.2f}ms "
            f"{r.dispatcher_cpu_ms:>13.2f}ms {r.mariadbd_cpu_ms:>11.2f}ms {r.redis_cpu_ms:>8.2f}ms "
            f"{r.index_rows_read:>16,.0f}")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-poll-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"dispatch_batch": settings.dispatch_batch,
                                "results": [asdict(r) for r in results]}, indent=2))  # fmt: skip
    say(f"\nJSON: {path}")
    return results
