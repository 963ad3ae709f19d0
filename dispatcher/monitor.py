"""Freshness, sampled once a second, for /metrics and the dashboard page with its charts.

One sample serves every consumer, so any number of people watching the dashboard cost MySQL
nothing more (see shared.status.Sampler for what each sample costs).
"""

from __future__ import annotations

import threading
from collections import deque

from shared.config import Settings
from shared.db import Database
from shared.status import Sampler
from shared.store import Store

HISTORY_SECONDS = 600


class Monitor:
    def __init__(self, settings: Settings, db: Database, store: Store, metrics):
        self.workload = settings.workload
        self.title = f"{settings.mysql.database}.{settings.table}"
        self.sampler = Sampler(settings, db, store)
        self.db = db
        self.metrics = metrics
        self.history: deque[dict] = deque(maxlen=HISTORY_SECONDS)
        self.latest: dict | None = None
        self._lock = threading.Lock()
        metrics.interval.set(settings.interval)

    def run_once(self) -> dict:
        facts = self.sampler.sample()
        self._export(facts)
        point = {
            key: facts[key]
            for key in ("checks_per_second", "lateness_p50_s", "lateness_p99_s", "oldest_lateness_s",
                        "overdue_1s", "queue_depth", "in_flight", "live_workers")
        }  # fmt: skip
        point["t"] = round(facts["sampled_at"], 3)
        with self._lock:
            self.latest = facts
            self.history.append(point)
        return facts

    def snapshot(self) -> dict:
        with self._lock:
            return {"facts": self.latest, "history": list(self.history)}

    def _export(self, facts: dict) -> None:
        m = self.metrics
        if facts["rows"] is not None:
            m.rows.set(facts["rows"])
        m.overdue.labels("1s").set(facts["overdue_1s"])
        m.overdue.labels("interval").set(facts["overdue_interval"])
        m.oldest.set(facts["oldest_lateness_s"])
        m.queue_depth.set(facts["queue_depth"])
        m.in_flight.set(facts["in_flight"])
        m.live_workers.set(facts["live_workers"])
        m.quarantined_rows.set(facts["quarantined"])
        if facts["failing_rows"] is not None:
            m.failing_rows.set(facts["failing_rows"])
