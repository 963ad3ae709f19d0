"""recheck's state in Redis: every script call and every plain read or write of its keys.

This is the only code that knows the KEYS/ARGV order of the Lua scripts in lua/ (each script's
header documents it) and which key each operation touches; the roles call methods named for
what they do. A workload is always K >= 1 partitions (keys.py: each its own set of keys under
one hash tag, so every script runs on one Redis Cluster node), and every operation is written
once, over them:

- pushes and acknowledgements go by the id in each entry (shared/core/partitions.py), one script call per
  partition touched (a page of 2,000 ids is split, never sent id by id; with K = 1 the split is
  the list itself);
- takes visit the partitions in turn, starting one further each time, so no partition is
  favoured, and fill up from the next partitions when the first has too few;
- heartbeats and guards go to every partition (each partition's reclaimer and scripts read
  their own keys); counts and listings are summed; write slots, error groups and the shared
  freshness sample live in the first partition;
- the dispatcher's leader lease is every partition's lease: the dispatcher holding the first
  partition's takes the others, and any other holder of a later partition's gives it up, so a
  handover never leaves two dispatchers each holding half. Every push still checks its own
  partition's lease inside its script;
- the reconciler's jobs (reclaim, quarantine, orphans) work one partition at a time: their
  methods take the partition's number.

Each script is prefixed with _lib.lua (small helpers), its parts inlined (scripts.py), and
registered once per client; redis-py runs it with EVALSHA and reloads it transparently after a
Redis restart empties the cache.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, NamedTuple, TypeVar

import redis.cluster

from recheck.shared.config import Workload
from recheck.shared.core.entries import make_entry_text
from recheck.shared.core.limits import NO_LIMIT, GroupLimit, PartLimit, partition_limits
from recheck.shared.core.partitions import partition_of, rotation, split_by_partition
from recheck.shared.core.records import DispatcherBeat, WorkerBeat
from recheck.shared.policies.ordering import FIFO, Ordering, ordering_of
from recheck.shared.redis.connection import RedisClient
from recheck.shared.redis.keys import Keys
from recheck.shared.redis.scripts import script_source

B = TypeVar("B", WorkerBeat, DispatcherBeat)
T = TypeVar("T")

DIED_ALONE = 1 << 20  # reclaims count: deaths + DIED_ALONE * deaths alone (reclaim.lua)
SCRIPT_NAMES = (
    "dispatch", "take_fifo", "take_priority", "take_grouped", "settle", "ack", "reclaim", "orphans", "lease",
    "renew", "errors", "writeslot", "forget",
)  # fmt: skip
DELETE_CHUNK = 1000
STOPPING_TTL_MS = 60_000  # a stopping worker's token outlives its graceful stop (Store.wake_stopping)
LIST_CHUNK = 10_000  # items per LRANGE or ZRANGE of a scan that must not block Redis
GROUP_CHUNK = 1_000  # groups' lists per pipeline of such a scan, and entries read from each at once
NAME_SHOWN = 60  # characters of a group's name shown at most (status, logs)
NULL_GROUP = "NULL"  # the group of rows whose group column is NULL (queries.sql; never hex)
DROPPED_TTL_MS = 86_400_000  # as dispatch.lua's: a dropped entry nobody takes is forgotten after a day
CANCEL_TTL_MS = 60_000  # a cancel mark no worker needed (its check had ended) lapses after a minute
MAX_ERROR_GROUPS = 50  # distinct error messages kept per workload (errors.lua)
ERROR_EXAMPLES = 5  # example ids kept per message


class GroupOverview(NamedTuple):
    waiting: int  # groups with rows waiting in Redis
    at_rate: int  # of them, held back by group_rate_limit now
    at_room: int  # of them, held back by group_max_in_flight now
    biggest: list[tuple[str, int]]  # (group, rows waiting) of the biggest few held back
    open_count: int = 0  # groups whose breaker is open (group_breaker_failures)
    open: tuple[str, ...] = ()  # the first few of them


class Pushed(NamedTuple):
    pushed: int  # ids that were not in flight and went to the queue; -1: not the lease holder
    depth: int  # queue length afterwards
    lost: bool  # the epoch key was missing: Redis lost its data before this push


class Taken(NamedTuple):
    suspect: bool  # a group of reclaimed entries, taken alone
    entries: list[bytes]
    groups_waiting: int = 0  # reclaimed groups still waiting in this queue's partition
    # The workload's limits held this take back: seconds until the rate limit has tokens again,
    # ROOM_WAIT if max_in_flight checks are running, 0 if nothing held it back.
    limited: float = 0.0
    group: str = ""  # a grouped workload's group whose own limits held the take back (its value)
    # A take that found nothing: the ordering the leader settled the lists for, when it is not
    # this store's (the worker's settings and the dispatcher's differ); "" otherwise.
    settled: str = ""


def group_name(hexed: bytes | str) -> str:
    """A group's value as the group lists spell it (hex of its bytes) made readable: the text
    when it is printable UTF-8, else quoted (the text "NULL", "" or control characters) or 0x and
    the hex; NULL (unquoted) for rows whose group column is NULL."""
    text = hexed.decode() if isinstance(hexed, bytes) else hexed
    if text == NULL_GROUP:
        return "NULL"
    try:
        name = bytes.fromhex(text).decode()
    except (ValueError, UnicodeDecodeError):
        name = "0x" + text.lower()
    if name in ("", NULL_GROUP) or not name.isprintable():  # told from NULL, no terminal escapes
        name = json.dumps(name)
    return name if len(name) <= NAME_SHOWN else name[: NAME_SHOWN - 3] + "..."


ROOM_WAIT = -1.0  # Taken.limited: max_in_flight checks are running; wait until some end


class Counts(NamedTuple):
    """What an acknowledgement adds to the shared counters."""

    checked: int = 0
    failed: int = 0
    stale: int = 0
    malformed: int = 0
    deferred: int = 0
    gone: int = 0  # rows deleted between dispatch and check: nothing to check or write


class Acked(NamedTuple):
    """What an acknowledgement did: finished entries the worker still held, and the groups whose
    breaker it opened, closed, or kept open after a failed probe (their names as shown)."""

    still_held: int
    opened: list[str]
    closed: list[str]
    kept_open: list[str]
    # Entries a take could get right after this ack (queue, priority queue, suspects); None when
    # the ack cannot tell: a grouped workload (its groups' lists), or partitions it did not touch.
    waiting: int | None = None


class Settled(NamedTuple):
    """What settling the lists for the leader's ordering did (Store.settle)."""

    before: str  # the ordering they were settled for ("": none recorded)
    now: str
    moved: int  # entries moved to this ordering's lists
    released: int  # entries released and asked for again (pushed anew, with their groups)

    @property
    def changed(self) -> bool:
        return self.before != self.now


class ReclaimLook(NamedTuple):
    """What the reclaimer reads of a partition before it reclaims anything (Store.reclaim_look)."""

    gone: list[str]  # registered workers whose heartbeat has expired, in order
    pending: dict[bytes, bytes]  # id -> entry of ids set aside to be parked in MySQL


class Overview(NamedTuple):
    queue_depth: int
    suspects: int
    in_flight: int
    counters: dict[str, int]
    leader: str | None
    priority_depth: int = 0  # of queue_depth, entries in the priority list


