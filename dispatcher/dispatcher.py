"""The dispatcher's loop: read due rows through a keyset cursor and push their ids to Redis.

Per-poll cost is O(page): the cursor (due time, id) walks the (due, id) index and never
rereads what it has passed. Nothing is written to MySQL at dispatch time; the Redis
in-flight set, not a lease column, keeps an id from being queued twice. Rows the cursor has
passed but that still need work (a Redis that lost its data, rows inserted with an old due
time) are found by the reconciler's sweep, and at once when Redis is seen to have lost data.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from recheck.dispatcher.lease import NotLeader
from recheck.shared.config import DeploymentFields, Workload
from recheck.shared.core.entries import MAX_DUE_MS, MIN_DUE_MS
from recheck.shared.core.keys import KeyKind
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.policies.lifecycle import Lifecycle, lifecycle_of
from recheck.shared.policies.ordering import ordering_of
from recheck.shared.process.metrics import dispatcher_metrics
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.redis.store import Store

log = logging.getLogger(__name__)

# Cursors are (due_ms, key); a None key is before every key (START) or after every key (END).
START = (MIN_DUE_MS, None)  # before every row
END = (MAX_DUE_MS, None)  # every row is at or before it
GUARD_TTL_MS = 10_000  # outlives any page; a pusher that dies mid-pass lets it lapse
ASKED_EVERY = 0.05  # seconds between reads of the ids the application asked for now
ASKED_PER_READ = 1_000


@dataclass
class Page:
    read: int  # rows read from MySQL
    pushed: int  # ids that were not in flight and went to the queue
    depth: int  # queue length afterwards
    cursor: tuple  # (due_ms, key) of the last row read
    lost: bool  # Redis had lost its data before this push


class DuePusher:
    """Reads one page of due rows after a cursor and pushes them through the dedup script.

    priority: the pusher of the priority rows (priority_column = 1), into their own list; else
    of the other rows (all of them without a priority column). Each row is read by one of the two."""

    def __init__(self, workload: Workload, db: Database, store: Store, owner: str, priority: bool = False):
        self.owner = owner  # the dispatcher id: pushes need its lease
        self.priority = priority
        self.metrics = dispatcher_metrics(workload.name)
        self.workload = workload
        self.ordering = ordering_of(workload)
        self.rows = Rows(workload, db)
        self.store = store
        self.asked_soon = False  # push_asked: the asked list should be read again at the fast pace

    def learn_keys(self) -> KeyKind:
        """The id column's kind, read from the table at first use."""
        return self.rows.keys

    def push_page(
        self,
        cursor: tuple,
        limit: int,
        lateness_s: float = 0.0,
        before: tuple = END,
        guard: str | None = None,
    ) -> Page:
        """One page. With a guard ("sweep" or "dispatch": a pass rereading rows that may be in
        flight), the guard is set before the read, so anything completing before the push is
        recognised."""
        keys = self.learn_keys()
        if guard:
            self.store.begin_guard(guard, GUARD_TTL_MS)
        entries = self.rows.due_page(cursor, before, limit, lateness_s, priority=self.priority)
        if not entries:
            return Page(0, 0, -1, cursor, False)
        pushed, depth, lost = self.store.push(self.owner, entries, priority=self.priority)
        if pushed < 0:
            raise NotLeader(self.owner)
        if pushed:
            self.metrics.dispatched.inc(pushed)
            self.metrics.last_dispatch.set(time.time())
        last = keys.parse([self.ordering.queued(entries[-1])])[0][0]
        return Page(len(entries), pushed, depth, (last.due_ms, last.id), lost)

    def any_due(self, after: tuple, before: tuple, lateness_s: float) -> bool:
        """Whether a page from `after` would read any row (one row read, nothing pushed)."""
        return bool(self.rows.due_page(after, before, 1, lateness_s, priority=self.priority))

    def depth(self) -> int:
        """Entries waiting in the list this pusher fills (its backpressure)."""
        return self.store.queue_depth(self.priority)

    def push_asked(self) -> int:
        """The ids the application asked to check now (Client.now, `recheck now`, resume): their
        rows read by key and pushed to the head of the queue, whatever the keyset cursor has
        passed; returns how many went."""
        # Asked ids go first even at high water (a backlog is when `now` matters), up to a slack
        # above it: beyond that they wait in their list (their rows are due anyway).
        room = asked_room(self.workload.waiting_limit, self.store.head_depth())
        if room <= 0:  # any asked wait in their list: read again at the fast pace while they do
            self.asked_soon = Store.asked_waiting([self.store])[0]
            return 0
        asked, again = self.store.take_asked(min(ASKED_PER_READ, room))
        # Read again soon while ids asked for in flight wait for their release (the scripts then
        # put them in the asked list without ringing the bell) or this read found some (its
        # push may leave such ids).
        self.asked_soon = again or bool(asked)
        if not asked:
            return 0
        keys = self.learn_keys()
        wanted = [key for key in (keys.decode(head) for head in asked) if key is not None]
        # Two paths push these rows: this one and the dispatch pages (the rows are due now). A
        # worker may check, write and acknowledge a row between one path's read and its push:
        # the guard, set before this read and kept a GUARD_TTL after this push, has acks record
        # completions meanwhile, and either push skips what completed after it read (dispatch.lua).
        self.store.begin_guard("asked", GUARD_TTL_MS)
        entries = self.rows.due_entries(wanted)
        if not entries:
            return 0
        pushed, _, _ = self.store.push(self.owner, entries, head=True)
        self.store.begin_guard("asked", GUARD_TTL_MS)  # renewed: a page read before this push
        if pushed < 0:
            raise NotLeader(self.owner)
        self.metrics.dispatched.inc(pushed)
        return pushed


