"""Freshness, sampled once a second, for /metrics and the dashboard page with its charts.

One sample serves every consumer, so any number of people watching the dashboard cost MySQL
nothing more (see shared/views/status.py, Sampler, for what each sample costs). A workload at rest
(nothing due, waiting or in flight, no check in the last minute) is sampled every REST_EVERY
seconds instead, until its dispatch loop finds work (`busy`), the dashboard acts on one of its rows
(`wake`) or a sample finds it no longer at rest.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from recheck.shared.config import Workload
from recheck.shared.core.records import StatusFacts
from recheck.shared.mysql.db import Database
from recheck.shared.policies.lifecycle import lifecycle_of
from recheck.shared.redis.store import Store
from recheck.shared.views.status import Sampler

HISTORY_SECONDS = 600
# Seconds between samples of a workload at rest: what changes then (a worker more or less, a row
# paused) is not urgent, and work found by its dispatch loop is sampled at once. Each sample is
# several MySQL and Redis reads: at 5 s, ten idle workloads' samples were the largest part of an
# idle dispatcher's CPU.
REST_EVERY = 15.0


def at_rest(facts: StatusFacts) -> bool:
    """Nothing due, waiting or in flight, and no check lately: the next sample can wait."""
    return not (facts.due_now or facts.queue_depth or facts.in_flight or facts.checks_per_second)


class Monitor:
    def __init__(
        self,
        workload: Workload,
        db: Database,
        store: Store,
        metrics,
        busy: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ):
        """busy: whether the dispatch loop has work for this workload now (a sample at rest then
        comes at once, not after REST_EVERY)."""
        self.workload = workload.name  # its name (the dashboard's tabs)
        self.title = f"{workload.mysql.database}.{workload.table}"
        self.sampler = Sampler(workload, db, store)
        self.db = db
        self.metrics = metrics
        self.history: deque[dict] = deque(maxlen=HISTORY_SECONDS)
        self.latest: StatusFacts | None = None
        self._lock = threading.Lock()
        self.busy = busy
        self.clock = clock
        self.rest_until = 0.0  # the last sample found the workload at rest: the next one waits until then
        metrics.interval.set(workload.interval)  # until a sample has read the rows' own (interval column)
        metrics.failing_threshold.set(workload.failing_threshold)
        metrics.one_shot.set(1 if lifecycle_of(workload).one_shot else 0)

    def run_once(self) -> StatusFacts | None:
        """Sample (None: the workload is at rest and it is not time yet)."""
        now = self.clock()
        if now < self.rest_until and not self.busy():
            return None
        facts = self.sample()
        self.rest_until = now + REST_EVERY if at_rest(facts) else 0.0
        return facts

    def wake(self) -> None:
        """Sample at the next run even at rest (an action on a row from the dashboard)."""
        self.rest_until = 0.0

    def sample(self) -> StatusFacts:
        facts = self.sampler.sample()
        self._export(facts)
        point = {
            "checks_per_second": facts.checks_per_second,
            "lateness_p50_s": facts.lateness_p50_s,
            "lateness_p99_s": facts.lateness_p99_s,
            "oldest_waiting_s": facts.oldest_waiting_s,
            "overdue_waiting": facts.overdue_waiting,
            "queue_depth": facts.queue_depth,
            "in_flight": facts.in_flight,
            "live_workers": facts.live_workers,
            "t": round(facts.sampled_at or 0.0, 3),
        }
        with self._lock:
            self.latest = facts
            self.history.append(point)
        return facts

    def snapshot(self) -> dict:
        """The latest sample and the history, as the dashboard's page reads them (JSON)."""
        with self._lock:
            return {"facts": self.latest.as_json() if self.latest else None, "history": list(self.history)}

    def _export(self, facts: StatusFacts) -> None:
        m = self.metrics
        if facts.rows is not None:
            m.rows.set(facts.rows)
        m.overdue.labels("1s").set(facts.overdue_waiting)
        m.overdue.labels("interval").set(facts.overdue_interval)
        m.overdue_in_flight.set(facts.overdue_in_flight)
        m.oldest.set(facts.oldest_lateness_s)
        m.waiting.set(facts.oldest_waiting_s)
        m.waiting_intervals.set(facts.waiting_intervals)
        m.past_timeout.set(facts.checks_past_timeout)
        if facts.interval_range_s:
            m.interval.set(facts.interval_range_s[0])
        m.queue_depth.set(facts.queue_depth)
        m.priority_depth.set(facts.priority.depth if facts.priority else 0)
        m.groups_open.set(facts.groups.open if facts.groups else 0)
        m.in_flight.set(facts.in_flight)
        m.live_workers.set(facts.live_workers)
        m.quarantined_rows.set(facts.quarantined)
        m.paused_rows.set(facts.paused)
        if facts.one_shot:
            m.dead_rows.set(facts.one_shot.dead)
            if facts.one_shot.pending is not None:
                m.pending_rows.set(facts.one_shot.pending)
        m.limited.set(1 if facts.limited_by else 0)
        m.rate_limit.set(facts.rate_limit)
        if facts.failing_rows is not None:
            m.failing_rows.set(facts.failing_rows)
