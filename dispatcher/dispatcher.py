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

from dispatcher.lease import NotLeader
from shared.config import Settings
from shared.db import Database
from shared.entries import MAX_DUE_MS, MIN_DUE_MS, sql_datetime
from shared.metrics import dispatcher_metrics
from shared.sql import Queries
from shared.store import Store

log = logging.getLogger(__name__)

START = (MIN_DUE_MS, -1)  # before every row: (due_ms, id)
END_MS = MAX_DUE_MS  # after every row
END = (END_MS, 2**64)
GUARD_TTL_MS = 10_000  # outlives any page; a pusher that dies mid-pass lets it lapse


@dataclass
class Page:
    read: int  # rows read from MySQL
    pushed: int  # ids that were not in flight and went to the queue
    depth: int  # queue length afterwards
    cursor: tuple[int, int]  # (due_ms, id) of the last row read
    lost: bool  # Redis had lost its data before this push


class DuePusher:
    """Reads one page of due rows after a cursor and pushes them through the dedup script."""

    def __init__(self, settings: Settings, db: Database, store: Store, owner: str):
        self.owner = owner  # the dispatcher id: pushes need its lease
        self.db = db
        self.queries = Queries(settings)
        self.store = store

    def push_page(
        self,
        cursor: tuple[int, int],
        limit: int,
        lateness_s: float = 0.0,
        before_ms: int = END_MS,
        guard: str | None = None,
    ) -> Page:
        """One page. With a guard ("sweep" or "dispatch": a pass rereading rows that may be in
        flight), the guard is set before the read, so anything completing before the push is
        recognised."""
        due_ms, row_id = cursor
        if guard:
            self.store.begin_guard(guard, GUARD_TTL_MS)
        rows = self.db.query(
            self.queries.due_page,
            {
                "after_due": sql_datetime(due_ms),
                "after_id": row_id,
                "before_due": sql_datetime(before_ms),
                "limit": limit,
                "lateness_us": round(lateness_s * 1_000_000),
            },
        )
        joined = rows[0][0] if rows else None
        if not joined:
            return Page(0, 0, -1, cursor, False)
        if isinstance(joined, str):
            joined = joined.encode()
        entries = joined.split(b" ")
        pushed, depth, lost = self.store.push(self.owner, entries)
        if pushed < 0:
            raise NotLeader(self.owner)
        if pushed:
            metrics = dispatcher_metrics()
            metrics.dispatched.inc(pushed)
            metrics.last_dispatch.set(time.time())
        last_id, _, last_due = entries[-1].partition(b":")
        return Page(len(entries), pushed, depth, (int(last_due), int(last_id)), lost)


class Dispatcher:
    """One poll = one page. Backpressure: nothing is read while the queue is at high water."""

    def __init__(self, settings: Settings, pusher: DuePusher):
        self.settings = settings
        self.pusher = pusher
        self.cursor = START
        # Rows up to this due time (ms) may be in flight from before a rewind: reading them again
        # needs the guard (see push_page). None: nothing can be in flight behind the cursor.
        self.guard_until: int | None = None
        self.rewound = True
        self.depth = 0
        self.dispatched = 0
        self.pages = 0

    def rewind(self) -> None:
        """Start again from the oldest due row; dedup and the guard make rereading harmless."""
        self.cursor = START
        self.rewound = True

    def poll(self) -> float:
        settings = self.settings
        if self.depth >= settings.high_water:
            self.depth = self.pusher.store.queue_depth()
            if self.depth >= settings.high_water:
                return settings.poll_interval
        limit = min(settings.dispatch_batch, settings.high_water - self.depth)
        if self.rewound:  # what could be in flight now is all we may meet again
            self.rewound = False
            self.guard_until = self.pusher.store.highest_in_flight_due()
        guarding = self.guard_until is not None and self.cursor[0] <= self.guard_until
        page = self.pusher.push_page(self.cursor, limit, guard="dispatch" if guarding else None)
        self.pages += 1
        if guarding and (page.cursor[0] > self.guard_until or page.read < limit):  # past it, or caught up
            self.guard_until = None
            self.pusher.store.end_guard("dispatch")
        if page.read == 0:
            return settings.poll_interval  # a stale depth is corrected by the next push
        first_push = self.cursor == START
        self.cursor = page.cursor
        self.depth = page.depth
        self.dispatched += page.pushed
        if page.lost and not first_push:
            log.warning("redis lost its data; rereading every due row from the oldest")
            self.rewind()
            return 0.0
        return 0.0 if page.read == limit else settings.poll_interval