class StatusReads(NamedTuple):
    """What a status sample reads from Redis (Store.status_reads)."""

    workers: list[WorkerBeat]
    dispatchers: list[DispatcherBeat]
    overview: Overview
    errors: dict[str, dict[str, Any]]  # as Store.error_groups
    shared_freshness: dict[str, Any] | None  # the sample another process shared (share_sample), if any


def _alive(members: list[str], raws: list[Any], record: type[B]) -> list[B]:
    """The heartbeats of `members` (their keys' values, `raws`, in the same order) whose key is
    alive; one we cannot read still counts as alive, with every field's default but its id."""
    alive = []
    for member, raw in zip(members, raws, strict=True):
        if raw is None:
            continue
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = None
        beat = record.from_json(payload)
        alive.append(beat if beat.id != "?" else record.from_json(payload, id=member))
    return alive


def _sample_from(raw: bytes | None) -> dict[str, Any] | None:
    """A shared freshness sample as stored (None: none, or not one we can read)."""
    try:
        sample = json.loads(raw) if raw else None
    except ValueError:
        return None
    return sample if isinstance(sample, dict) else None


def _error_groups_from(raw: dict[bytes, bytes]) -> dict[str, dict[str, Any]]:
    """The error groups' hash as stored -> message -> {count, first, last, examples}."""
    groups = {}
    for message, value in raw.items():
        with contextlib.suppress(ValueError):
            group = json.loads(value)
            examples = group.get("examples")
            group["examples"] = examples if isinstance(examples, list) else []  # Lua: {} for []
            groups[message.decode(errors="replace")] = group
    return groups


def open_store(client: RedisClient, workload: Workload, clock: Callable[[], int] | None = None) -> Store:
    """The store of a workload, over its partitions (one when it is not partitioned), keeping
    its rate_limit and max_in_flight; clock: a test's, in microseconds (Store)."""
    limits = partition_limits(workload.rate_limit, workload.max_in_flight, workload.partitions)
    return Store(client, Keys.every_partition(workload), limits, ordering_of(workload), clock=clock)


def in_chunks(read: Callable[[int, int], list[bytes]], size: int = LIST_CHUNK) -> Iterator[list[bytes]]:
    """A list (or sorted set) `size` items at a time from its tail to its head: read(start, stop)
    is an LRANGE (or ZRANGE: negative, inclusive indices), a short command each, until one comes
    back short. From the tail because takes pop at the head: a pop between two reads moves nothing
    the reads have yet to reach, where from the head it would shift an unread entry behind the
    next read; a push at the tail only makes a read see some entries again."""
    for stop in itertools.count(-1, -size):
        chunk = read(stop - size + 1, stop)
        if chunk:
            yield chunk
        if len(chunk) < size:
            return


def by_client(items: Sequence[T], store_of: Callable[[T], Store]) -> list[list[T]]:
    """The items grouped by the Redis client of their store, in their order: one pipeline each
    (a process's workloads usually share one client)."""
    groups: dict[int, list[T]] = {}
    for item in items:
        groups.setdefault(id(store_of(item).client), []).append(item)
    return list(groups.values())


def soonest(waits: list[float]) -> float:
    """The shortest of the partitions' waits (a rate wait in seconds, else ROOM_WAIT); 0 if none."""
    timed = [wait for wait in waits if wait > 0]
    return min(timed) if timed else (ROOM_WAIT if waits else 0.0)