def asked_room(high_water: int, depth: int) -> int:
    """How many asked ids may be pushed onto a queue `depth` long: up to high water plus a tenth
    of it (at least ASKED_PER_READ), so that `now` jumps a backlog without unbounded growth."""
    return high_water + max(high_water // 10, ASKED_PER_READ) - depth


def pause_after(deployment: DeploymentFields, lifecycle: Lifecycle, read: int, limit: int) -> float:
    """How long a pass waits before its next page: none after a full one; after one that read rows
    of a one-shot workload, busy_poll_interval (Lifecycle.follows_arrivals); else poll_interval."""
    if read >= limit:
        return 0.0
    if read and lifecycle.follows_arrivals:
        return min(deployment.busy_poll_interval, deployment.poll_interval)
    return deployment.poll_interval


def idle_pause(deployment: DeploymentFields) -> float:
    """How long an idle workload's probe waits for the next one: idle_poll_interval, never less
    than poll_interval (a dispatcher told to poll less often probes no more often while idle)."""
    return max(deployment.idle_poll_interval, deployment.poll_interval)


class Dispatcher:
    """One poll = one page. Backpressure: nothing is read while the queue is at high water."""

    def __init__(self, workload: Workload, pusher: DuePusher):
        self.workload = workload
        self.lifecycle = lifecycle_of(workload)
        self.pusher = pusher
        self.cursor = START
        # Rows up to this due time (ms) may be in flight from before a rewind: reading them again
        # needs the guard (see push_page). None: nothing can be in flight behind the cursor.
        self.guard_until: int | None = None
        self.rewound = True
        self.prefix = workload.log_prefix
        self.depth = 0
        self.depth_unknown = False  # a partner pushed: this pass's list may have grown (read it)
        self.dispatched = 0
        self.pages = 0
        self.partners: list[Dispatcher] = []  # other passes over the table: they rewind with this one
        # The last poll read no row, behind the cursor (look_back) or after it: the dispatch loop
        # may ask the idle probe (dispatcher/idle.py) whether a row came due instead of polling.
        self.quiet = False

    @classmethod
    def passes(cls, workload: Workload, db: Database, store: Store, owner: str) -> list[Dispatcher]:
        """The workload's dispatch passes, each with its own cursor: the priority rows' first
        when it has a priority column (docs/priorities.md), then the others'."""
        passes = [
            cls(workload, DuePusher(workload, db, store, owner, priority=p))
            for p in ordering_of(workload).passes
        ]
        for one in passes:
            one.partners = [other for other in passes if other is not one]
        return passes

    def rewind(self) -> None:
        """Start again from the oldest due row; dedup and the guard make rereading harmless."""
        self.cursor = START
        self.rewound = True

    def poll(self) -> float:
        workload = self.workload
        self.quiet = False
        if self.depth >= workload.waiting_limit or self.depth_unknown:
            self.depth_unknown = False
            self.depth = self.pusher.depth()
            if self.depth >= workload.waiting_limit:
                return workload.deployment.poll_interval
        limit = min(workload.dispatch_batch, workload.waiting_limit - self.depth)
        if self.rewound:  # what could be in flight now is all we may meet again
            self.rewound = False
            self.guard_until = self.pusher.store.highest_in_flight_due()
        guarding = self.guard_until is not None and self.cursor[0] <= self.guard_until
        try:
            page = self.pusher.push_page(self.cursor, limit, guard="dispatch" if guarding else None)
        except REDIS_DOWN:
            # The push may have gone through (its script ran and only the reply was lost; on a
            # cluster, some partitions' scripts ran before another's slot was moving): the page
            # read again next may be in flight, and a row finished between that read and its push
            # would be queued again. As after a rewind: guard up to what is in flight.
            self.rewound = True
            raise
        self.pages += 1
        if guarding and (page.cursor[0] > self.guard_until or page.read < limit):  # past it, or caught up
            self.guard_until = None
            self.pusher.store.end_guard("dispatch")
        looked = self.look_back() if page.read < limit and self.lifecycle.looks_back else 0
        if page.read == 0:
            self.quiet = looked == 0
            return workload.deployment.poll_interval  # a stale depth is corrected by the next push
        first_push = self.cursor == START
        self.cursor = page.cursor
        self.depth = page.depth
        self.dispatched += page.pushed
        if page.pushed:  # a priority page lands in the rest's list while both are empty
            for one in self.partners:
                one.depth_unknown = True
        # Redis lost its data: every pass that has gone past the start rereads from the oldest (a
        # pass's first push finds the epoch missing too, but has nothing behind it; its partner may).
        stale = [one for one in self.partners if one.cursor != START] + ([] if first_push else [self])
        if page.lost and stale:
            log.warning("%sredis lost its data; rereading every due row from the oldest", self.prefix)
            for one in stale:
                one.rewind()
            return 0.0
        return pause_after(workload.deployment, self.lifecycle, page.read, limit)

    def probe_from(self) -> tuple:
        """Where the rows this pass would read now begin, as a cursor (due_ms, key; a None key:
        before every key): after its cursor, or with a look-back from the start of that window.
        The idle probe (dispatcher/idle.py) asks whether a row due now lies there."""
        if self.cursor == START or not self.lifecycle.looks_back:
            return self.cursor
        return (self.window_start(), None)

    def window_start(self) -> int:
        """The look-back window's first due time (ms): SWEEP_GRACE behind the cursor."""
        return max(self.cursor[0] - round(self.workload.deployment.sweep_grace * 1000), MIN_DUE_MS)

    def look_back(self) -> int:
        """One-shot workloads, caught up: read again the rows due in the last SWEEP_GRACE seconds
        behind the cursor. A producer's INSERT takes its due time when it runs, and its row is
        seen only once its transaction commits, perhaps after the cursor passed that due time
        (another producer's row, due a moment later, committed first). Rows in flight are there
        too: dedup drops them, and the guard keeps one finished between this read and its push
        from being queued again. The whole window, page after page: a late commit behind more
        than a page of jobs still waiting is queued at this poll too. Costs one read of the rows
        still waiting or in flight in that window per caught-up poll (at most what waits in
        Redis); what commits later than that is the sweep's (its grace). Returns the rows read."""
        if self.cursor == START:
            return 0
        start = (self.window_start(), None)
        limit = self.workload.dispatch_batch
        read = 0
        try:
            while True:  # ends at the cursor: a page reads less than a whole one there
                page = self.pusher.push_page(start, limit, before=self.cursor, guard="dispatch")
                read += page.read
                if page.read < limit:
                    return read
                start = page.cursor
        finally:
            if self.guard_until is None:  # not inside a guarded pass of its own (after a rewind)
                self.pusher.store.end_guard("dispatch")


class AskedPusher:
    """One workload's reader of the ids the application asked to check now (Client.now, `recheck
    now`, resume): run by the dispatcher's asked thread (dispatcher/asked.py) when the bell rings,
    at the fast pace while `soon`, and now and then in any case. Not a step of every poll: on a
    slow network each round trip in the dispatch loop delays every page."""

    def __init__(self, pusher: DuePusher):
        self.pusher = pusher
        self.dispatched = 0

    @property
    def soon(self) -> bool:
        """Its last read asks for another at the fast pace (see push_asked)."""
        return self.pusher.asked_soon

    def run_once(self) -> int:
        pushed = self.pusher.push_asked()
        self.dispatched += pushed
        return pushed
