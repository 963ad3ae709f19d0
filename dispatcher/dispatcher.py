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
from shared.config import Settings, log_prefix
from shared.db import Database
from shared.entries import MAX_DUE_MS, MIN_DUE_MS, sql_datetime
from shared.keytypes import KeyKind
from shared.metrics import dispatcher_metrics
from shared.schema import describe_table
from shared.sql import Queries
from shared.store import Store

log = logging.getLogger(__name__)

# Cursors are (due_ms, key); a None key is before every key (START) or after every key (END).
START = (MIN_DUE_MS, None)  # before every row
END = (MAX_DUE_MS, None)  # every row is at or before it
GUARD_TTL_MS = 10_000  # outlives any page; a pusher that dies mid-pass lets it lapse


@dataclass
class Page:
    read: int  # rows read from MySQL
    pushed: int  # ids that were not in flight and went to the queue
    depth: int  # queue length afterwards
    cursor: tuple  # (due_ms, key) of the last row read
    lost: bool  # Redis had lost its data before this push


class DuePusher:
    """Reads one page of due rows after a cursor and pushes them through the dedup script."""

    def __init__(self, settings: Settings, db: Database, store: Store, owner: str):
        self.owner = owner  # the dispatcher id: pushes need its lease
        self.metrics = dispatcher_metrics(settings.workload)
        self.settings = settings
        self.db = db
        self.keys: KeyKind | None = None  # the id column's kind, read from the table at first use
        self.queries = Queries(settings)
        self.store = store

    def learn_keys(self) -> KeyKind:
        if self.keys is None:
            self.keys = describe_table(self.settings, self.db).keys
            self.queries = Queries(self.settings, keys=self.keys)
        return self.keys

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
        due_ms, row_id = cursor
        if guard:
            self.store.begin_guard(guard, GUARD_TTL_MS)
        rows = self.db.query(
            self.queries.due_page,
            {
                "after_due": sql_datetime(due_ms),
                "after_id": row_id,
                "before_due": sql_datetime(before[0]),
                "before_id": before[1],
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
            self.metrics.dispatched.inc(pushed)
            self.metrics.last_dispatch.set(time.time())
        last = keys.parse(entries[-1:])[0][0]
        return Page(len(entries), pushed, depth, (last.due_ms, last.id), lost)


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
        self.prefix = log_prefix(settings)
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
            log.warning("%sredis lost its data; rereading every due row from the oldest", self.prefix)
            self.rewind()
            return 0.0
        return 0.0 if page.read == limit else settings.poll_interval
