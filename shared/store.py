"""recheck's state in Redis: every script call and every plain read or write of its keys.

This is the only code that knows the KEYS/ARGV order of the Lua scripts in shared/lua (each
script's header documents it) and which key each operation touches; the roles call methods
named for what they do. Every key comes from one Keys object, so all of them share its hash
tag and every script also runs on Redis Cluster.

Each script is prefixed with _lib.lua (small helpers) and registered once per client; redis-py
runs it with EVALSHA and reloads it transparently after a Redis restart empties the cache.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from importlib import resources
from typing import NamedTuple

import redis

from shared.keys import Keys

SCRIPT_NAMES = ("dispatch", "pop", "ack", "reclaim", "orphans", "lease", "errors", "writeslot")
DELETE_CHUNK = 1000
MAX_ERROR_GROUPS = 50  # distinct error messages kept per workload (errors.lua)
ERROR_EXAMPLES = 5  # example ids kept per message


@cache
def script_source(name: str) -> str:
    folder = resources.files("shared").joinpath("lua")
    return folder.joinpath("_lib.lua").read_text() + folder.joinpath(f"{name}.lua").read_text()


class Pushed(NamedTuple):
    pushed: int  # ids that were not in flight and went to the queue; -1: not the lease holder
    depth: int  # queue length afterwards
    lost: bool  # the epoch key was missing: Redis lost its data before this push


class Taken(NamedTuple):
    suspect: bool  # a group of reclaimed entries, taken alone
    entries: list[bytes]
    groups_waiting: int = 0  # reclaimed groups still waiting in this queue's partition


class Counts(NamedTuple):
    """What an acknowledgement adds to the shared counters."""

    checked: int = 0
    failed: int = 0
    stale: int = 0
    malformed: int = 0
    deferred: int = 0


class Overview(NamedTuple):
    queue_depth: int
    suspects: int
    in_flight: int
    counters: dict[str, int]
    leader: str | None


class Store:
    def __init__(self, client: redis.Redis, keys: Keys):
        self.client = client
        self.keys = keys
        self._scripts = {name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}

    @property
    def parts(self) -> list[Store]:
        """The stores of the workload's partitions (shared/partitioned.py): this one alone."""
        return [self]

    def _run(self, name: str, keys: Sequence[str], args: Sequence) -> object:
        return self._scripts[name](keys=list(keys), args=list(args), client=self.client)

    # -- dispatching (dispatch.lua) ---------------------------------------------------------
    def push(self, owner: str, entries: Sequence[bytes]) -> Pushed:
        """Queue entries whose id is not in flight, if `owner` holds the leader lease."""
        k = self.keys
        pushed, depth, lost = self._run(
            "dispatch", [k.queue, k.inflight, k.stats, k.epoch, k.leader, k.completed], [owner, *entries]
        )
        return Pushed(int(pushed), int(depth), bool(lost))

    def queue_depth(self) -> int:
        return self.client.llen(self.keys.queue)

    def highest_in_flight_due(self) -> int | None:
        """The latest due time (ms) among ids in flight, or None if nothing is in flight."""
        dues = self.client.hvals(self.keys.inflight)  # only after a rewind: rare
        return max(int(due) for due in dues) if dues else None

    def guard_key(self, name: str) -> str:
        return {"sweep": self.keys.sweep_guard, "dispatch": self.keys.dispatch_guard}[name]

    def begin_guard(self, name: str, ttl_ms: int) -> None:
        """A pass rereading rows that may be in flight starts: acks record what completes."""
        self.client.set(self.guard_key(name), 1, px=ttl_ms)

    def end_guard(self, name: str) -> None:
        self.client.delete(self.guard_key(name))

    # -- the leader lease (lease.lua) -------------------------------------------------------
    def hold_lease(self, owner: str, ttl_ms: int) -> str | None:
        """Renew the lease if `owner` holds it, take it if free; returns the holder afterwards."""
        holder = self._run("lease", [self.keys.leader], [owner, ttl_ms, "hold"])
        return holder.decode() if holder else None

    def lease_holder(self) -> str | None:
        """Who holds the leader lease now (None: it is free)."""
        holder = self.client.get(self.keys.leader)
        return holder.decode() if holder else None

    def release_lease(self, owner: str) -> None:
        self._run("lease", [self.keys.leader], [owner, 0, "release"])

    # -- a worker's entries (pop.lua, ack.lua) ----------------------------------------------
    def take(self, worker: str, limit: int, groups: bool = True) -> Taken:
        """Up to `limit` entries (a suspect group first) into the worker's processing set.

        limit 0 only moves what a blocking wait delivered to the worker's landing list.
        groups=False: no suspect group (filling a batch begun in another partition)."""
        k = self.keys
        suspect, entries, waiting = self._run(
            "pop", [k.queue, k.suspects, k.processing(worker), k.landing(worker)], [limit, int(not groups)]
        )
        return Taken(bool(suspect), entries, int(waiting))

    def wait_for_work(self, worker: str, timeout: float) -> bool:
        """Block until the queue has an entry (moved into the landing list); False on timeout."""
        moved = self.client.blmove(self.keys.queue, self.keys.landing(worker), timeout, "LEFT", "RIGHT")
        return moved is not None

    def held(self, worker: str) -> set[bytes]:
        return self.client.smembers(self.keys.processing(worker))

    def held_count(self, worker: str) -> int:
        return self.client.scard(self.keys.processing(worker))

    def acknowledge(
        self,
        worker: str,
        done: Sequence[bytes],
        back: Sequence[bytes],
        counts: Counts,
        *,
        whole: bool,
        deferred: Sequence[bytes] = (),
    ) -> int:
        """Release finished and deferred entries still held, return untouched ones to the queue
        head, add the counts. `whole`: these are all the worker holds (lets Redis skip the
        membership test). Returns how many finished entries the worker still held."""
        k = self.keys
        return self._run(
            "ack",
            [k.processing(worker), k.inflight, k.queue, k.stats, k.reclaims, k.sweep_guard,
             k.dispatch_guard, k.completed],
            [int(whole), len(done), len(deferred), *counts, *done, *deferred, *back],
        )  # fmt: skip

    # -- write slots (writeslot.lua) -----------------------------------------------------------
    def take_write_slot(self, worker: str, slots: int, lease_ms: int) -> bool:
        """One of the workload's `slots` write slots for `worker`, if one is free (or already its)."""
        k = self.keys
        keys = [k.writers_freed, *(k.write_slot(n) for n in range(1, slots + 1))]
        return self._run("writeslot", keys, [worker, "take", lease_ms]) > 0

    def give_write_slot(self, worker: str, slots: int, lease_ms: int) -> None:
        k = self.keys
        keys = [k.writers_freed, *(k.write_slot(n) for n in range(1, slots + 1))]
        self._run("writeslot", keys, [worker, "give", lease_ms])

    def wait_for_write_slot(self, timeout: float) -> bool:
        """Block until a slot is given back (or `timeout` passes); True if one was."""
        return self.client.blpop([self.keys.writers_freed], timeout) is not None

    # -- failures grouped by error (errors.lua) ----------------------------------------------
    def record_errors(self, groups: dict[str, tuple[int, list[str]]], now: float) -> None:
        """Add a batch's failures: message -> (how many, example ids)."""
        args = [round(now, 3), MAX_ERROR_GROUPS, ERROR_EXAMPLES]
        for message, (count, examples) in groups.items():
            args += [message, count, json.dumps(examples[-ERROR_EXAMPLES:])]
        self._run("errors", [self.keys.errors], args)

    def error_groups(self) -> dict[str, dict]:
        """message -> {count, first, last, examples}, as the workers recorded them."""
        groups = {}
        for message, raw in self.client.hgetall(self.keys.errors).items():
            with contextlib.suppress(ValueError):
                group = json.loads(raw)
                examples = group.get("examples")
                group["examples"] = examples if isinstance(examples, list) else []  # Lua: {} for []
                groups[message.decode(errors="replace")] = group
        return groups

    def prune_errors(self, older_than: float) -> int:
        """Forget groups not seen since `older_than` (Unix seconds); returns how many."""
        stale = [m for m, g in self.error_groups().items() if float(g.get("last", 0)) < older_than]
        if stale:
            self.client.hdel(self.keys.errors, *stale)
        return len(stale)

    # -- recovery (reclaim.lua, orphans.lua) ------------------------------------------------
    def worker_ids(self) -> list[str]:
        return sorted(w.decode() for w in self.client.smembers(self.keys.workers))

    def reclaim(self, worker: str, max_reclaims: int, groups: int) -> tuple[int, int] | None:
        """Give back what a worker held if its heartbeat expired: None if it is alive, else
        (ids reclaimed, ids set aside for quarantine)."""
        k = self.keys
        result = self._run(
            "reclaim",
            [k.heartbeat(worker), k.processing(worker), k.landing(worker), k.suspects, k.reclaims,
             k.workers, k.quarantine, k.stats],
            [worker, max_reclaims, groups],
        )  # fmt: skip
        return (int(result[0]), int(result[1])) if result else None

    def whereabouts(self, key: bytes) -> dict:
        """Where one id is in Redis (for `recheck inspect`; O(queue + workers), never in a loop):
        the due time it is in flight for, its queue position, the worker holding it, its reclaims."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(k.inflight, key)
        pipe.hget(k.reclaims, key)
        pipe.hget(k.quarantine, key)
        pipe.llen(k.queue)
        due, reclaims, quarantine, depth = pipe.execute()
        found = {"in_flight_due_ms": int(due) if due else None, "reclaims": int(reclaims or 0),
                 "set_aside_for_quarantine": quarantine is not None, "queue_depth": depth,
                 "queue_position": None, "suspect_group": False, "worker": None}  # fmt: skip
        if due is None:
            return found
        entry = key + b":" + due
        position = self.client.lpos(k.queue, entry)
        if position is not None:
            found["queue_position"] = int(position) + 1
            return found
        groups = self.client.lrange(k.suspects, 0, -1)  # reclaimed batches waiting: few, and rare
        found["suspect_group"] = any(entry in group.split(b" ") for group in groups)
        for worker in self.worker_ids():
            held = self.client.sismember(k.processing(worker), entry)
            if held or self.client.lpos(k.landing(worker), entry) is not None:
                alive = self.client.exists(k.heartbeat(worker))
                found["worker"] = {"id": worker, "alive": bool(alive)}
                break
        return found

    def pending_quarantine(self) -> dict[bytes, bytes]:
        """id -> entry of ids the reclaimer set aside to be parked in MySQL."""
        return self.client.hgetall(self.keys.quarantine)

    def forget_quarantined(self, ids: Sequence[bytes], fields: Sequence[bytes], parked: int) -> None:
        """Parked in MySQL: let go of these ids in Redis."""
        k = self.keys
        pipe = self.client.pipeline(transaction=True)
        pipe.hdel(k.inflight, *ids)
        pipe.hdel(k.quarantine, *fields)
        pipe.hdel(k.reclaims, *ids)
        pipe.hincrby(k.stats, "quarantined", parked)
        pipe.execute()

    def forget_reclaims(self, ids: Sequence[bytes]) -> None:
        """`recheck release`: released rows start with a clean record (ids as entries carry them)."""
        self.client.hdel(self.keys.reclaims, *ids)

    def scan_in_flight(self) -> Iterator[tuple[bytes, bytes]]:
        """(id, due_ms) pairs in flight (HSCAN: never blocks Redis)."""
        return self.client.hscan_iter(self.keys.inflight, count=1000)

    def release_orphans(self, candidates: Sequence[bytes], workers: Sequence[str]) -> list[bytes] | None:
        """Release the candidate (id, due) pairs that no queue, group or worker holds; None if the
        set of workers changed since the caller read it (read again and retry)."""
        k = self.keys
        held = [key for w in workers for key in (k.processing(w), k.landing(w))]
        released = self._run(
            "orphans",
            [k.inflight, k.queue, k.suspects, k.quarantine, k.stats, k.workers, *held],
            [len(candidates) // 2, *candidates, *workers],
        )
        return None if released == -1 else released

    # -- presence and status ----------------------------------------------------------------
    def presence_keys(self, role: str, member: str) -> tuple[str, str]:
        """(heartbeat key, registry) of a worker or dispatcher."""
        k = self.keys
        if role == "worker":
            return k.heartbeat(member), k.workers
        return k.dispatcher_heartbeat(member), k.dispatchers

    def publish_heartbeat(self, role: str, member: str, payload: dict, ttl_ms: int) -> int:
        """Refresh the member's heartbeat; returns how many members the registry now holds."""
        key, registry = self.presence_keys(role, member)
        pipe = self.client.pipeline(transaction=True)
        pipe.set(key, json.dumps(payload), px=ttl_ms)
        pipe.sadd(registry, member)
        pipe.scard(registry)
        return pipe.execute()[-1]

    def withdraw_heartbeat(self, role: str, member: str) -> None:
        key, registry = self.presence_keys(role, member)
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(key)
        pipe.srem(registry, member)
        pipe.execute()

    def live_heartbeats(self, registry: str, key_of: Callable[[str], str]) -> list[dict]:
        """Parsed heartbeat payloads of the members of `registry` whose heartbeat key is alive."""
        members = sorted(m.decode() for m in self.client.smembers(registry))
        if not members:
            return []
        alive = []
        for member, raw in zip(members, self.client.mget([key_of(m) for m in members]), strict=True):
            if raw is None:
                continue
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = None
            if not isinstance(payload, dict):
                payload = {}  # a heartbeat we cannot read still counts as alive
            payload.setdefault("id", member)
            alive.append(payload)
        return alive

    def live_workers(self) -> list[dict]:
        return self.live_heartbeats(self.keys.workers, self.keys.heartbeat)

    def live_dispatchers(self) -> list[dict]:
        return self.live_heartbeats(self.keys.dispatchers, self.keys.dispatcher_heartbeat)

    def shared_sample(self) -> dict | None:
        """The freshness sample another process took less than its TTL ago, if any."""
        raw = self.client.get(self.keys.freshness)
        try:
            sample = json.loads(raw) if raw else None
        except ValueError:
            return None
        return sample if isinstance(sample, dict) else None

    def share_sample(self, sample: dict, ttl_ms: int) -> None:
        self.client.set(self.keys.freshness, json.dumps(sample), px=ttl_ms)

    def overview(self) -> Overview:
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(k.queue)
        pipe.llen(k.suspects)
        pipe.hlen(k.inflight)
        pipe.hgetall(k.stats)
        pipe.get(k.leader)
        depth, suspects, inflight, stats, leader = pipe.execute()
        counters = {name.decode(): int(value) for name, value in sorted(stats.items())}
        return Overview(depth, suspects, inflight, counters, leader.decode() if leader else None)

    # -- whole-prefix housekeeping (benchmarks) ---------------------------------------------
    def clear(self) -> None:
        """Delete every key under this prefix."""
        found = list(self.client.scan_iter(match=self.keys.all_prefixed(), count=1000))
        for start in range(0, len(found), DELETE_CHUNK):
            self.client.delete(*found[start : start + DELETE_CHUNK])

    def drop_transit(self) -> None:
        """Forget the queue and the in-flight set (a benchmark resetting between measurements)."""
        self.client.delete(self.keys.queue, self.keys.inflight)
