"""The end of every entry a worker takes: written back and acknowledged, or given back.

Both loops (batch and per-row) finish their work here and nowhere else: the fenced write-back
in a constant number of statements, the lateness of what was written, one acknowledgement
script call that releases the finished entries and returns untouched ones, and the counters.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

from shared.config import Settings
from shared.db import Database
from shared.entries import Item
from shared.metrics import WorkerMetrics
from shared.store import Counts, Store
from workers.checks import Outcome
from workers.writeback import WriteBack, Written

NOTHING_WRITTEN = Written(0, 0, 0)


class Counters:
    """What this worker has done; read by the heartbeat thread for status."""

    def __init__(self) -> None:
        self.checked = 0
        self.failed = 0
        self.stale = 0
        self.malformed = 0
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
        settings: Settings,
        db: Database,
        store: Store,
        worker_id: str,
        persist: Callable,
        metrics: WorkerMetrics,
    ):
        self.writeback = WriteBack(settings, db)
        self.store = store
        self.worker_id = worker_id
        self.persist = persist  # retries a step through outages until the stop deadline
        self.metrics = metrics
        self.counters = Counters()
        self.lateness_max = 0.0  # the largest lateness written since the last heartbeat

    def complete(self, items: Sequence[Item], outcomes: Sequence[Outcome], malformed: Sequence[bytes] = ()):
        """Write the outcomes back (fenced), then acknowledge; malformed entries are dropped."""
        written = self.persist(lambda: self.writeback.write(items, outcomes)) if items else NOTHING_WRITTEN
        if written is None:  # MySQL stayed away through the stop deadline: let others redo them
            self.give_back([item.entry for item in items], malformed)
            return
        if items:
            self.counters.batches += 1
            self.record_lateness(items, outcomes)
        self.acknowledge([item.entry for item in items] + list(malformed), [], written, len(malformed))

    def give_back(self, entries: Sequence[bytes], malformed: Sequence[bytes] = ()) -> None:
        """Return untouched entries to the head of the queue (malformed ones are dropped)."""
        self.acknowledge(list(malformed), entries, NOTHING_WRITTEN, len(malformed))

    def acknowledge(self, done: Sequence[bytes], back: Sequence[bytes], written: Written, malformed: int):
        """Release finished entries and return untouched ones, retrying through outages."""
        counts = Counts(written.succeeded, written.failed, written.stale, malformed)
        self.persist(lambda: self.store.acknowledge(self.worker_id, done, back, counts))
        c = self.counters
        c.checked += written.succeeded
        c.failed += written.failed
        c.stale += written.stale
        c.malformed += malformed
        c.returned += len(back)
        checks = self.metrics.checks
        checks.labels("ok").inc(written.succeeded)
        checks.labels("failed").inc(written.failed)
        checks.labels("stale").inc(written.stale)
        self.metrics.malformed.inc(malformed)

    def record_lateness(self, items: Sequence[Item], outcomes: Sequence[Outcome]) -> None:
        """Lateness (due time -> written back, on the database clock) of the rows just written."""
        now_ms = self.writeback.db_now_ms()
        lateness = [
            (now_ms - item.due_ms) / 1000 for item, outcome in zip(items, outcomes, strict=True) if outcome.ok
        ]
        if lateness:
            self.metrics.lateness.observe_many(lateness)
            self.lateness_max = max(self.lateness_max, max(lateness))

    def take_lateness_max(self) -> float:
        """The largest lateness since the previous call (one heartbeat's window)."""
        window_max, self.lateness_max = self.lateness_max, 0.0
        return window_max