class Store:
    def __init__(
        self,
        client: RedisClient,
        partitions: Keys | list[Keys],
        limits: list[PartLimit] | None = None,
        ordering: Ordering = FIFO,
        clock: Callable[[], int] | None = None,
    ):
        self.client = client
        # The limits' clock, in microseconds: a test's (the scripts take it as an argument);
        # None, always outside tests: the Redis clock, one for every worker's host.
        self.clock = clock
        # The order rows are taken in: its take script, and what it is given (shared/policies).
        self.ordering = ordering
        share = ordering.rest_share
        # The rest's share of takes while priority rows wait (take_priority.lua); "": none.
        self.priority_share = "" if share is None else repr(float(share))
        # A grouped workload's limits per group (group_column, docs/groups.md); None: not grouped.
        self.groups = ordering.group_limit
        self.partitions = [partitions] if isinstance(partitions, Keys) else list(partitions)
        self.limits = limits or [NO_LIMIT] * len(self.partitions)
        self.keys = self.partitions[0]  # names for logs and status; where the one-per-workload keys live
        self.count = len(self.partitions)
        self._scripts = {name: client.register_script(script_source(name)) for name in SCRIPT_NAMES}
        # A cluster keeps each workload's keys in a slot of their own: no script spans two.
        self.on_cluster = isinstance(client, redis.cluster.RedisCluster)
        self._next = itertools.count()  # where the next take starts
        self._delivered: int | None = None  # the partition a blocking wait just delivered from
        # Pushes this object has made (counted once each has run): only pushes add to the in-flight
        # hash, so an idle reclaimer that saw it empty need not read it again until this changes.
        self.pushes = 0
        self._groups_at: set[int] = set()  # partitions seen holding reclaimed groups
        self._lock = threading.Lock()

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """A Lua script's reply: nested lists of integers and bytes, as its header says."""
        return self._scripts[name](keys=list(keys), args=list(args), client=self.client)

    def _now(self) -> str:
        """The time a script is given: the test's clock, in microseconds; "" (always, outside
        tests): the script reads the Redis clock, the one clock every host shares."""
        return "" if self.clock is None else str(self.clock())

    def _each(self, command: Callable[[Any, Keys], Any]) -> list[Any]:
        """One plain command per partition, pipelined (a cluster client sends each to its node)."""
        if self.count == 1:
            return [command(self.client, self.keys)]
        pipe = self.client.pipeline(transaction=False)
        for keys in self.partitions:
            command(pipe, keys)
        replies: list[Any] = pipe.execute()
        return replies

    def partition_of(self, entry: bytes) -> int:
        """The partition of an entry (or of an id as entries spell it)."""
        return partition_of(entry, self.count)

    def _split(self, entries: Sequence[bytes]) -> dict[int, list[bytes]]:
        return split_by_partition(entries, self.count)

    # -- dispatching (dispatch.lua) ---------------------------------------------------------
    def push(
        self, owner: str, entries: Sequence[bytes], head: bool = False, priority: bool = False
    ) -> Pushed:
        """Queue entries whose id is not in flight, each through its partition's dedup script, if
        `owner` holds the lease there; refused (-1) if any partition's lease is not `owner`'s
        (what was pushed elsewhere stays: those rows are due). head: before whatever waits;
        priority: to the priority list (its depth is the one returned)."""
        pushed, depth, lost, refused = 0, 0, False, False
        mode = "head" if head else "priority" if priority else "tail"
        try:
            for index, part_entries in self._split(entries).items():
                k = self.partitions[index]
                keys = [k.queue, k.inflight, k.stats, k.epoch, k.leader, k.completed, k.again, k.dropped]
                result = self._run(
                    "dispatch",
                    [*keys, k.priority_queue, *k.group_keys(), k.workers],
                    [owner, mode, self._now(), *part_entries],
                )
                refused |= int(result[0]) < 0
                pushed += max(int(result[0]), 0)
                depth += int(result[1])
                lost |= bool(result[2])
        finally:  # after the scripts ran (or may have: a lost reply), never before
            self.pushes += 1
        return Pushed(-1 if refused else pushed, depth, lost)

    def queue_depth(self, priority: bool | None = None) -> int:
        """Entries waiting: in the priority list (True), the other (False), or both (None), in one
        round trip; a grouped workload's, in its groups' lists (their priority lists for True) and
        the queue."""
        pipe = self.client.pipeline(transaction=False)
        if self.groups is not None:
            pipe.get(self.keys.groups_waiting)
            pipe.get(self.keys.groups_urgent_waiting)
            pipe.llen(self.keys.queue)
            waiting, urgent, queued = (int(n or 0) for n in pipe.execute())
            return {True: urgent, False: waiting - urgent + queued, None: waiting + queued}[priority]
        for k in self.partitions:
            for name in {True: [k.priority_queue], False: [k.queue], None: [k.queue, k.priority_queue]}[
                priority
            ]:
                pipe.llen(name)
        return sum(pipe.execute())

    def head_depth(self) -> int:
        """Entries waiting in the list a head push (`now`) goes to: the priority list while it
        holds entries, else the other (dispatch.lua); a grouped workload's as queue_depth."""
        if self.groups is not None:
            return self.queue_depth()
        pipe = self.client.pipeline(transaction=False)
        for k in self.partitions:
            pipe.llen(k.priority_queue)
            pipe.llen(k.queue)
        lengths = pipe.execute()
        return sum(priority or rest for priority, rest in zip(lengths[::2], lengths[1::2], strict=True))

    def highest_in_flight_due(self) -> int | None:
        """The latest due time (ms) among ids in flight, or None if nothing is in flight."""
        dues = [
            int(due) for values in self._each(lambda client, k: client.hvals(k.inflight)) for due in values
        ]
        return max(dues, default=None)  # only after a rewind: rare

    def _guard_key(self, keys: Keys, name: str) -> str:
        return {"sweep": keys.sweep_guard, "dispatch": keys.dispatch_guard, "asked": keys.asked_guard}[name]

    def begin_guard(self, name: str, ttl_ms: int) -> None:
        """A pass rereading rows that may be in flight starts: acks record what completes."""
        self._each(lambda client, k: client.set(self._guard_key(k, name), 1, px=ttl_ms))

    def end_guard(self, name: str) -> None:
        self._each(lambda client, k: client.delete(self._guard_key(k, name)))

    # -- the leader lease (lease.lua) -------------------------------------------------------
    def _lease(self, keys: Keys, owner: str, ttl_ms: int, action: str) -> str | None:
        holder = self._run("lease", [keys.leader], [owner, ttl_ms, action])
        return holder.decode() if holder else None

    def hold_lease(self, owner: str, ttl_ms: int) -> str | None:
        """Renew the lease if `owner` holds it, take it if free; returns the holder afterwards.
        Whoever holds the first partition's lease leads: it takes (or renews) the others in order
        and stops at one held by someone else; a dispatcher that does not hold the first gives
        back any later one it holds. Returns the owner only if it holds all of them."""
        first = self._lease(self.keys, owner, ttl_ms, "hold")
        if first != owner:
            for keys in self.partitions[1:]:
                self._lease(keys, owner, 0, "release")
            return first
        for keys in self.partitions[1:]:
            holder = self._lease(keys, owner, ttl_ms, "hold")
            if holder != owner:
                return holder  # its old holder gives it back at its next beat, or its TTL ends
        return owner

    @staticmethod
    def renew_leases(stores: Sequence[Store], owner: str, ttl_ms: int) -> list[str | None]:
        """Each store's lease renewed if `owner` holds it, taken again if it lapsed with nobody
        taking it (renew.lua: for leases the caller believes it holds, as hold_lease renews); the
        holder of each afterwards, in order. One script call per Redis client for all of them; on a cluster
        one per store, whose keys live in a slot of their own. Single-partition stores only
        (hold_lease also takes a partitioned workload's later leases)."""
        holders: dict[int, str | None] = {}
        for group in by_client(stores, lambda store: store):
            calls = [[store] for store in group] if group[0].on_cluster else [group]
            for call in calls:
                assert all(store.count == 1 for store in call), "renew_leases: single-partition stores only"
                replies = call[0]._run("renew", [store.keys.leader for store in call], [owner, ttl_ms])
                for store, holder in zip(call, replies, strict=True):
                    holders[id(store)] = holder.decode() if holder else None
        return [holders[id(store)] for store in stores]

    def lease_holder(self) -> str | None:
        """Who holds the leader lease now (None: it is free)."""
        holder = self.client.get(self.keys.leader)
        return holder.decode() if holder else None

    def lease_holders(self) -> list[str | None]:
        """The holder of each partition's lease (a handover shows here)."""
        return [h.decode() if h else None for h in self._each(lambda client, k: client.get(k.leader))]

    def release_lease(self, owner: str) -> None:
        for keys in reversed(self.partitions):  # the first last: nobody takes it while others are held
            self._lease(keys, owner, 0, "release")

    def settle(self, owner: str) -> Settled | None:
        """Make each partition's lists right for this store's ordering (settle.lua): the leader,
        once it holds the lease and before it pushes, then every few seconds. Entries in lists
        this ordering's take does not read (an older configuration's, or given back by a worker
        whose settings differ) are moved where it reads them, or released and asked for again
        (going to groups); up to 10,000 entries a script call, called again until done; a few
        reads when there are none. None if `owner` does not hold a partition's lease (nothing
        moved there)."""
        o = self.ordering
        args = [o.name, "1" if o.priority_by else "", "1" if o.group_by else "", owner]
        moved = released = 0
        before = ""
        for k in self.partitions:
            keys = [
                k.ordering, k.queue, k.priority_queue, k.turns, k.inflight, k.again, k.asked, k.dropped,
                k.group_rates, k.leader, *k.group_keys(),
            ]  # fmt: skip
            while True:
                part_moved, part_released, done, was = self._run("settle", keys, args)
                if part_moved < 0:
                    return None
                moved, released = moved + part_moved, released + part_released
                before = before or was.decode()
                if done:
                    break
        return Settled(before, o.name, moved, released)

    # -- a worker's entries (take_*.lua, ack.lua) ---------------------------------------------
    def _take_part(
        self,
        index: int,
        worker: str,
        limit: int,
        groups: bool = True,
        running: int = 0,
        ended: Sequence[bytes] = (),
    ) -> Taken:
        k = self.partitions[index]
        keys = [
            k.suspects, k.processing(worker), k.rate, k.running, k.workers, k.dropped, k.inflight, k.again,
            k.asked, k.wake, k.ordering,
        ]  # fmt: skip
        args: list[str | int | bytes] = [limit, int(not groups), *self.limits[index].args(), worker, running]
        args += [self._now(), self.ordering.name]
        script = self.ordering.take_script
        if script == "take_fifo":
            keys.append(k.queue)
        elif script == "take_priority":
            keys += [k.queue, k.priority_queue, k.turns]
            args.append(self.priority_share)
        else:
            keys += [*k.group_keys(), k.group_rates, k.turns, k.group_rates_emptied]
            args += [self.priority_share, *(self.groups or GroupLimit()).args(), *ended]
        suspect, entries, waiting, wait_ms, group, settled = self._run(script, keys, args)
        wait_ms = int(wait_ms)
        limited = ROOM_WAIT if wait_ms < 0 else wait_ms / 1000
        shown = group_name(group[1:]) if limited and group else ""
        return Taken(bool(suspect), entries, int(waiting), limited, shown, settled.decode())

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

    def take(self, worker: str, limit: int, running: int = 0, ended: Sequence[bytes] = ()) -> Taken:
        """Up to `limit` entries (a reclaimed group, alone, first) into the worker's processing
        set, from the partitions in turn, filled from the next ones when the first has too few
        (each partition's queue holds about 1/K of the high water, so one partition alone would
        keep takes, and write-backs, small). running: checks the worker is running now
        (max_in_flight counts them). Within the workload's limits; `limited` says how long to
        wait when they held the take back. ended: held entries whose checks ended (a grouped
        workload, one partition): their groups' room is given back first (take_grouped.lua), at
        most a take's worth (1,000) a call. Each partition's take runs the script of the
        workload's ordering (Ordering.take_script)."""
        if self.count == 1:
            return self._take_part(0, worker, limit, running=running, ended=ended)
        taken: list[bytes] = []
        waits: list[float] = []
        settled = ""
        for index in rotation(self._start(), self.count):
            suspect, entries, waiting, limited, _, differs = self._take_part(
                index, worker, limit - len(taken), groups=not taken, running=running
            )
            settled = settled or differs
            if limited:
                waits.append(limited)
            if waiting:
                with self._lock:
                    self._groups_at.add(index)
            if suspect:
                return Taken(True, entries)
            taken += entries
            if len(taken) >= limit:
                break
        return Taken(False, taken, limited=soonest(waits) if not taken else 0.0, settled=settled)

    def wait_for_work(self, worker: str, timeout: float) -> bool:
        """Block until a wake token says work is waiting (the scripts push one when they queue
        entries for an idle worker: _lib.lua group_wake); False on timeout, or at once once the
        worker stops (wake_stopping). With several partitions, on each partition's token list in
        turn for a share of `timeout` (a cluster's partitions live on different servers). A token
        only wakes: the take that follows moves the entries, so a worker that dies between the
        two holds nothing."""
        share = max(timeout / self.count, 0.01)
        waited = 0.0
        for index in itertools.cycle(rotation(self._start(), self.count)):
            k = self.partitions[index]
            stopping = k.stopping(worker)
            reply = self.client.blpop([k.wake, stopping], share)
            if reply is not None and reply[0] == stopping.encode():
                pipe = self.client.pipeline(transaction=False)
                self._stopping_token(pipe, stopping)  # for this worker's next wait, if any
                pipe.execute()
                return False
            if reply is not None:
                with self._lock:
                    self._delivered = index
                return True
            waited += share
            if waited >= timeout:
                return False
        return False

    def wake_stopping(self, worker: str) -> None:
        """A stopping worker's token in every partition: its lanes blocked in wait_for_work end
        their waits at once (each takes it and puts it back, for the next wait)."""
        pipe = self.client.pipeline(transaction=False)
        for k in self.partitions:
            self._stopping_token(pipe, k.stopping(worker))
        pipe.execute()

    @staticmethod
    def _stopping_token(pipe: Any, key: str) -> None:
        """Queue on `pipe` a stop's token in `key`, which expires STOPPING_TTL_MS later (also when
        the token is put back: the pop that took the last one deleted the key and its TTL)."""
        pipe.rpush(key, b"1")
        pipe.pexpire(key, STOPPING_TTL_MS)

    def held(self, worker: str) -> set[bytes]:
        return set().union(*self._each(lambda client, k: client.smembers(k.processing(worker))))

    def held_count(self, worker: str) -> int:
        return sum(self._each(lambda client, k: client.scard(k.processing(worker))))

    def held_in_each(self, worker: str) -> list[int]:
        """What a worker holds in each partition: its processing set and landing list."""
        pipe = self.client.pipeline(transaction=False)
        for k in self.partitions:
            pipe.scard(k.processing(worker))
            pipe.llen(k.landing(worker))
        counts = pipe.execute()
        return [counts[i] + counts[i + 1] for i in range(0, len(counts), 2)]

    def heartbeat_gone(self, worker: str) -> bool:
        """The worker's heartbeat has expired (in the first partition: every partition's is set
        together, and reclaim.lua checks its own partition's again)."""
        return not self.client.exists(self.keys.heartbeat(worker))

    def acknowledge(
        self,
        worker: str,
        done: Sequence[bytes],
        back: Sequence[bytes],
        counts: Counts,
        *,
        whole: bool,
        deferred: Sequence[bytes] = (),
        failed: Sequence[bytes] = (),
    ) -> Acked:
        """Release finished and deferred entries still held, return untouched ones to the queue
        head, add the counts, each partition's share in its own script call (the counts go with
        the first partition touched: status sums every partition's counters). `whole`: these are
        all the worker holds (lets Redis skip the membership test). `failed`: the finished
        entries whose checks failed, which a grouped workload's breaker counts."""
        done_by, deferred_by, back_by = self._split(done), self._split(deferred), self._split(back)
        touched = sorted(set(done_by) | set(deferred_by) | set(back_by)) or [0]
        breaker = self.groups.breaker_arg() if self.groups is not None else ""
        failing = set(failed) if breaker else set()
        acked = Acked(0, [], [], [], 0 if self.groups is None and len(touched) == self.count else None)
        for position, index in enumerate(touched):
            k, finished = self.partitions[index], done_by.get(index, [])
            if failing:  # the failed ones first, as ack.lua takes them
                finished = [e for e in finished if e in failing] + [e for e in finished if e not in failing]
            held_up, untouched = deferred_by.get(index, []), back_by.get(index, [])
            added = counts if position == 0 else Counts()
            held, opened, closed, kept, waiting = self._run(
                "ack",
                [k.processing(worker), k.inflight, k.queue, k.stats, k.reclaims, k.sweep_guard,
                 k.dispatch_guard, k.completed, k.again, k.asked, k.dropped, k.priority_queue,
                 *k.group_keys(), k.asked_guard, k.suspects],
                [int(whole), len(finished), len(held_up), *added, self._now(),
                 sum(e in failing for e in finished), breaker, *finished, *held_up, *untouched],
            )  # fmt: skip
            acked = Acked(
                acked.still_held + int(held),
                acked.opened + [group_name(name) for name in opened],
                acked.closed + [group_name(name) for name in closed],
                acked.kept_open + [group_name(name) for name in kept],
                None if acked.waiting is None else acked.waiting + int(waiting),
            )
        return acked

    # -- write slots (writeslot.lua), in the first partition ---------------------------------
    def _slot_keys(self, slots: int) -> list[str]:
        k = self.keys
        return [k.writers_freed, *(k.write_slot(n) for n in range(1, slots + 1))]

    def take_write_slot(self, worker: str, slots: int, lease_ms: int) -> bool:
        """One of the workload's `slots` write slots for `worker`, if one is free (or already its)."""
        return bool(self._run("writeslot", self._slot_keys(slots), [worker, "take", lease_ms]) > 0)

    def renew_write_slot(self, worker: str, slots: int, lease_ms: int) -> bool:
        """Extend the lease of the slot `worker` holds (never takes one); False if it holds none."""
        return bool(self._run("writeslot", self._slot_keys(slots), [worker, "renew", lease_ms]) > 0)

    def give_write_slot(self, worker: str, slots: int, lease_ms: int) -> None:
        self._run("writeslot", self._slot_keys(slots), [worker, "give", lease_ms])

    def wait_for_write_slot(self, timeout: float) -> bool:
        """Block until a slot is given back (or `timeout` passes); True if one was."""
        return self.client.blpop([self.keys.writers_freed], timeout) is not None

    # -- the application's `now` (asked ids) and the change feed's wake-ups ------------------------
    def ask(self, keys: Sequence[bytes]) -> None:
        """Ask the dispatcher to read these ids at once (as entries spell them), each in its
        partition's list, and ring the deployment's bell (the dispatchers wait on it); one in
        flight is asked again as soon as it is released (dispatch.lua)."""
        pipe = self.client.pipeline(transaction=False)
        for index, part_keys in self._split(keys).items():
            pipe.rpush(self.partitions[index].asked, *part_keys)
        pipe.xadd(self.keys.asked_bell, {"n": 1}, maxlen=100, approximate=True)
        pipe.execute()

    def in_flight(self, ids: Sequence[bytes]) -> list[bytes]:
        """Those of these ids (as entries spell them) that are queued or held by a worker."""
        held = []
        for index, part_ids in self._split(ids).items():
            dues = self.client.hmget(self.partitions[index].inflight, part_ids)
            held += [i for i, due in zip(part_ids, dues, strict=True) if due is not None]
        return held

    def cancel(self, ids: Sequence[bytes]) -> None:
        """Have the per-row workers running checks of these ids (as entries spell them) cancel
        them: each looks a few times a second while it has checks running (RowLoop). The marks
        lapse after CANCEL_TTL_MS (an id whose check had ended meanwhile)."""
        pipe = self.client.pipeline(transaction=False)
        for index, part_ids in self._split(ids).items():
            k = self.partitions[index]
            pipe.sadd(k.cancelled, *part_ids)
            pipe.pexpire(k.cancelled, CANCEL_TTL_MS)
        pipe.execute()

    def cancelled(self) -> set[bytes]:
        """The ids whose checks are to be cancelled (usually none: one SMEMBERS per partition)."""
        return {i for part in self._each(lambda client, k: client.smembers(k.cancelled)) for i in part}

    def forget_cancelled(self, ids: Sequence[bytes]) -> None:
        """These ids' checks are cancelled: their marks go."""
        for index, part_ids in self._split(ids).items():
            self.client.srem(self.partitions[index].cancelled, *part_ids)

    def drop(self, ids: Sequence[bytes]) -> list[bytes]:
        """Have a take drop, rather than start, the entry that holds each of these ids (as entries
        spell them) if it is still queued: the rows were just paused. Only an id in flight can be
        queued, and the entry marked is the one in flight (its due time may differ from the row's,
        e.g. a `now` not pushed yet); one a worker already holds leaves the mark with its ack.
        Returns the ids in flight (queued or held by a worker), whose entries were marked."""
        in_flight = []
        for index, part_ids in self._split(ids).items():
            k = self.partitions[index]
            dues = self.client.hmget(k.inflight, part_ids)
            held = [(i, due) for i, due in zip(part_ids, dues, strict=True) if due is not None]
            if held:
                in_flight += [i for i, _ in held]
                pipe = self.client.pipeline(transaction=False)
                pipe.sadd(k.dropped, *(i + b":" + due for i, due in held))
                pipe.pexpire(k.dropped, DROPPED_TTL_MS)
                pipe.execute()
        return in_flight

    @staticmethod
    def asked_waiting(stores: Sequence[Store]) -> list[bool]:
        """Whether each store's asked lists or lists of ids asked for in flight hold anything (in
        any partition): one round trip per Redis client for all of them (a second when any does,
        on one Redis: the first asks them all at once)."""
        found: dict[int, bool] = {}  # id(store) -> whether anything waits in it
        for group in by_client(stores, lambda store: store):
            if not group[0].on_cluster:  # one EXISTS over them all: while nothing waits (most of
                # the time), one command every look, not one per workload
                keys = [key for store in group for k in store.partitions for key in (k.asked, k.again)]
                if not group[0].client.exists(*keys):
                    found.update((id(store), False) for store in group)
                    continue
            pipe = group[0].client.pipeline(transaction=False)
            for store in group:
                for k in store.partitions:
                    pipe.exists(k.asked, k.again)  # one slot: the partition's hash tag
            replies = iter(pipe.execute())
            for store in group:
                found[id(store)] = any([next(replies) for _ in store.partitions])
        return [found[id(store)] for store in stores]

    def take_asked(self, limit: int) -> tuple[list[bytes], bool]:
        """(up to `limit` asked ids from every partition, whether ids asked for while in flight
        wait for their release: the scripts put those in the asked list without ringing)."""
        pipe = self.client.pipeline(transaction=False)
        for k in self.partitions:
            pipe.lpop(k.asked, limit)
            pipe.exists(k.again)
        found = pipe.execute()
        taken = [key for part in found[::2] if part for key in part]
        return taken, any(found[1::2])

    def signal_changes(self) -> None:
        """The change feed has new records: wake whoever follows it (one stream entry)."""
        self.client.xadd(self.keys.changed, {"n": 1}, maxlen=100, approximate=True)

    def wait_for_changes(self, last: str, timeout: float) -> str:
        """Block until the feed is signalled after stream id `last` (or `timeout`); the new last id."""
        return self._wait_on(self.keys.changed, last, timeout)

    def last_change_signal(self) -> str:
        """The stream id to wait after (the newest signal, or the start)."""
        return self._last_on(self.keys.changed)

    def wait_for_asked(self, last: str, timeout: float) -> str:
        """Block until the deployment's asked bell rings after stream id `last` (or `timeout`);
        the new last id (the same: it did not ring)."""
        return self._wait_on(self.keys.asked_bell, last, timeout)

    def last_asked_ring(self) -> str:
        return self._last_on(self.keys.asked_bell)

    def _wait_on(self, stream: str, last: str, timeout: float) -> str:
        found = self.client.xread({stream: last}, count=100, block=max(round(timeout * 1000), 1))
        for _, entries in found or []:
            if entries:
                last = entries[-1][0].decode()
        return last

    def _last_on(self, stream: str) -> str:
        newest = self.client.xrevrange(stream, count=1)
        return newest[0][0].decode() if newest else "0-0"

    # -- failures grouped by error (errors.lua), in the first partition -----------------------
    def record_errors(self, groups: dict[str, tuple[int, list[str]]], now: float) -> None:
        """Add a batch's failures: message -> (how many, example ids)."""
        args: list[float | int | str] = [round(now, 3), MAX_ERROR_GROUPS, ERROR_EXAMPLES]
        for message, (count, examples) in groups.items():
            args += [message, count, json.dumps(examples[-ERROR_EXAMPLES:])]
        self._run("errors", [self.keys.errors, self.keys.errors_seen], args)

    def error_groups(self) -> dict[str, dict[str, Any]]:
        """message -> {count, first, last, examples}, as the workers recorded them."""
        return _error_groups_from(self.client.hgetall(self.keys.errors))

    def prune_errors(self, older_than: float) -> int:
        """Forget groups not seen since `older_than` (Unix seconds, database clock); how many."""
        stale = [m for m, g in self.error_groups().items() if float(g.get("last", 0)) < older_than]
        if stale:
            pipe = self.client.pipeline(transaction=True)
            pipe.hdel(self.keys.errors, *stale)
            pipe.zrem(self.keys.errors_seen, *stale)
            pipe.execute()
        return len(stale)

    # -- recovery (reclaim.lua, orphans.lua): the reconciler's jobs, one partition at a time -----
    def nothing_in_flight(self) -> bool:
        """No entry is queued or held by any worker, in any partition (the in-flight hash holds
        every one from its dispatch to its acknowledgement)."""
        return not any(self._each(lambda client, k: client.hlen(k.inflight)))

    def worker_ids(self, partition: int = 0) -> list[str]:
        return sorted(w.decode() for w in self.client.smembers(self.partitions[partition].workers))

    def reclaim(
        self, partition: int, worker: str, max_reclaims: int, groups: int, groups_again: int | None = None
    ) -> tuple[int, int] | None:
        """Give back what a worker held in one partition if its heartbeat expired, in `groups`
        batches (`groups_again` if one of its entries was reclaimed before): None if it is
        alive, else (ids reclaimed, ids set aside for quarantine)."""
        k = self.partitions[partition]
        result = self._run(
            "reclaim",
            [k.heartbeat(worker), k.processing(worker), k.landing(worker), k.suspects, k.reclaims,
             k.workers, k.quarantine, k.stats, k.running, *k.group_keys()],
            [worker, max_reclaims, groups, DIED_ALONE, groups if groups_again is None else groups_again],
        )  # fmt: skip
        return (int(result[0]), int(result[1])) if result else None

    def reclaim_look(self, partition: int) -> ReclaimLook:
        """A partition's registered workers whose heartbeat has gone, and the ids set aside for
        quarantine: two round trips whatever the number of workers (one with none registered),
        where a reclaim.lua call per worker found most of them alive. reclaim.lua checks the
        heartbeat again: a worker whose heartbeat lapses after this is reclaimed next run."""
        k = self.partitions[partition]
        pipe = self.client.pipeline(transaction=False)
        pipe.smembers(k.workers)
        pipe.hgetall(k.quarantine)
        members, pending = pipe.execute()
        workers = sorted(w.decode() for w in members)
        if not workers:
            return ReclaimLook([], pending)
        pipe = self.client.pipeline(transaction=False)
        for worker in workers:
            pipe.exists(k.heartbeat(worker))
        alive = pipe.execute()
        return ReclaimLook([w for w, beating in zip(workers, alive, strict=True) if not beating], pending)

    def pending_quarantine(self, partition: int) -> dict[bytes, bytes]:
        """id -> entry of ids the reclaimer set aside to be parked in MySQL."""
        found: dict[bytes, bytes] = self.client.hgetall(self.partitions[partition].quarantine)
        return found

    def forget_quarantined(
        self, partition: int, ids: Sequence[bytes], fields: Sequence[bytes], parked: int
    ) -> None:
        """Parked in MySQL: let go of these ids in Redis."""
        k = self.partitions[partition]
        pipe = self.client.pipeline(transaction=True)
        pipe.hdel(k.inflight, *ids)
        pipe.hdel(k.quarantine, *fields)
        pipe.hdel(k.reclaims, *ids)
        pipe.hincrby(k.stats, "quarantined", parked)
        pipe.execute()

    def forget_reclaims(self, ids: Sequence[bytes]) -> None:
        """Released rows start with a clean record (ids as entries carry them)."""
        for index, part_ids in self._split(ids).items():
            self.client.hdel(self.partitions[index].reclaims, *part_ids)

    def in_flight_before(
        self, partition: int, cutoff_ms: int, cursor: int, most: int
    ) -> tuple[int, list[bytes]]:
        """(cursor, pairs): (id, due) pairs, flat, in flight in one partition for a due time before
        `cutoff_ms`, from HSCAN's `cursor` on until about `most` are found (HSCAN's COUNT is a
        hint: never blocks Redis) or the scan ends (cursor 0: the next call starts over)."""
        found: list[bytes] = []
        key = self.partitions[partition].inflight
        while True:
            cursor, part = self.client.hscan(key, cursor, count=1000)
            found += [item for row_id, due in part.items() if int(due) < cutoff_ms for item in (row_id, due)]
            if cursor == 0 or len(found) >= 2 * most:
                return cursor, found

    def not_seen_anywhere(
        self, partition: int, candidates: Sequence[bytes], workers: Sequence[str]
    ) -> list[bytes]:
        """The candidate (id, due) pairs, flat as release_orphans takes them, still in flight for
        that due time and not seen anywhere orphans.lua looks (the lists entries wait in, the
        groups' included; the workers' sets and landing lists; quarantine), read LIST_CHUNK at a
        time over many commands, so nothing blocks Redis for long. Not atomic: an entry moving
        meanwhile may be missed (orphans.lua then decides), never seen where it is not. Entries
        are matched whole ("id:due"), where orphans.lua marks ids: an id waiting under another
        due time (an entry superseded by `now`, until a take drops it) is left to the script.
        Under a backlog older than orphan_after every queued id is a candidate: orphans.lua,
        which reads all that waits in one script (3 s for 1,000,000 entries), gets only the few
        that may really be orphans, usually none."""
        k, client = self.partitions[partition], self.client
        pairs = dict(zip(candidates[::2], candidates[1::2], strict=True))
        waiting = {make_entry_text(key, due) for key, due in pairs.items()}

        def lists() -> Iterator[list[bytes]]:
            yield from in_chunks(partial(client.lrange, k.queue))
            yield from in_chunks(partial(client.lrange, k.priority_queue))
            for chunk in in_chunks(partial(client.lrange, k.suspects)):
                yield [entry for batch in chunk for entry in batch.split(b" ")]
            yield from self._group_lists(k)
            for worker in workers:
                yield list(client.sscan_iter(k.processing(worker), count=LIST_CHUNK))
                yield from in_chunks(partial(client.lrange, k.landing(worker)))

        for seen in lists():
            waiting.difference_update(seen)
            if not waiting:
                return []
        left = [key for key in pairs if make_entry_text(key, pairs[key]) in waiting]
        quarantined = client.hmget(k.quarantine, left)
        flying = client.hmget(k.inflight, left)
        return [
            part
            for key, set_aside, due in zip(left, quarantined, flying, strict=True)
            if set_aside is None and due == pairs[key]
            for part in (key, due)
        ]

    def _group_lists(self, k: Keys) -> Iterator[list[bytes]]:
        """What waits in the groups' lists: the last GROUP_CHUNK entries of GROUP_CHUNK lists in
        a pipeline, and a list longer than that again in chunks of its own. The groups are those
        in the ring, sleeping or full, the ring read again last: a take wakes sleeping groups
        and an ack frees full ones into it while the others are read."""
        client = self.client
        names: set[bytes] = set()
        names.update(name for chunk in in_chunks(partial(client.lrange, k.group_ring)) for name in chunk)
        names.update(name for chunk in in_chunks(partial(client.zrange, k.groups_sleeping)) for name in chunk)
        names.update(client.sscan_iter(k.groups_full, count=LIST_CHUNK))
        names.update(name for chunk in in_chunks(partial(client.lrange, k.group_ring)) for name in chunk)
        ordered = list(names)
        for start in range(0, len(ordered), GROUP_CHUNK):
            pipe = client.pipeline(transaction=False)
            part = ordered[start : start + GROUP_CHUNK]
            lists = [key for name in part for key in (k.group_list(name), k.group_urgent_list(name))]
            for key in lists:
                pipe.lrange(key, -GROUP_CHUNK, -1)
            for key, tail in zip(lists, pipe.execute(), strict=True):
                if len(tail) < GROUP_CHUNK:
                    yield tail
                else:  # a long list: all of it, a chunk at a time
                    yield from in_chunks(partial(client.lrange, key))

    def release_orphans(
        self, partition: int, candidates: Sequence[bytes], workers: Sequence[str]
    ) -> list[bytes] | None:
        """Release the candidate (id, due) pairs that no queue, group or worker holds; None if the
        set of workers changed since the caller read it (read again and retry)."""
        k = self.partitions[partition]
        held = [key for w in workers for key in (k.processing(w), k.landing(w))]
        released = self._run(
            "orphans",
            [
                k.inflight,
                k.queue,
                k.suspects,
                k.quarantine,
                k.stats,
                k.workers,
                k.priority_queue,
                *k.group_keys(),
                *held,
            ],
            [len(candidates) // 2, *candidates, *workers],
        )
        return None if released == -1 else released

    def whereabouts(self, key: bytes, group: bytes | None = None) -> dict[str, Any]:
        """Where one id is in Redis (for `recheck inspect`; O(queue + workers), never in a loop):
        the due time it is in flight for, its queue position (in its group's list for a grouped
        workload: `group` as the lists name it), the worker holding it, its reclaims."""
        index = self.partition_of(key)
        k = self.partitions[index]
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(k.inflight, key)
        pipe.hget(k.reclaims, key)
        pipe.hget(k.quarantine, key)
        due, reclaims, quarantine = pipe.execute()
        found: dict[str, Any] = {
            "in_flight_due_ms": int(due) if due else None,
            "reclaims": int(reclaims or 0) % DIED_ALONE,
            "set_aside_for_quarantine": quarantine is not None,
            "queue_depth": self.queue_depth(),
            "queue_position": None,
            "suspect_group": False,
            "worker": None,
        }
        if due is None:
            return found
        entry = make_entry_text(key, due)
        if self.groups is not None and group is not None:
            pipe = self.client.pipeline(transaction=False)
            for name in (k.group_urgent_list(group), k.group_list(group)):
                pipe.lpos(name, entry)
                pipe.llen(name)
            urgent_at, urgent, rest_at, rest = pipe.execute()
            if urgent_at is not None or rest_at is not None:  # the priority list is taken first
                found.update(
                    group=group_name(group),
                    group_position=int(urgent_at) + 1 if urgent_at is not None else int(rest_at) + 1 + urgent,
                    group_depth=urgent + rest,
                    group_state=self.group_state(group),
                )
                if urgent_at is not None:
                    found["priority_queue"] = True
                return found
        position = self.client.lpos(k.queue, entry)
        if position is not None:  # behind what waits in the priority list: taken first
            found["queue_position"] = int(position) + 1 + self.client.llen(k.priority_queue)
            return found
        position = self.client.lpos(k.priority_queue, entry)
        if position is not None:  # taken before the other list: its place in the priority list
            found["queue_position"] = int(position) + 1
            found["priority_queue"] = True
            return found
        groups = self.client.lrange(k.suspects, 0, -1)  # reclaimed batches waiting: few, and rare
        found["suspect_group"] = any(entry in group.split(b" ") for group in groups)
        for worker in self.worker_ids(index):
            held = self.client.sismember(k.processing(worker), entry)
            if held or self.client.lpos(k.landing(worker), entry) is not None:
                alive = self.client.exists(k.heartbeat(worker))
                found["worker"] = {"id": worker, "alive": bool(alive)}
                break
        return found

    def set_group_limits(self, own: dict[str, str]) -> None:
        """The groups' own limits (group -> "rate:in flight:weight", core.limits.own_limits), all
        of them at once: the hash is replaced in one transaction, so a take never sees half."""
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.keys.groups_limits)
        if own:
            pipe.hset(self.keys.groups_limits, mapping=own)
        pipe.execute()

    def group_state(self, group: bytes) -> str:
        """Why a group's rows wait: its turn, its rate, or its room (group_max_in_flight)."""
        k, limit = self.keys, self.groups or GroupLimit()
        pipe = self.client.pipeline(transaction=False)
        pipe.zscore(k.groups_sleeping, group)
        pipe.sismember(k.groups_full, group)
        pipe.hget(k.groups_open, group)
        pipe.time()
        pipe.hget(k.groups_limits, group)
        asleep, full, opened, (seconds, micros), own = pipe.execute()
        if own:  # limits of its own (the group limits table)
            rate, room, _ = own.decode().split(":")
            limit = GroupLimit(float(rate) if rate else limit.rate, int(room) if room else limit.in_flight)
        if opened:
            probe_ms = int(opened.split(b":", 1)[0])
            wait = max(probe_ms / 1000 - seconds - micros / 1_000_000, 0.0)
            failures = limit.breaker_failures
            return f"held back by its breaker: {failures} checks failed in a row; next probe in {wait:.1f}s"
        if full:
            return f"held back: {limit.in_flight} checks running, its group_max_in_flight"
        if asleep is not None:
            return f"held back by its group_rate_limit of {limit.rate:g}/s"
        return "waiting for its turn"

    def group_overview(self, examples: int = 3) -> GroupOverview:
        """How many groups have rows waiting, how many their own limits hold back, and the
        biggest few of those held back (by their rate, or at group_max_in_flight)."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(k.group_ring)
        pipe.zcard(k.groups_sleeping)
        pipe.scard(k.groups_full)
        pipe.zrange(k.groups_sleeping, 0, 50)
        pipe.srandmember(k.groups_full, 50)
        pipe.hlen(k.groups_open)
        pipe.hscan(k.groups_open, 0, count=examples)
        ready, at_rate, at_room, sleeping, full, open_count, (_, opened) = pipe.execute()
        names = [*full, *sleeping]
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.llen(k.group_list(name))
            pipe.llen(k.group_urgent_list(name))
        lengths = pipe.execute() if names else []
        sizes = [rest + urgent for rest, urgent in zip(lengths[::2], lengths[1::2], strict=True)]
        held = sorted(zip(sizes, names, strict=True), reverse=True)[:examples]
        return GroupOverview(
            ready + at_rate + at_room,
            at_rate,
            at_room,
            [(group_name(name), size) for size, name in held],
            open_count,
            tuple(group_name(name) for name in list(opened)[:examples]),
        )

    # -- presence and status ----------------------------------------------------------------
    def presence_keys(self, role: str, member: str) -> tuple[str, str]:
        """(heartbeat key, registry) of a worker or dispatcher (the first partition's)."""
        return self._presence_keys(self.keys, role, member)

    @staticmethod
    def _presence_keys(k: Keys, role: str, member: str) -> tuple[str, str]:
        if role == "worker":
            return k.heartbeat(member), k.workers
        return k.dispatcher_heartbeat(member), k.dispatchers

    def stage_heartbeat(
        self, pipe: Any, role: str, member: str, beat: WorkerBeat | DispatcherBeat, ttl_ms: int,
        count: bool, register: bool,
    ) -> int:  # fmt: skip
        """Queue one heartbeat's commands on `pipe`: the member's key in every partition (each
        partition's reclaimer reads its own keys), its registration if `register`, and the first
        registry's size if `count` (the workers' write slots need it, nothing else); how many
        replies they will give. register=False: the member is added to a registry only where its
        key had expired (SET's GET, heartbeat_replies: the reclaimer removes a member only once
        its key is gone); Presence still registers now and then, for a registry deleted under a
        live key. A process's heartbeats for all its workloads go in one round trip
        (shared/process/presence.py, publish_together). No MULTI: the key is set before the
        member is added, on one connection, so a reclaimer never sees a new member without its
        key (and a renewal only refreshes both)."""
        raw = json.dumps(beat.as_json())
        for k in self.partitions:
            key, registry = self._presence_keys(k, role, member)
            pipe.set(key, raw, px=ttl_ms, get=not register)
            if register:
                pipe.sadd(registry, member)
        if count:
            pipe.scard(self._presence_keys(self.keys, role, member)[1])
        return len(self.partitions) * (2 if register else 1) + (1 if count else 0)

    def heartbeat_replies(
        self, again: Any, replies: list[Any], role: str, member: str, count: bool, register: bool
    ) -> int:
        """A staged heartbeat's replies: queue on `again` the registrations of the partitions
        whose key had expired (to run after); the registry's size if counted, else 0."""
        if not register:
            for k, old in zip(self.partitions, replies, strict=False):
                if old is None:
                    again.sadd(self._presence_keys(k, role, member)[1], member)
        return int(replies[-1]) if count else 0

    def shorten_heartbeat(self, role: str, member: str, ttl_ms: int) -> None:
        """The member's heartbeat keys (every partition's) expire `ttl_ms` from now (Presence.busy_again)."""
        pipe = self.client.pipeline(transaction=False)
        for k in self.partitions:
            pipe.pexpire(self._presence_keys(k, role, member)[0], ttl_ms)
        pipe.execute()

    def withdraw_heartbeat(self, role: str, member: str) -> None:
        pipe = self.client.pipeline(transaction=self.count == 1)
        for k in self.partitions:
            key, registry = self._presence_keys(k, role, member)
            pipe.delete(key)
            pipe.srem(registry, member)
            if role == "worker":
                pipe.hdel(k.running, member)  # its checks have ended (max_in_flight)
        pipe.execute()

    def _live(self, registry: str, key_of: Callable[[str], str], record: type[B]) -> list[B]:
        """The heartbeats of the members of `registry` whose heartbeat key is alive (_alive)."""
        members = sorted(m.decode() for m in self.client.smembers(registry))
        if not members:
            return []
        return _alive(members, self.client.mget([key_of(m) for m in members]), record)

    def forget_dead_dispatchers(self) -> int:
        """Remove the dispatchers registered here whose heartbeat key has expired (killed before
        they could withdraw: status and the sharing of leases read every member), in every
        partition; how many went. A live one whose key lapsed registers again at its next beat."""
        gone = 0
        for k in self.partitions:
            members = sorted(m.decode() for m in self.client.smembers(k.dispatchers))
            for start in range(0, len(members), DELETE_CHUNK):
                part = members[start : start + DELETE_CHUNK]
                keys = [k.dispatchers, *(k.dispatcher_heartbeat(member) for member in part)]
                gone += int(self._run("forget", keys, part))
        return gone

    def live_workers(self) -> list[WorkerBeat]:
        return self._live(self.keys.workers, self.keys.heartbeat, WorkerBeat)

    def live_dispatchers(self) -> list[DispatcherBeat]:
        return Store.live_dispatchers_of([self])[0]

    @staticmethod
    def live_dispatchers_of(stores: Sequence[Store]) -> list[list[DispatcherBeat]]:
        """Each store's live dispatchers (as _live reads them): two round trips per Redis client
        for all of them, every registry's members in one pipeline, then every heartbeat in one
        (a GET each: a cluster's pipelines refuse MGET), not two per store."""
        found: dict[int, list[DispatcherBeat]] = {}
        for group in by_client(stores, lambda store: store):
            pipe = group[0].client.pipeline(transaction=False)
            for store in group:
                pipe.smembers(store.keys.dispatchers)
            members = [sorted(m.decode() for m in reply) for reply in pipe.execute()]
            pipe = group[0].client.pipeline(transaction=False)
            for store, names in zip(group, members, strict=True):
                for name in names:
                    pipe.get(store.keys.dispatcher_heartbeat(name))
            raws = iter(pipe.execute())
            for store, names in zip(group, members, strict=True):
                found[id(store)] = _alive(names, [next(raws) for _ in names], DispatcherBeat)
        return [found[id(store)] for store in stores]

    def share_sample(self, sample: dict[str, Any], ttl_ms: int) -> None:
        self.client.set(self.keys.freshness, json.dumps(sample), px=ttl_ms)

    def overview(self) -> Overview:
        """Queue (a grouped workload's group lists too), reclaimed groups, in flight and counters,
        summed over the partitions."""
        pipe = self.client.pipeline(transaction=False)
        self._ask_overview(pipe)
        return self._overview_from(pipe.execute())

    def _ask_overview(self, pipe: Any) -> None:
        """overview's commands, added to a pipeline (_overview_from reads their replies)."""
        for k in self.partitions:
            pipe.llen(k.queue)
            pipe.llen(k.priority_queue)
            pipe.llen(k.suspects)
            pipe.hlen(k.inflight)
            pipe.hgetall(k.stats)
            pipe.get(k.groups_waiting)
            pipe.get(k.groups_urgent_waiting)
        pipe.get(self.keys.leader)

    def _overview_from(self, replies: list[Any]) -> Overview:
        *per_partition, leader = replies
        depth = priority = suspects = in_flight = 0
        counters: dict[str, int] = {}
        for start in range(0, len(per_partition), 7):
            part_depth, part_priority, part_suspects, part_in_flight, stats, grouped, urgent = per_partition[
                start : start + 7
            ]
            depth += part_depth + part_priority + int(grouped or 0)
            priority += part_priority + int(urgent or 0)
            suspects += part_suspects
            in_flight += part_in_flight
            for name, value in stats.items():
                counters[name.decode()] = counters.get(name.decode(), 0) + int(value)
        holder = leader.decode() if leader else None
        return Overview(depth, suspects, in_flight, dict(sorted(counters.items())), holder, priority)

    def status_reads(self) -> StatusReads:
        """What a status sample reads here, in two round trips whatever it shows: the registries,
        overview's lists and counters, the error groups and the shared freshness sample in one
        pipeline, then the live members' heartbeats in one MGET (a cluster: one slot, the first
        partition's, holds the registries and the heartbeats)."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.smembers(k.workers)
        pipe.smembers(k.dispatchers)
        pipe.hgetall(k.errors)
        pipe.get(k.freshness)
        self._ask_overview(pipe)
        workers, dispatchers, errors, shared, *overview = pipe.execute()
        worker_ids = sorted(m.decode() for m in workers)
        dispatcher_ids = sorted(m.decode() for m in dispatchers)
        beats = [k.heartbeat(m) for m in worker_ids] + [k.dispatcher_heartbeat(m) for m in dispatcher_ids]
        raws = self.client.mget(beats) if beats else []
        return StatusReads(
            workers=_alive(worker_ids, raws[: len(worker_ids)], WorkerBeat),
            dispatchers=_alive(dispatcher_ids, raws[len(worker_ids) :], DispatcherBeat),
            overview=self._overview_from(overview),
            errors=_error_groups_from(errors),
            shared_freshness=_sample_from(shared),
        )

    # -- whole-prefix housekeeping (benchmarks) ---------------------------------------------
    def clear(self) -> None:
        """Delete every key of every partition."""
        for k in self.partitions:
            found = list(self.client.scan_iter(match=k.all_prefixed(), count=1000))
            for start in range(0, len(found), DELETE_CHUNK):
                self.client.delete(*found[start : start + DELETE_CHUNK])

    def drop_transit(self) -> None:
        """Forget the queues and the in-flight sets (a benchmark resetting between measurements)."""
        self._each(lambda client, k: client.delete(k.queue, k.priority_queue, k.turns, k.inflight))
