"""`recheck bench --mode groups`: what one take costs as the number of groups grows.

For each group count in turn, Redis is emptied and --rows entries are pushed through the real
dispatch script, spread evenly over the groups (a grouped workload with group_rate_limit and
group_max_in_flight set high enough never to bind, so every limit's code path runs), then one
worker takes --batch entries and acknowledges them, --polls times, through the real scripts.
Per take: wall time (p50, p99) and redis-server's CPU (psutil, when the server runs on this
machine). Flat figures from 10 to 100,000 groups mean a take costs O(batch) whatever the number
of groups (docs/groups.md). Per id, the push's Redis CPU too, and with the take and ack's the
"one thread" column: the ids a second one Redis thread, fully busy, could push, take and
acknowledge for one grouped workload (which has one partition: docs/groups.md).

Beside it, the "group state" column: Redis CPU per take of bench/rediscost/groupstate.lua, the least work
exact per-group limits need whatever the data structure (each group a take gives entries from has
its tokens and its running count read and written, and the ack writes the count again), for as
many distinct groups as one take touches (10 from 10 groups, 500 from 100,000). What a take costs
above that floor is what recheck's structure adds; how the floor grows from 10 to 100,000 groups
is what no structure can remove.

And the "one zset" column: Redis CPU per take and ack of bench/rediscost/groupzset.lua, a prototype of
another structure (every waiting entry of the workload in one sorted set scored by its group's
turn, so a take is one pop whatever the groups), fed the same entries, for the same takes: what
such a redesign could save, measured beside the real scripts (a lower bound: the prototype leaves
out parking entries over their limits, drops, the dispatcher's side and the wake-ups).

Before anything is timed, the keys just filled in bulk (the in-flight ids, the state's hashes, the
sorted set) finish rehashing (settle.lua): until then reads in them cost more, by how much
depending on how many operations have run on each since, which no two columns share.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.procs import cpu_seconds, pids_named
from recheck.dispatcher.lease import Lease
from recheck.shared.config import Workload
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import Counts, Store, open_store

OWNER = "bench-groups"
PUSH_CHUNK = 10_000
GROUP_STATE = Path(__file__).with_name("groupstate.lua")
ONE_ZSET = Path(__file__).with_name("groupzset.lua")
SETTLE = Path(__file__).with_name("settle.lua")  # big keys just written finish rehashing first


@dataclass
class TakeCost:
    groups: int
    takes: int
    ids_per_take: float
    wall_ms_p50: float
    wall_ms_p99: float
    redis_cpu_ms: float  # per take and its acknowledgement; -1 if the server is not on this machine
    push_us: float  # per id pushed through dispatch.lua (-1 as above)
    group_state_ms: float  # per take: groupstate.lua for the groups one take touches (-1 as above)
    one_zset_ms: float  # per take and ack: groupzset.lua, the same takes from one sorted set (-1 as above)


def spread_entry(i: int, groups: int) -> bytes:
    """Entry i of a workload spread evenly over `groups` groups (hex names, as the dispatcher's)."""
    return f"{i}:1000:{(i % groups):x}".encode()


def settle(client, keys: list[str]) -> int:
    """settle.lua on `keys`: their rehashing finished before anything is timed in them."""
    return client.register_script(SETTLE.read_text())(keys=keys)


def redis_cpu_s(redis_pids: list[int]) -> float:
    """The CPU seconds the redis-server processes have used so far (0 when none runs here)."""
    return sum(cpu_seconds(pid) or 0.0 for pid in redis_pids)


def measure(settings: Workload, groups: int, rows: int, takes: int, batch: int) -> TakeCost:
    store = open_store(connect_redis(settings.deployment), settings)
    store.clear()
    assert Lease(store, OWNER, ttl_seconds=3600).hold(), "the bench's lease"
    entries = [spread_entry(i, groups) for i in range(1, rows + 1)]
    redis_pids = pids_named("redis-server")
    before = redis_cpu_s(redis_pids)
    for start in range(0, rows, PUSH_CHUNK):
        store.push(OWNER, entries[start : start + PUSH_CHUNK])
    pushed = redis_cpu_s(redis_pids) - before
    settle(store.client, [store.keys.inflight])
    before = redis_cpu_s(redis_pids)
    walls, taken = [], 0
    for _ in range(takes):
        started = time.perf_counter()
        got = store.take("bench-worker", batch).entries
        walls.append(time.perf_counter() - started)
        store.acknowledge("bench-worker", got, [], Counts(checked=len(got)), whole=True)
        taken += len(got)
    after = redis_cpu_s(redis_pids)
    store.clear()
    state_ms = group_state_cost(store, groups, takes, batch, redis_pids)
    zset_ms = one_zset_cost(store, entries, groups, takes, batch, redis_pids)
    walls.sort()
    return TakeCost(
        groups=groups,
        takes=takes,
        ids_per_take=taken / takes,
        wall_ms_p50=statistics.median(walls) * 1000,
        wall_ms_p99=walls[min(len(walls) - 1, int(len(walls) * 0.99))] * 1000,
        redis_cpu_ms=(after - before) * 1000 / takes if redis_pids else -1.0,
        push_us=pushed * 1e6 / rows if redis_pids else -1.0,
        group_state_ms=state_ms,
        one_zset_ms=zset_ms,
    )


def group_state_cost(store: Store, groups: int, takes: int, batch: int, redis_pids: list[int]) -> float:
    """Redis CPU in ms per take of groupstate.lua: the tokens and running counts of the distinct
    groups one take of `batch` touches (min(groups, batch), in turn as the takes reach them), in
    two hashes of `groups` fields kept as hash tables (as recheck's)."""
    client = store.client
    tokens, room = "{bench-state}:tokens", "{bench-state}:room"  # one slot on a cluster
    names = [f"{i:x}" for i in range(groups)]
    for key in (tokens, room):
        client.delete(key)
        client.hset(key, "~", "~" * 80)  # a hash table from the first write (_lib.lua HASHTABLE)
        for start in range(0, groups, PUSH_CHUNK):
            client.hset(key, mapping=dict.fromkeys(names[start : start + PUSH_CHUNK], "1000000"))
    settle(client, [tokens, room])
    script = client.register_script(GROUP_STATE.read_text())
    touched = min(groups, batch)
    before = redis_cpu_s(redis_pids)
    for take in range(takes):
        first = take * touched
        script(keys=[tokens, room], args=[names[(first + j) % groups] for j in range(touched)])
    after = redis_cpu_s(redis_pids)
    client.delete(tokens, room)
    return (after - before) * 1000 / takes if redis_pids else -1.0


def one_zset_cost(
    store: Store, entries: list[bytes], groups: int, takes: int, batch: int, redis_pids: list[int]
) -> float:
    """Redis CPU in ms per take of `batch` and its ack through groupzset.lua, from `entries`
    ("id:due:group") in one sorted set, each scored by its group's turn (its place in its group)."""
    client = store.client
    keys = [f"{{bench-zset}}:{name}" for name in ("waiting", "tokens", "running", "worker", "of")]
    client.delete(*keys)
    for key in keys[1:3] + keys[4:]:
        client.hset(key, "~", "~" * 80)  # hash tables from the first write, as recheck's
    for start in range(0, len(entries), PUSH_CHUNK):
        part = range(start, min(start + PUSH_CHUNK, len(entries)))
        client.zadd(keys[0], {entries[i]: i // groups for i in part})
    settle(client, [keys[0]])
    script = client.register_script(ONE_ZSET.read_text())
    before = redis_cpu_s(redis_pids)
    for _ in range(takes):
        got = script(keys=keys, args=["take", batch])
        script(keys=keys, args=["ack", *got])
    after = redis_cpu_s(redis_pids)
    client.delete(*keys)
    return (after - before) * 1000 / takes if redis_pids else -1.0


def one_thread(cost: TakeCost) -> float:
    """Ids a second one Redis thread could push, take and acknowledge, fully busy (0: not measured)."""
    if cost.push_us < 0 or cost.redis_cpu_ms <= 0 or cost.ids_per_take <= 0:
        return 0.0
    return 1e6 / (cost.push_us + cost.redis_cpu_ms * 1000 / cost.ids_per_take)


def run_group_bench(
    settings: Workload, counts: list[int], rows: int, takes: int, batch: int, out: Path, say=print
) -> list[TakeCost]:
    settings = settings.evolve(
        key_prefix="bench", group_column="tenant", group_rate_limit=1_000_000.0, group_max_in_flight=1_000_000
    )
    if rows < takes * batch:
        raise ValueError(
            f"--rows {rows:,} is fewer than --polls x --batch ({takes * batch:,}): takes would run dry"
        )
    results = []
    for groups in counts:
        say(f"  {groups:,} groups: {rows:,} ids, {takes} takes of {batch:,}")
        results.append(measure(settings, groups, rows, takes, batch))
    say("")
    heads = ("groups", "ids/take", "wall p50", "wall p99", "redis CPU")
    say(" ".join(f"{head:>9}" for head in heads) + f" {'group state':>12} {'one zset':>9}"
        f" {'push/id':>8} {'one thread':>11}")  # fmt: skip
    for r in results:
        say(f"{r.groups:>9,} {r.ids_per_take:>9,.0f} {r.wall_ms_p50:>7.2f}ms {r.wall_ms_p99:>7.2f}ms "
            f"{r.redis_cpu_ms:>8.2f}ms {r.group_state_ms:>10.2f}ms {r.one_zset_ms:>7.2f}ms "
            f"{r.push_us:>6.2f}us {one_thread(r):>9,.0f}/s")  # fmt: skip
    say("redis CPU: a take and its ack; group state: the least of that exact per-group limits need")
    say("(bench/rediscost/groupstate.lua, for as many groups as one take touches); one zset: the same")
    say("takes and acks from one sorted set scored by each group's turn (bench/rediscost/groupzset.lua,")
    say("a prototype, its push not counted: bench/rediscost/groupab.py times a sorted set's push, dearer")
    say("than the lists'); push/id: Redis CPU per id pushed; one thread: ids a second one Redis thread")
    say("could push, take and acknowledge for one grouped workload, fully busy with nothing else")
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-groups-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(
        json.dumps({"batch": batch, "rows": rows, "results": [asdict(r) for r in results]}, indent=2)
    )
    say(f"\nJSON: {path}")
    return results
