"""Maintenance jobs run by APScheduler inside the dispatcher process.

Each job is an object with run_once(), an ordinary function tests call directly:

- Reclaimer: gives back the ids held by workers whose heartbeat expired (kill -9, OOM, a
  paused process), and quarantines ids that were reclaimed max_reclaims times.
- Sweeper: rows overdue by more than sweep_grace that nothing holds (Redis lost its data,
  rows inserted with an old due time) are dispatched again.
- OrphanCollector: in-flight ids that no queue or worker holds any more are released, so they
  cannot block their rows forever.
"""

from __future__ import annotations

import logging
import time

from dispatcher.dispatcher import END, START, DuePusher
from shared.config import Settings, log_prefix
from shared.db import Database
from shared.entries import batch_json, datetime_to_ms
from shared.keytypes import KeyKind
from shared.metrics import dispatcher_metrics
from shared.schema import describe_table
from shared.sql import Queries
from shared.store import Store

log = logging.getLogger(__name__)

SPLIT_WAYS = 8  # a dead worker's entries come back as this many batches (see reclaim.lua)
ERRORS_KEPT_S = 86_400.0  # failures grouped by error are forgotten a day after the last one


class Job:
    """What the MySQL-and-Redis jobs share; subclasses define run_once()."""

    def __init__(self, settings: Settings, db: Database, store: Store):
        self.settings = settings
        self.db = db
        self.store = store
        self.queries = Queries(settings)
        self._keys: KeyKind | None = None

    @property
    def keys(self) -> KeyKind:
        """The id column's kind: entries are parsed and batches written by it (read once)."""
        if self._keys is None:
            self._keys = describe_table(self.settings, self.db).keys
            self.queries = Queries(self.settings, keys=self._keys)
        return self._keys


class Reclaimer(Job):
    def run_once(self) -> tuple[int, int]:
        """Returns (ids reclaimed, ids quarantined) in this run."""
        reclaimed = quarantined = 0
        for part in self.store.parts:  # each partition of the workload (one when unpartitioned)
            reclaimed += self.reclaim_part(part)
            quarantined += self.quarantine_pending(part)
        return reclaimed, quarantined

    def reclaim_part(self, part: Store) -> int:
        reclaimed = 0
        for worker in part.worker_ids():
            result = part.reclaim(worker, self.settings.max_reclaims, SPLIT_WAYS)
            if result:
                held, poisoned = result
                reclaimed += held
                dispatcher_metrics(self.settings.workload).reclaimed.inc(held)
                log.warning(
                    "%sworker %s stopped heartbeating; reclaimed %d ids (%d to quarantine)",
                    log_prefix(self.settings),
                    worker,
                    held,
                    poisoned,
                )
        return reclaimed

    def quarantine_pending(self, part: Store) -> int:
        """Park ids that killed workers again and again: MySQL first, then Redis lets go."""
        pending = part.pending_quarantine()
        if not pending:
            return 0
        keys = self.keys
        items, malformed = keys.parse(list(pending.values()))
        if items:
            reason = (
                "quarantined: its worker died while checking this row alone, "
                f"after {self.settings.max_reclaims} deaths in all; `recheck release ID` to check it again"
            )
            self.db.execute(
                self.queries.quarantine,
                {"batch": batch_json((keys.ref(item), item.due_ms) for item in items), "reason": reason},
            )
            shown = ", ".join(str(keys.show(item.id)) for item in items)
            log.error("%squarantined ids %s: %s", log_prefix(self.settings), shown, reason)
        ids = [item.entry.split(b":", 1)[0] for item in items] + [m.split(b":", 1)[0] for m in malformed]
        part.forget_quarantined(ids, list(pending.keys()), len(items))
        dispatcher_metrics(self.settings.workload).quarantined.inc(len(items))
        return len(items)


class Sweeper:
    """Dispatch rows overdue by more than sweep_grace that are not in flight.

    Only rows behind the dispatcher's cursor, and the row it rests on: the dispatcher itself
    reads everything after it, and reading the same rows twice at once (as both would while
    catching up on a backlog) lets a row finished between one's read and the other's push be
    queued again. The row under the cursor is the sweep's: the dispatcher has read it, and if it
    was in flight then (the application forced it due meanwhile) nobody else will read it again.
    """

    def __init__(self, settings: Settings, pusher: DuePusher, dispatcher_cursor=lambda: END):
        self.settings = settings
        self.pusher = pusher
        self.dispatcher_cursor = dispatcher_cursor

    def run_once(self, max_pages: int = 1000) -> int:
        """Returns how many overdue ids were dispatched again (0 in healthy running)."""
        settings = self.settings
        cursor, pushed, depth = START, 0, self.pusher.store.queue_depth()
        before = self.dispatcher_cursor()
        guard = "sweep"
        try:
            for _ in range(max_pages):
                room = settings.high_water - depth
                if room <= 0:
                    break
                limit = min(settings.dispatch_batch, room)
                page = self.pusher.push_page(
                    cursor, limit, lateness_s=settings.sweep_grace, before=before, guard=guard
                )
                if page.read == 0:
                    break
                pushed += page.pushed
                cursor, depth = page.cursor, page.depth
                if page.read < limit:
                    break
        finally:
            self.pusher.store.end_guard(guard)
        if pushed:
            log.warning(
                "%ssweep: %d rows overdue by more than %.1fs were not in flight; dispatched them again",
                log_prefix(settings),
                pushed,
                settings.sweep_grace,
            )
        return pushed


class OrphanCollector(Job):
    """Release in-flight ids (due more than orphan_after ago) that nothing holds."""

    def candidates(self, part: Store, cutoff_ms: int, limit: int = 1000) -> list[bytes]:
        """id, due pairs in flight for a due time older than the cutoff (HSCAN: never blocks Redis)."""
        found: list[bytes] = []
        for row_id, due in part.scan_in_flight():
            if int(due) < cutoff_ms:
                found += [row_id, due]
                if len(found) >= 2 * limit:
                    break
        return found

    def run_once(self) -> list[int]:
        self.store.prune_errors(time.time() - ERRORS_KEPT_S)  # error groups nobody saw for a day
        now_ms = datetime_to_ms(self.db.scalar(self.queries.db_now))
        cutoff_ms = now_ms - round(self.settings.orphan_after * 1000)
        ids = []
        for part in self.store.parts:  # each partition of the workload (one when unpartitioned)
            ids += [self.keys.decode(r) for r in self.release_part(part, cutoff_ms)]
        if ids:
            log.warning(
                "%sreleased %d in-flight ids nothing held (e.g. %s); they will be swept",
                log_prefix(self.settings), len(ids), ids[:5],
            )  # fmt: skip
        return ids

    def release_part(self, part: Store, cutoff_ms: int) -> list[bytes]:
        candidates = self.candidates(part, cutoff_ms)
        if not candidates:
            return []
        for _ in range(5):
            released = part.release_orphans(candidates, part.worker_ids())
            if released is not None:
                return released
        return []  # workers kept changing; the next run will try again
