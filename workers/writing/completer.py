"""The end of every entry a worker takes: written back and acknowledged, or given back.

Both loops (batch and per-row) finish their work here and nowhere else: the fenced write-back
in a constant number of statements, one acknowledgement script call that releases the finished
entries and returns untouched ones, the counters, and the lateness of what was written.

Liveness is not progress: a write-back that has not landed within RECHECK_HEARTBEAT_TTL plus
one lock wait (shared/mysql/db.py: LOCK_WAIT_SECONDS) (MySQL unreachable from this worker alone, a
silent network) is given back to the queue by the heartbeat thread, exactly as if this worker
had died but without counting as a death, so that other workers check those rows; the fence
makes a late write harmless. Only if another live worker reaches MySQL (its heartbeat says so):
when MySQL is down for everyone, the batch stays and is written once, when it is back.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from recheck.shared.config import Workload
from recheck.shared.core.entries import Item
from recheck.shared.core.failures import error_group
from recheck.shared.mysql.db import Database
from recheck.shared.process.metrics import RecentMax, WorkloadWorkerMetrics
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.redis.store import Acked, Counts, Store
from recheck.workers.checks import Outcome
from recheck.workers.writing.writeback import NOTHING_WRITTEN, WriteBack, Written
from recheck.workers.writing.writeslots import WriteSlots

log = logging.getLogger(__name__)


ERROR_SUMMARY = 255  # characters of a failure's first line kept for status, heartbeats and logs


class Counters:
    """What this worker has done; read by the heartbeat thread for status."""

    def __init__(self) -> None:
        self.checked = 0
        self.failed = 0
        self.stale = 0
        self.deferred = 0
        self.malformed = 0
        self.gone = 0  # rows deleted between dispatch and check
        self.returned = 0
        self.batches = 0
        self._samples: deque[tuple[float, int]] = deque(maxlen=64)

    def rate(self, window: float = 5.0) -> float:
        """Rows completed per second over about the last `window` seconds."""
        now, done = time.monotonic(), self.checked + self.failed
        self._samples.append((now, done))
        old = next((s for s in self._samples if now - s[0] <= window), self._samples[0])
        return (done - old[1]) / (now - old[0]) if now > old[0] else 0.0


class Completer:
    def __init__(
        self,
        workload: Workload,
        db: Database,
        store: Store,
        worker_id: str,
        persist: Callable,
        metrics: WorkloadWorkerMetrics,
        whole_batches: bool,
        slots: WriteSlots,
    ):
        self.writeback = WriteBack(workload, db)
        self.store = store
        self.worker_id = worker_id
        self.persist = persist  # retries a step through outages until the stop deadline
        self.slots = slots  # how many write-backs of the workload may run at once
        self.metrics = metrics
        # A batch worker holds nothing but the batch it completes; a per-row worker holds more.
        self.whole_batches = whole_batches
        self.counters = Counters()
        self.lateness_max = RecentMax()  # the largest lateness written in the last 2 s
        self.last_error: str | None = None  # the latest failure's message, for status and logs
        self._lock = threading.Lock()
        self._writing: tuple[float, list[bytes]] | None = None  # (since, entries) of the write under way
        self._given_back = False
        self._held_back = False  # a stuck write-back was kept: nobody else could write it either
        # What the last acknowledgement saw waiting for a take (None: it could not tell, or no ack
        # since the loop last asked): 0 lets a batch loop wait for work without an empty take.
        self.waiting_after_ack: int | None = None

    def complete(
        self,
        items: Sequence[Item],
        outcomes: Sequence[Outcome],
        malformed: Sequence[bytes] = (),
        gone: Sequence[bytes] = (),
    ) -> Written | None:
        """Write the outcomes back (fenced), then acknowledge; malformed entries are dropped, and
        so are those of rows deleted since their dispatch (`gone`: nothing to check or write).
        What was written; None if the batch was given back instead."""
        entries = [item.entry for item in items]
        written: Written | None = NOTHING_WRITTEN
        failed = next((o.text for o in reversed(outcomes) if not o.ok), None)
        if failed is not None:  # its first line, as status and logs show it (a traceback may follow)
            self.last_error = failed.split("\n", 1)[0][:ERROR_SUMMARY]
        if items:
            with self.slots.held():  # waiting for a slot is not a stuck write: its clock starts after
                written = self.write(items, outcomes)
        if written is None:  # given back already, or MySQL stayed away through the stop deadline
            self.give_back(entries, [*malformed, *gone])  # a second give-back changes nothing
            return None
        if any(not outcome.ok for outcome in outcomes):
            self.record_errors(items, outcomes)
        if written.changes:
            with contextlib.suppress(*REDIS_DOWN):  # a follower polls MySQL meanwhile
                self.store.signal_changes()
        deferred = set(written.deferred)  # usually empty: then no entry is looked up in it
        done = [e for e in entries if e not in deferred] if deferred else entries
        failed_entries = [item.entry for item, outcome in zip(items, outcomes, strict=True) if not outcome.ok]
        self.acknowledge(
            [*done, *malformed, *gone],
            [],
            written,
            len(malformed),
            written.deferred,
            len(gone),
            failed_entries,
        )
        if items:
            self.counters.batches += 1
            self.record_lateness(items, outcomes, deferred)
        return written

    @property
    def writing(self) -> bool:
        """A write-back is under way."""
        return self._writing is not None

    def write(self, items: Sequence[Item], outcomes: Sequence[Outcome]) -> Written | None:
        """The fenced write-back, through outages; None if given back meanwhile (stuck) or if MySQL
        stayed away through the stop deadline."""
        entries = [item.entry for item in items]
        with self._lock:
            self._writing, self._given_back, self._held_back = (time.monotonic(), entries), False, False
        attempts = 0

        def attempt() -> Written:
            nonlocal attempts
            attempts += 1  # persist() tries again only after an outage (a lost connection)
            return self.writeback.write(items, outcomes, retry=attempts > 1)

        try:
            return self.persist(attempt, given_up=lambda: self._given_back)
        finally:
            with self._lock:
                self._writing = None

    def record_errors(self, items: Sequence[Item], outcomes: Sequence[Outcome]) -> None:
        """Count this batch's failures by error in Redis (best effort: status and the dashboard
        group failing rows by them without scanning the table)."""
        show = self.writeback.keys.show
        groups: dict[str, tuple[int, list[str]]] = {}
        for item, outcome in zip(items, outcomes, strict=True):
            if not outcome.ok:
                group = error_group(outcome.text)
                count, examples = groups.get(group, (0, []))
                examples.append(str(show(item.id)))
                groups[group] = (count + 1, examples)
        with contextlib.suppress(*REDIS_DOWN):
            self.store.record_errors(groups, self.writeback.db_epoch())

    def log_breakers(self, acked: Acked) -> None:
        """One line per change of a group's breaker (the acknowledgement that made it says so)."""
        workload = self.writeback.workload
        prefix = workload.log_prefix
        for name in acked.opened:
            log.warning(
                "%sgroup %s: %d checks failed in a row; its breaker is open, its rows wait %gs for a probe",
                prefix, name, workload.group_breaker_failures, workload.group_breaker_open,
            )  # fmt: skip
        for name in acked.kept_open:
            log.warning(
                "%sgroup %s: its probe failed; its breaker stays open (the wait doubled)", prefix, name
            )
        for name in acked.closed:
            log.warning(
                "%sgroup %s: its probe succeeded; its breaker is closed, its rows go again", prefix, name
            )

    def give_back(self, entries: Sequence[bytes], malformed: Sequence[bytes] = ()) -> None:
        """Return untouched entries to the head of the queue (malformed ones are dropped)."""
        self.acknowledge(list(malformed), entries, NOTHING_WRITTEN, len(malformed))

    def give_back_if_stuck(self, bound: float, others_can_write: Callable[[float], bool]) -> None:
        """From the heartbeat thread: a write-back running longer than `bound` is given back,
        if another worker can reach MySQL. When none can (MySQL is down for everyone), handing
        the batch round would only check it again and again: it stays, written once MySQL is back."""
        with self._lock:
            if self._writing is None or self._given_back or time.monotonic() - self._writing[0] < bound:
                return
            since, entries = self._writing
        if not others_can_write(time.monotonic() - since):
            if not self._held_back:
                self._held_back = True
                log.warning(
                    "%sthe write-back of %d rows has not landed in %.1fs, and no other worker reaches "
                    "mysql either: keeping them, to write once it is back",
                    self.writeback.workload.log_prefix, len(entries), time.monotonic() - since,
                )  # fmt: skip
            return
        self.store.acknowledge(self.worker_id, [], entries, Counts(), whole=False)
        with self._lock:
            self._given_back = True
        self.slots.release()  # others can write: the limit must not keep them waiting for this one
        self.counters.returned += len(entries)
        log.warning(
            "%sthe write-back of %d rows has not landed in %.1fs; gave them back for other workers "
            "(a late write is fenced out)",
            self.writeback.workload.log_prefix,
            len(entries),
            time.monotonic() - since,
        )

    def acknowledge(
        self,
        done: Sequence[bytes],
        back: Sequence[bytes],
        written: Written,
        malformed: int,
        deferred: Sequence[bytes] = (),
        gone: int = 0,
        failed: Sequence[bytes] = (),
    ) -> None:
        """Release finished (and deferred) entries and return untouched ones, through outages;
        `failed`: those whose checks failed (a group's breaker counts them)."""
        counts = Counts(written.succeeded, written.failed, written.stale, malformed, len(deferred), gone)
        whole = self.whole_batches
        acked = self.persist(
            lambda: self.store.acknowledge(
                self.worker_id, done, back, counts, whole=whole, deferred=deferred, failed=failed
            )
        )
        if isinstance(acked, Acked):
            self.log_breakers(acked)
            self.waiting_after_ack = acked.waiting
        c = self.counters
        c.checked += written.succeeded
        c.failed += written.failed
        c.stale += written.stale
        c.deferred += len(deferred)
        c.malformed += malformed
        c.gone += gone
        c.returned += len(back)
        checks = self.metrics.checks
        checks.labels("ok").inc(written.succeeded)
        checks.labels("failed").inc(written.failed)
        checks.labels("stale").inc(written.stale)
        checks.labels("deferred").inc(len(deferred))
        checks.labels("gone").inc(gone)
        self.metrics.malformed.inc(malformed)

    def record_lateness(self, items: Sequence[Item], outcomes: Sequence[Outcome], deferred: set) -> None:
        """Lateness (due time -> written back, on the database clock) of the rows just written."""
        now_ms = self.writeback.db_now_ms()
        lateness = [
            (now_ms - item.due_ms) / 1000
            for item, outcome in zip(items, outcomes, strict=True)
            if outcome.ok and (not deferred or item.entry not in deferred)
        ]
        if lateness:
            self.metrics.lateness.observe_many(lateness)
            self.lateness_max.observe(max(lateness))
