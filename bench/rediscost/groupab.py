"""Two versions of the Lua scripts side by side on one grouped workload: Redis' own time per take
and per acknowledgement, alternating take by take on the same data.

    .venv/bin/python -m bench.rediscost.groupab --groups 100000 --pairs 150 BEFORE_DIR AFTER_DIR

Each DIR holds a copy of shared/redis/lua (`git archive <rev> shared/redis/lua | tar -x -C DIR`,
or `cp -r`); the two must keep the same keys (a change to a script's work, not to the data it
reads). A Redis of its own (the machine's redis-server) gets --rows entries spread evenly over
--groups groups, pushed through BEFORE's dispatch script. After a first take and ack of each
(not timed: the scripts loaded), --pairs times, each version in turn (the first alternating),
one worker takes 500 and acknowledges them through that version's scripts. Each script call's
time is what Redis counts for it (SLOWLOG with a threshold of 0: the Lua and the commands it
runs, nothing of the network), matched to its version by the script's SHA1. The versions see
the same groups in the same state, one take apart, and the machine's drift between minutes (a
third on this VM) falls on both alike: `recheck bench --mode groups` runs each version alone,
rounds minutes apart, which this machine's noise can swamp.

The workload is `recheck bench --mode groups`'s: group_rate_limit and group_max_in_flight set
high enough never to bind, so each limit's code runs.

Then, in the same run and the same Redis, the floor: as many takes and acks of
bench/rediscost/groupfloor.lua, the least work exact per-group limits and the fenced ack need in
the cheapest structure conceived so far (one sorted set of entries that carry their group), on
the same entries, groups and in-flight ids; reported as a share of BEFORE's cost: what a design
that keeps the limits and the fence could at best approach, since it leaves out all the rest.
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

import recheck.shared.redis.scripts as scripts
from bench.rediscost.groupcost import OWNER, PUSH_CHUNK, settle, spread_entry
from recheck.dispatcher.lease import Lease
from recheck.shared.config import Workload
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import Counts, Store, open_store

BATCH = 500
WORKER = "bench-ab-worker"
MEASURED = ("take_grouped", "ack")
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
    parser.add_argument("--pairs", type=int, default=150, help="takes and acks of each version")
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
    if versions[0][2] == versions[1][2]:  # one script alike is fine: SLOWLOG is read per version
        raise SystemExit(f"{before} and {after}: the same take and ack scripts, nothing to compare")
    first = versions[0][1]
    client = first.client
    first.clear()
    assert Lease(first, OWNER, ttl_seconds=3600).hold(), "the bench's lease"
    print(f"{rows:,} entries over {groups:,} groups, then {pairs} takes of {BATCH} and acks per version")
    for start in range(0, rows, PUSH_CHUNK):
        stop = min(start + PUSH_CHUNK, rows)
        first.push(OWNER, [spread_entry(i, groups) for i in range(start + 1, stop + 1)])
    floor = Floor(client, groups, rows)
    # The big hashes just written finish rehashing first (settle.lua: else reads in them cost more
    # until enough operations have run on each, and the floor, whose ids only its own acks touch,
    # read half again as dear as the versions, whose ids both versions' acks touch). Then each
    # takes and acknowledges in turn, the order rotating pair by pair: all three see Redis alike.
    settle(client, [first.keys.inflight, *floor.settled()])
    takers: list[tuple[Path, Callable[[], None], Callable[[list[bytes]], str | None]]] = [
        (folder, partial(take_and_ack, store), partial(script_name, shas)) for folder, store, shas in versions
    ]
    takers.append((FLOOR, floor.take_and_ack, floor.name_of))
    for _, take, _ in takers:  # a first take and ack each, not timed: the scripts loaded (a
        take()  # first EVALSHA fails with NOSCRIPT, and SLOWLOG would count it)
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1024)
    times: dict = {(label, name): [] for label, _, _ in takers for name in MEASURED}
    for pair in range(pairs):
        turn = pair % len(takers)
        for label, take, name_of in takers[turn:] + takers[:turn]:
            client.slowlog_reset()
            take()
            for entry in client.slowlog_get(1024):
                name = name_of(entry["command"].split())
                if name:
                    times[(label, name)].append(entry["duration"])
        if (pair + 1) % 50 == 0:
            print(f"  {pair + 1} of {pairs} pairs")
    client.config_set("slowlog-log-slower-than", 10_000)
    first.clear()
    floor.clear()
    return times


def script_name(shas: dict[str, str], command: list[bytes]) -> str | None:
    """Which measured script a SLOWLOG entry's command ran (None: another command)."""
    return shas.get(command[1].decode()) if command[0].upper() == b"EVALSHA" else None


