"""`recheck bench --mode scripts`: Redis' own time per id in each of the three hot scripts.

Each round empties the bench's keys and moves --rows entries through the real scripts as a drain
does: pushed in pages of the dispatcher's size while fewer than high_water wait, taken by one
worker --batch at a time, each take acknowledged whole as a batch worker does. Per script and
id: the time Redis itself counts for the script calls (`INFO commandstats`, EVALSHA's usec: the
Lua and the commands it runs), which works on any Redis, local or not (other clients' scripts
would be counted too: it says when there were any). Rounds are reported by their median and
their least: on a shared machine the least is the figure other work disturbed least, and two
trees are compared run against run, alternating (docs/performance.md).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from recheck.dispatcher.lease import Lease
from recheck.shared.config import Workload
from recheck.shared.redis.connection import RedisClient, connect_redis
from recheck.shared.redis.store import Counts, open_store

OWNER = "bench-scripts"
WORKER = "bench-scripts-worker"
DUE_MS = 1_764_000_000_000  # entries' due times: any valid time (nothing reads the rows)


@dataclass
class ScriptCost:
    script: str
    us_per_id_median: float
    us_per_id_least: float


def script_stats(client: RedisClient) -> tuple[int, int]:
    """(calls, microseconds) Redis has counted in script calls (EVALSHA) since its statistics
    were reset: every client's, ours among them. Calls that failed (a NOSCRIPT before redis-py
    loads a script and calls it again) are not counted."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)) - int(stats.get("failed_calls", 0)), int(stats.get("usec", 0))


def script_usec(client: RedisClient) -> int:
    return script_stats(client)[1]


def one_round(settings: Workload, first_id: int, rows: int, batch: int) -> tuple[dict[str, float], int]:
    """µs per id of dispatch, take (the ordering's take script) and ack over one round of `rows`
    ids, the queue kept at most `high_water` deep as the dispatcher keeps it (so the in-flight
    hash is as large as in a drain, not `rows`); and how many script calls other clients made
    meanwhile (their time is in the figures)."""
    store = open_store(connect_redis(settings.deployment), settings)
    client = store.client
    store.clear()
    if not Lease(store, OWNER, ttl_seconds=3600).hold():
        raise RuntimeError("the bench's dispatcher lease is held by another process")
    page, high_water = settings.dispatch_batch, settings.high_water
    entries = [b"%d:%d" % (first_id + i, DUE_MS + i) for i in range(rows)]
    spent = {"dispatch": 0, "take": 0, "ack": 0}
    pushed, taken, ours = 0, 0, 0
    first_calls, _ = script_stats(client)
    while taken < rows:
        while pushed < rows and pushed - taken < high_water:
            before = script_usec(client)
            store.push(OWNER, entries[pushed : pushed + page])
            spent["dispatch"] += script_usec(client) - before
            pushed, ours = min(pushed + page, rows), ours + 1
        before = script_usec(client)
        got = store.take(WORKER, batch).entries
        between = script_usec(client)
        if not got:
            raise RuntimeError(f"the queue ran dry after {taken:,} of the {pushed:,} ids pushed")
        store.acknowledge(WORKER, got, [], Counts(checked=len(got)), whole=True)
        spent["take"] += between - before
        spent["ack"] += script_usec(client) - between
        taken, ours = taken + len(got), ours + 2
    last_calls, _ = script_stats(client)
    store.clear()
    return {script: usec / rows for script, usec in spent.items()}, max(last_calls - first_calls - ours, 0)


def run_script_bench(
    settings: Workload, rows: int, rounds: int, batch: int, out: Path, say=print
) -> list[ScriptCost]:
    # The plain path, whatever the environment's workload says: one partition, no priority
    # column, no groups, no limits (each of those has its own measurement: --mode groups, ...).
    settings = settings.evolve(
        key_prefix="bench-scripts",
        partitions=1,
        priority_column="",
        group_column="",
        rate_limit=0.0,
        max_in_flight=0,
    )
    figures: dict[str, list[float]] = {"dispatch": [], "take": [], "ack": []}
    foreign = 0
    for number in range(rounds):
        say(f"  round {number + 1} of {rounds}: {rows:,} ids pushed, taken {batch:,} at a time, acknowledged")
        costs, others = one_round(settings, 1 + number * rows, rows, batch)
        for script, value in costs.items():
            figures[script].append(value)
        foreign += others
    totals = [sum(parts) for parts in zip(*figures.values(), strict=True)]
    results = [
        ScriptCost(name, statistics.median(values), min(values))
        for name, values in [*figures.items(), ("all three", totals)]
    ]
    say("")
    say(f"{'script':>10} {'median':>9} {'least':>9}   (µs of Redis per id, {rounds} rounds)")
    for r in results:
        say(f"{r.script:>10} {r.us_per_id_median:>9.3f} {r.us_per_id_least:>9.3f}")
    if foreign:
        say(f"other clients ran {foreign:,} scripts on this Redis meanwhile: their time is in these figures "
            "(--private measures on a Redis of its own)")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-scripts-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(
        json.dumps(
            {"rows": rows, "rounds": rounds, "batch": batch, "per_round": figures, "foreign_calls": foreign,
             "results": [asdict(r) for r in results]},
            indent=2,
        )
    )  # fmt: skip
    say(f"\nJSON: {path}")
    return results
