"""One workload's state spread over several partitions, behind the Store interface.

A workload with `partitions = K` has K sets of keys (shared/keys.py), each with its own hash
tag, so on a Redis Cluster its queue, in-flight set and counters spread over the masters. Each
partition is an ordinary Store running the same scripts; this class routes each call:

- pushes and acknowledgements by the id in each entry (shared/partitions.py), one script call
  per partition touched (a page of 2,000 ids is split, never sent id by id);
- takes visit the partitions in turn, starting one further each time, so no partition is
  favoured, and fill up from the next partitions when the first has too few;
- heartbeats and guards go to every partition (each partition's reclaimer and scripts read
  their own keys); counts and listings are summed or read from the first partition.

The dispatcher's leader lease is every partition's lease: the dispatcher holding the first
partition's takes the others, and any other holder of a later partition's gives it up, so a
handover never leaves two dispatchers each holding half. Every push still checks its own
partition's lease inside its script.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence

import redis

from shared.config import Settings
from shared.keys import Keys
from shared.partitions import partition_of, rotation, split_by_partition
from shared.store import Counts, Overview, Pushed, Store, Taken


def open_store(client: redis.Redis, settings: Settings) -> Store | PartitionedStore:
    """The store of a workload: a plain Store, or one over its partitions."""
    if settings.partitions == 1:
        return Store(client, Keys.of(settings))
    return PartitionedStore(client, Keys.every_partition(settings))


class PartitionedStore:
    def __init__(self, client: redis.Redis, keys: list[Keys]):
        self.client = client
        self.parts = [Store(client, k) for k in keys]
        self.keys = keys[0]  # names for logs and status (the first partition's)
        self.count = len(keys)
        self._next = itertools.count()  # where the next take starts
        self._delivered: int | None = None  # the partition a blocking wait just delivered from
        self._groups_at: set[int] = set()  # partitions seen holding reclaimed groups
        self._lock = threading.Lock()

    def _part(self, entry: bytes) -> Store:
        return self.parts[partition_of(entry, self.count)]

    def _split(self, entries: Sequence[bytes]) -> dict[int, list[bytes]]:
        return split_by_partition(entries, self.count)

    def _start(self) -> int:
        """Where the next take starts: where a wait just delivered, else where reclaimed groups
        were seen waiting (a group is taken only at the start of a take: it must not wait for
        the rotation to come round), else one further each time."""
        with self._lock:
            delivered, self._delivered = self._delivered, None
            if delivered is not None:
                return delivered
            if self._groups_at:
                return self._groups_at.pop()
            return next(self._next) % self.count

    # -- dispatching ------------------------------------------------------------------------
    def push(self, owner: str, entries: Sequence[bytes]) -> Pushed:
        """Each partition's entries through its own dedup script; refused (-1) if any partition's
        lease is not `owner`'s (what was pushed elsewhere stays: those rows are due)."""
        pushed, depth, lost, refused = 0, 0, False, False
        for index, part_entries in self._split(entries).items():
            result = self.parts[index].push(owner, part_entries)
            refused |= result.pushed < 0
            pushed += max(result.pushed, 0)
            depth += result.depth
            lost |= result.lost
        return Pushed(-1 if refused else pushed, depth, lost)

    def queue_depth(self) -> int:
        return sum(self._each(lambda pipe, k: pipe.llen(k.queue)))

    def _each(self, command: Callable) -> list:
        """One plain command per partition, pipelined (a cluster client sends each to its node)."""
        pipe = self.client.pipeline(transaction=False)
        for part in self.parts:
            command(pipe, part.keys)
        return pipe.execute()

    def highest_in_flight_due(self) -> int | None:
        dues = [due for due in (p.highest_in_flight_due() for p in self.parts) if due is not None]
        return max(dues, default=None)

    def begin_guard(self, name: str, ttl_ms: int) -> None:
        for part in self.parts:
            part.begin_guard(name, ttl_ms)

    def end_guard(self, name: str) -> None:
        for part in self.parts:
            part.end_guard(name)

    # -- the leader lease ---------------------------------------------------------------------
    def hold_lease(self, owner: str, ttl_ms: int) -> str | None:
        """Whoever holds the first partition's lease leads: it takes (or renews) the others in
        order and stops at one held by someone else; a dispatcher that does not hold the first
        gives back any later one it holds. Returns the owner only if it holds all of them."""
        first = self.parts[0].hold_lease(owner, ttl_ms)
        if first != owner:
            for part in self.parts[1:]:
                part.release_lease(owner)
            return first
        for part in self.parts[1:]:
            holder = part.hold_lease(owner, ttl_ms)
            if holder != owner:
                return holder  # its old holder gives it back at its next beat, or its TTL ends
        return owner

    def lease_holder(self) -> str | None:
        return self.parts[0].lease_holder()

    def release_lease(self, owner: str) -> None:
        for part in reversed(self.parts):  # the first last: nobody takes it while others are held
            part.release_lease(owner)

    # -- a worker's entries -------------------------------------------------------------------
    def take(self, worker: str, limit: int) -> Taken:
        """Up to `limit` entries from the partitions in turn, filled from the next ones when the
        first has too few (each partition's queue holds about 1/K of the high water, so one
        partition alone would keep takes, and write-backs, small). A reclaimed group is taken
        alone, only as the start of a take."""
        if limit == 0:  # what blocking waits delivered, in every partition
            return Taken(False, [e for part in self.parts for e in part.take(worker, 0).entries])
        taken: list[bytes] = []
        for index in rotation(self._start(), self.count):
            suspect, entries, waiting = self.parts[index].take(worker, limit - len(taken), groups=not taken)
            if waiting:
                with self._lock:
                    self._groups_at.add(index)
            if suspect:
                return Taken(True, entries)
            taken += entries
            if len(taken) >= limit:
                break
        return Taken(False, taken)

    def wait_for_work(self, worker: str, timeout: float) -> bool:
        """Block on each partition's queue in turn for a share of `timeout` (a blocking move
        names one queue, and a cluster's partitions live on different servers)."""
        share = max(timeout / self.count, 0.01)
        start = self._start()
        waited = 0.0
        for index in itertools.cycle(rotation(start, self.count)):
            if self.parts[index].wait_for_work(worker, share):
                with self._lock:
                    self._delivered = index
                return True
            waited += share
            if waited >= timeout:
                return False
        return False

    def held(self, worker: str) -> set[bytes]:
        return set().union(*(part.held(worker) for part in self.parts))

    def held_count(self, worker: str) -> int:
        return sum(self._each(lambda pipe, k: pipe.scard(k.processing(worker))))

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
        """Each partition's share in its own script call; the counts are added once, with the
        first partition touched (status sums every partition's counters)."""
        done_by, deferred_by, back_by = self._split(done), self._split(deferred), self._split(back)
        touched = sorted(set(done_by) | set(deferred_by) | set(back_by)) or [0]
        still_held = 0
        for position, index in enumerate(touched):
            still_held += self.parts[index].acknowledge(
                worker, done_by.get(index, []), back_by.get(index, []),
                counts if position == 0 else Counts(), whole=whole, deferred=deferred_by.get(index, []),
            )  # fmt: skip
        return still_held

    # -- write slots and failures grouped by error: kept in the first partition ---------------
    def take_write_slot(self, worker: str, slots: int, lease_ms: int) -> bool:
        return self.parts[0].take_write_slot(worker, slots, lease_ms)

    def give_write_slot(self, worker: str, slots: int, lease_ms: int) -> None:
        self.parts[0].give_write_slot(worker, slots, lease_ms)

    def wait_for_write_slot(self, timeout: float) -> bool:
        return self.parts[0].wait_for_write_slot(timeout)

    def record_errors(self, groups: dict[str, tuple[int, list[str]]], now: float) -> None:
        self.parts[0].record_errors(groups, now)

    def error_groups(self) -> dict[str, dict]:
        return self.parts[0].error_groups()

    def prune_errors(self, older_than: float) -> int:
        return self.parts[0].prune_errors(older_than)

    # -- recovery: the dispatcher's jobs go through `parts` one by one --------------------------
    def worker_ids(self) -> list[str]:
        return self.parts[0].worker_ids()

    def whereabouts(self, key: bytes) -> dict:
        found = self._part(key).whereabouts(key)
        found["queue_depth"] = self.queue_depth()
        return found

    def forget_reclaims(self, ids: Sequence[bytes]) -> None:
        for index, part_ids in self._split(ids).items():
            self.parts[index].forget_reclaims(part_ids)

    def scan_in_flight(self) -> Iterator[tuple[bytes, bytes]]:
        for part in self.parts:
            yield from part.scan_in_flight()

    # -- presence and status ------------------------------------------------------------------
    def presence_keys(self, role: str, member: str) -> tuple[str, str]:
        return self.parts[0].presence_keys(role, member)

    def publish_heartbeat(self, role: str, member: str, payload: dict, ttl_ms: int) -> int:
        """In every partition: each partition's reclaimer reads its own heartbeat keys."""
        counts = [part.publish_heartbeat(role, member, payload, ttl_ms) for part in self.parts]
        return counts[0]

    def withdraw_heartbeat(self, role: str, member: str) -> None:
        for part in self.parts:
            part.withdraw_heartbeat(role, member)

    def live_workers(self) -> list[dict]:
        return self.parts[0].live_workers()

    def live_dispatchers(self) -> list[dict]:
        return self.parts[0].live_dispatchers()

    def shared_sample(self) -> dict | None:
        return self.parts[0].shared_sample()

    def share_sample(self, sample: dict, ttl_ms: int) -> None:
        self.parts[0].share_sample(sample, ttl_ms)

    def overview(self) -> Overview:
        """Queue, groups, in flight and counters summed over the partitions."""
        views = [part.overview() for part in self.parts]
        counters: dict[str, int] = {}
        for view in views:
            for name, value in view.counters.items():
                counters[name] = counters.get(name, 0) + value
        return Overview(
            sum(v.queue_depth for v in views), sum(v.suspects for v in views),
            sum(v.in_flight for v in views), dict(sorted(counters.items())), views[0].leader,
        )  # fmt: skip

    def clear(self) -> None:
        for part in self.parts:
            part.clear()

    def drop_transit(self) -> None:
        for part in self.parts:
            part.drop_transit()