class Floor:
    """groupfloor.lua on keys of its own, fed `rows` entries over `groups` groups as the real
    scripts are, each id in flight as the dispatcher's push leaves it."""

    KEYS = ("waiting", "tokens", "running", "worker", "inflight", "stats")

    def __init__(self, client, groups: int, rows: int) -> None:
        self.client = client
        self.keys = [f"{{bench-floor}}:{name}" for name in self.KEYS]
        client.delete(*self.keys)
        for key in self.keys[1:3]:
            client.hset(key, "~", "~" * 80)  # hash tables from the first write, as recheck's (_lib.lua)
        arrival = time.time_ns() // 1000  # the tokens' times are the Redis clock's microseconds
        for start in range(0, rows, PUSH_CHUNK):
            part = range(start + 1, min(start + PUSH_CHUNK, rows) + 1)
            # By the group's turn, then in push order within it: the real take's ring reaches the
            # groups in that order, and ids pushed together sit together in Redis' memory.
            turns = {spread_entry(i, groups): (i - 1) // groups * (rows + 1) + i for i in part}
            client.zadd(self.keys[0], turns)
            client.hset(self.keys[4], mapping={str(i): "1000" for i in part})  # spread_entry's due time
        client.hset(self.keys[1], mapping={f"{g:x}": arrival for g in range(groups)})
        self.script = client.register_script(FLOOR.read_text())

    def settled(self) -> list[str]:
        """Its keys that settle.lua should finish rehashing: the big ones, just written."""
        return [self.keys[0], self.keys[1], self.keys[4]]

    def take_and_ack(self) -> None:
        got = self.script(keys=self.keys, args=["take", BATCH])
        if len(got) != BATCH:
            raise SystemExit(f"the floor's take gave {len(got)}, not {BATCH}")
        released = self.script(keys=self.keys, args=["ack", *got])
        if released != BATCH:  # each id was in flight for its due time: the fence let all go
            raise SystemExit(f"the floor's ack released {released}, not {BATCH}")

    def name_of(self, command: list[bytes]) -> str | None:
        """ "take_grouped" or "ack" for a SLOWLOG entry of the floor's script, else None."""
        if command[:2] != [b"EVALSHA", self.script.sha.encode()]:
            return None
        return "take_grouped" if command[3 + len(self.KEYS)] == b"take" else "ack"

    def clear(self) -> None:
        self.client.delete(*self.keys)


def take_and_ack(store: Store) -> None:
    got = store.take(WORKER, BATCH).entries
    if len(got) != BATCH:
        raise SystemExit(f"a take gave {len(got)}, not {BATCH}: the versions do different work")
    store.acknowledge(WORKER, got, [], Counts(checked=len(got)), whole=True)


def report(times: dict, before: Path, after: Path, groups: int) -> None:
    p50 = {}
    print(f"\nRedis' time per call from {groups:,} groups (SLOWLOG, microseconds): p50 / mean")
    for folder in (before, after, FLOOR):
        take, ack = times[(folder, "take_grouped")], times[(folder, "ack")]
        take_p50, ack_p50 = statistics.median(take), statistics.median(ack)
        print(f"  {folder!s:<40} take {take_p50:>7.0f} / {statistics.fmean(take):>7.0f}"
              f"   ack {ack_p50:>7.0f} / {statistics.fmean(ack):>7.0f}   ({len(take)} each)")  # fmt: skip
        p50[folder] = take_p50 + ack_p50
    print(f"after / before, take p50 + ack p50: {p50[after] / p50[before]:.2f}x")
    floor = p50[FLOOR] / p50[before]
    print(f"floor / before: {floor:.2f}x (groupfloor.lua: the least the limits and the fence need)")


if __name__ == "__main__":
    main()
