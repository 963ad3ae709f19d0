"""Two versions of the Lua scripts side by side on one grouped workload: Redis' own time per push,
per take and per acknowledgement, alternating turn by turn on the same data.

    .venv/bin/python -m bench.rediscost.groupab --groups 100000 --pairs 150 BEFORE_DIR AFTER_DIR

Each DIR holds a copy of shared/redis/lua (`git archive <rev> shared/redis/lua | tar -x -C DIR`,
or `cp -r`); the two must keep the same keys (a change to a script's work, not to the data it
reads). A Redis of its own (the machine's redis-server) gets --rows entries spread evenly over
--groups groups, pushed through BEFORE's dispatch script. After a first push, take and ack of each
(not timed: the scripts loaded), --pairs times, each version in turn (the first alternating),
the dispatcher pushes 500 new entries spread over the groups alike, and one worker takes 500 and
acknowledges them, each through that version's scripts: what waits stays as it was. Each script
call's time is what Redis counts for it: its EVALSHA's microseconds in INFO commandstats, the
counters reset just before (the Lua and the commands it runs, nothing of the network). Not
SLOWLOG with a threshold of 0, as this bench used until 2026-12-01: Redis 7 logs each command a
script runs too, so each call paid for logging its own commands, a script of many small
commands (the lists' take) far more than one of a few big ones (the floor's). The versions see
the same groups in the same state, one take apart, and the machine's drift between minutes (a
third on this VM) falls on both alike: `recheck bench --mode groups` runs each version alone,
rounds minutes apart, which this machine's noise can swamp.

The workload is `recheck bench --mode groups`'s: group_rate_limit and group_max_in_flight set
high enough never to bind, so each limit's code runs.

Then, in the same run and the same Redis, the floor: as many pushes, takes and acks of
bench/rediscost/groupfloor.lua, the least work fair turns, exact per-group limits and the fenced
ack need in the cheapest structure conceived so far (one sorted set of entries that carry their
group), on the same entries, groups and in-flight ids; reported as a share of BEFORE's cost: what
a design that keeps the turns, the limits and the fence could at best approach, since it leaves
out all the rest. Each is reported for the take and ack alone (issue 50's measure) and with the
push: a design can move work from the take to the push, and Redis pays both per id.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import recheck.shared.redis.scripts as scripts
from bench.rediscost.groupcost import OWNER, PUSH_CHUNK, settle, spread_entry
from recheck.dispatcher.lease import Lease
from recheck.shared.config import Workload
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import Counts, Store, open_store

BATCH = 500
WORKER = "bench-ab-worker"
MEASURED = ("dispatch", "take_grouped", "ack")
FLOOR = Path(__file__).with_name("groupfloor.lua")
DESCRIPTION = "two versions of the Lua scripts side by side on one grouped workload"


def reader(folder: Path) -> Callable[[str], str]:
    def read(name: str) -> str:
        return (folder / f"{name}.lua").read_text()

    return read


def store_of(folder: Path, settings: Workload) -> tuple[Store, dict[str, str]]:
    """A store whose scripts are folder's (read as the store registers them, at its opening), and
    their SHA1s -> script names. The package's own scripts are read again afterwards."""
    packaged = scripts.read_part
    scripts.read_part = reader(folder)
    scripts.script_source.cache_clear()
    try:
        shas = {hashlib.sha1(scripts.script_source(name).encode()).hexdigest(): name for name in MEASURED}
        store = open_store(connect_redis(settings.deployment), settings)
    finally:
        scripts.read_part = packaged
        scripts.script_source.cache_clear()
    return store, shas


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rediscost.groupab", description=DESCRIPTION)
    parser.add_argument("before", type=Path, help="a copy of shared/redis/lua: the version measured against")
    parser.add_argument("after", type=Path, help="a copy of shared/redis/lua: the version measured")
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=150, help="pushes, takes and acks of each version")
    parser.add_argument("--rows", type=int, default=0, help="entries pushed (default: the takes' + 10,000)")
    args = parser.parse_args(argv)
    for folder in (args.before, args.after):
        if not (folder / "take_grouped.lua").is_file():
            parser.error(f"{folder}: no take_grouped.lua there (a copy of shared/redis/lua is needed)")
    needed = (args.pairs + 1) * 2 * BATCH  # a first take of each version, not timed (the floor has its own)
    rows = args.rows or needed + 10_000
    if rows < needed:
        parser.error(f"--rows {rows:,} is fewer than the takes need ({needed:,})")

    from tests.support.servers import RedisServer  # the machine's redis-server, as --private's

    with tempfile.TemporaryDirectory(prefix="recheck-groupab-") as folder:
        server = RedisServer(Path(folder) / "redis")
        server.start()
        try:
            times = run(args.before, args.after, args.groups, args.pairs, rows, server.url())
        finally:
            server.stop()
    report(times, args.before, args.after, args.groups)


def run(before: Path, after: Path, groups: int, pairs: int, rows: int, redis_url: str) -> dict:
    settings = Workload().evolve(
        redis_url=redis_url, key_prefix="bench", group_column="tenant",
        group_rate_limit=1_000_000.0, group_max_in_flight=1_000_000,
    )  # fmt: skip
    versions = [(before, *store_of(before, settings)), (after, *store_of(after, settings))]
    if versions[0][2] == versions[1][2]:  # one script alike is fine: each call is timed alone
        raise SystemExit(f"{before} and {after}: the same scripts, nothing to compare")
    first = versions[0][1]
    client = first.client
    first.clear()
    assert Lease(first, OWNER, ttl_seconds=3600).hold(), "the bench's lease"
    print(f"{rows:,} entries over {groups:,} groups, then {pairs} pushes, takes of {BATCH} and acks each")
    for start in range(0, rows, PUSH_CHUNK):
        stop = min(start + PUSH_CHUNK, rows)
        first.push(OWNER, [spread_entry(i, groups) for i in range(start + 1, stop + 1)])
    floor = Floor(client, groups, rows)
    # The big hashes just written finish rehashing first (settle.lua: else reads in them cost more
    # until enough operations have run on each, and the floor, whose ids only its own acks touch,
    # read half again as dear as the versions, whose ids both versions' acks touch). Then each
    # pushes, takes and acknowledges in turn, the order rotating pair by pair: all three see Redis alike.
    settle(client, [first.keys.inflight, *floor.settled()])
    feed = Feed(groups, rows)
    takers: list[tuple[Path, Callable[[Meter], None]]] = [
        (folder, partial(push_take_and_ack, store, feed)) for folder, store, _ in versions
    ]
    takers.append((FLOOR, partial(floor.push_take_and_ack, feed)))
    times: dict = {(label, name): [] for label, _ in takers for name in MEASURED}
    for label, cycle in takers:  # a first cycle each, not timed: the scripts loaded (a first
        cycle(Meter(client, times, label, timed=False))  # EVALSHA fails with NOSCRIPT)
    for pair in range(pairs):
        turn = pair % len(takers)
        for label, cycle in takers[turn:] + takers[:turn]:
            cycle(Meter(client, times, label))
        if (pair + 1) % 50 == 0:
            print(f"  {pair + 1} of {pairs} pairs")
    first.clear()
    floor.clear()
    return times


class Meter:
    """Redis' own time for one script call at a time (INFO commandstats' EVALSHA microseconds,
    the counters reset before the call), into times[(label, name)]."""

    def __init__(self, client, times: dict, label: Path, timed: bool = True) -> None:
        self.client, self.times, self.label, self.timed = client, times, label, timed

    def __call__(self, name: str, call: Callable[[], Any]) -> Any:
        if not self.timed:
            return call()
        self.client.config_resetstat()
        reply = call()
        stat = self.client.info("commandstats").get("cmdstat_evalsha", {})
        if stat.get("calls") != 1:  # the step ran one script, once: else the figure mixes calls
            raise SystemExit(f"{self.label} {name}: {stat.get('calls', 0)} EVALSHA calls, not 1")
        self.times[(self.label, name)].append(stat["usec"])
        return reply


class Feed:
    """The pages the dispatcher pushes: BATCH new ids at a time, spread over the groups as the
    first entries were (each group's backlog stays level: as many taken as pushed)."""

    def __init__(self, groups: int, rows: int) -> None:
        self.groups, self.last = groups, rows

    def page(self) -> list[bytes]:
        first, self.last = self.last + 1, self.last + BATCH
        return [spread_entry(i, self.groups) for i in range(first, self.last + 1)]


class Floor:
    """groupfloor.lua on keys of its own, fed `rows` entries over `groups` groups as the real
    scripts are, each id in flight as the dispatcher's push leaves it."""

    KEYS = ("waiting", "tokens", "running", "worker", "inflight", "stats", "turns")

    def __init__(self, client, groups: int, rows: int) -> None:
        self.client = client
        self.keys = [f"{{bench-floor}}:{name}" for name in self.KEYS]
        client.delete(*self.keys)
        for key in self.keys[1:3] + self.keys[6:]:
            client.hset(key, "~", "~" * 80)  # hash tables from the first write, as recheck's (_lib.lua)
        arrival = time.time_ns() // 1000  # the tokens' times are the Redis clock's microseconds
        self.scale = rows + 1  # a turn's score: turn x scale + the entry's place (< scale)
        for start in range(0, rows, PUSH_CHUNK):
            part = range(start + 1, min(start + PUSH_CHUNK, rows) + 1)
            # By the group's turn, then in push order within it: the real take's ring reaches the
            # groups in that order, and ids pushed together sit together in Redis' memory.
            turns = {spread_entry(i, groups): (i - 1) // groups * self.scale + i for i in part}
            client.zadd(self.keys[0], turns)
            client.hset(self.keys[4], mapping={str(i): "1000" for i in part})  # spread_entry's due time
        client.hset(self.keys[1], mapping={f"{g:x}": arrival for g in range(groups)})
        # each group's next turn: one past its last entry's (entry i's group is i % groups)
        last = {g: rows - (rows - g) % groups for g in range(groups)}
        client.hset(self.keys[6], mapping={f"{g:x}": (i - 1) // groups + 1 for g, i in last.items() if i > 0})
        self.script = client.register_script(FLOOR.read_text())

    def settled(self) -> list[str]:
        """Its keys that settle.lua should finish rehashing: the big ones, just written."""
        return [self.keys[0], self.keys[1], self.keys[4], self.keys[6]]

    def push_take_and_ack(self, feed: Feed, meter: Meter) -> None:
        page = feed.page()
        pushed = meter("dispatch", lambda: self.script(keys=self.keys, args=["push", self.scale, *page]))
        if pushed != len(page):
            raise SystemExit(f"the floor's push took {pushed} of {len(page)} new entries")
        got = meter("take_grouped", lambda: self.script(keys=self.keys, args=["take", BATCH]))
        if len(got) != BATCH:
            raise SystemExit(f"the floor's take gave {len(got)}, not {BATCH}")
        released = meter("ack", lambda: self.script(keys=self.keys, args=["ack", *got]))
        if released != BATCH:  # each id was in flight for its due time: the fence let all go
            raise SystemExit(f"the floor's ack released {released}, not {BATCH}")

    def clear(self) -> None:
        self.client.delete(*self.keys)


def push_take_and_ack(store: Store, feed: Feed, meter: Meter) -> None:
    page = feed.page()
    pushed = meter("dispatch", lambda: store.push(OWNER, page).pushed)
    if pushed != len(page):
        raise SystemExit(f"a push took {pushed} of {len(page)} new entries")
    got = meter("take_grouped", lambda: store.take(WORKER, BATCH).entries)
    if len(got) != BATCH:
        raise SystemExit(f"a take gave {len(got)}, not {BATCH}: the versions do different work")
    meter("ack", lambda: store.acknowledge(WORKER, got, [], Counts(checked=len(got)), whole=True))


def report(times: dict, before: Path, after: Path, groups: int) -> None:
    """Each version's p50 and mean per call, then after and the floor as shares of before: the
    take and ack (issue 50's measure), the push, and all three (Redis' cost per id pushed,
    taken and acknowledged)."""
    p50: dict = {}
    print(f"\nRedis' time per call of {BATCH} ids from {groups:,} groups (commandstats, us): p50 / mean")
    for folder in (before, after, FLOOR):
        line = []
        for name, label in (("dispatch", "push"), ("take_grouped", "take"), ("ack", "ack")):
            calls = times[(folder, name)]
            p50[(folder, name)] = statistics.median(calls)
            line.append(f"{label} {p50[(folder, name)]:>6.0f} / {statistics.fmean(calls):>6.0f}")
        print(f"  {folder!s:<40} {'   '.join(line)}   ({len(calls)} each)")

    def share(folder: Path, names: tuple[str, ...]) -> str:
        return f"{sum(p50[(folder, n)] for n in names) / sum(p50[(before, n)] for n in names):.2f}x"

    parts = {"take + ack": ("take_grouped", "ack"), "push": ("dispatch",), "all three": MEASURED}
    print(f"{'shares of before (p50s)':<28}" + "".join(f"{label:>12}" for label in parts))
    for label, folder in (("after / before", after), ("floor / before", FLOOR)):
        print(f"  {label:<26}" + "".join(f"{share(folder, names):>12}" for names in parts.values()))
    print("floor: groupfloor.lua, the least fair turns, exact group limits and the fenced ack need")


if __name__ == "__main__":
    main()
