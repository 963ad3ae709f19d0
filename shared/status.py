"""`recheck status`: is every row fresh, and if not, why? Facts from MySQL and Redis.

Every MySQL figure is read through the (due, id) index and capped, so status stays cheap on
a table of millions of rows with a large backlog.
"""

from __future__ import annotations

import time

from shared.config import Settings, redact_url
from shared.db import Database
from shared.metrics import SECONDS_BUCKETS, quantile
from shared.sql import Queries
from shared.store import Store

COUNT_CAP = 1_000_000  # one-shot `recheck status`
SAMPLED_COUNT_CAP = 100_000  # counts taken every second (dashboard, --watch): O(cap) each
SLOW_EVERY = 30.0  # seconds between exact row counts and failing-rows samples in a Sampler


def _capped(db: Database, queries: Queries, lateness_s: float, cap: int) -> int:
    return int(db.scalar(queries.count_due, {"lateness_us": round(lateness_s * 1_000_000), "cap": cap}))


def gather(
    settings: Settings, db: Database, store: Store, *, count_rows: bool = True, cap: int = COUNT_CAP
) -> dict:
    queries = Queries(settings)
    oldest = db.scalar(queries.oldest_lateness)
    facts: dict = {
        "table": f"{settings.mysql.database}.{settings.table}",
        "mysql": redact_url(settings.mysql_url),
        "redis": redact_url(settings.redis_url),
        "interval_s": settings.interval,
        "rows": int(db.scalar(queries.count_rows)) if count_rows else None,
        "due_now": _capped(db, queries, 0.0, cap),
        "overdue_1s": _capped(db, queries, 1.0, cap),
        "overdue_interval": _capped(db, queries, settings.interval, cap),
        "count_cap": cap,
        "oldest_lateness_s": max(float(oldest), 0.0) if oldest is not None else 0.0,
        "quarantined": int(db.scalar(queries.count_quarantined)),
    }
    facts["quarantined_ids"] = (
        [{"id": int(i), "reason": reason} for i, reason in db.query(queries.list_quarantined, {"limit": 20})]
        if facts["quarantined"]
        else []
    )
    overview = store.overview()
    workers = store.live_workers()
    dispatchers = store.live_dispatchers()
    facts.update(
        {
            "queue_depth": overview.queue_depth,
            "suspects": overview.suspects,
            "in_flight": overview.in_flight,
            "live_workers": len(workers),
            "live_dispatchers": len(dispatchers),
            "leader": overview.leader,
            "dispatchers": dispatchers,
            "checks_per_second": round(sum(float(w.get("rate", 0)) for w in workers), 1),
            "workers": workers,
            "counters": overview.counters,
        }
    )
    facts["fresh"] = facts["overdue_1s"] == 0
    return facts


class Sampler:
    """Facts sampled again and again (dashboard, --watch): cheap queries each time, the exact
    row count and a failing-rows sample every 30 s; checks/s from the cluster-wide counters
    and lateness percentiles from the histograms workers publish, both since the last sample."""

    def __init__(self, settings: Settings, db: Database, store: Store):
        self.settings = settings
        self.db = db
        self.store = store
        self.queries = Queries(settings)
        self._slow_at = -SLOW_EVERY
        self._rows: int | None = None
        self._failing: list[dict] = []
        self._previous: tuple[float, int] | None = None  # (time, checked + failed)
        self._worker_buckets: dict[str, list[int]] = {}

    def sample(self) -> dict:
        now = time.monotonic()
        slow = now - self._slow_at >= SLOW_EVERY
        facts = gather(self.settings, self.db, self.store, count_rows=slow, cap=SAMPLED_COUNT_CAP)
        if slow:
            self._slow_at = now
            self._rows = facts["rows"]
            self._failing = [
                {"id": int(i), "fails": int(n), "error": error}
                for i, n, error in self.db.query(self.queries.list_failing, {"limit": 20})
            ]
        facts["rows"] = self._rows
        facts["failing"] = self._failing
        facts["checks_per_second"] = self._rate(now, facts["counters"])
        facts["lateness_p50_s"], facts["lateness_p99_s"] = self._recent_lateness(facts["workers"])
        facts["sampled_at"] = time.time()
        for worker in facts["workers"]:
            worker.pop("lateness_buckets", None)  # consumed above; too bulky to pass on
        return facts

    def _rate(self, now: float, counters: dict) -> float:
        done = counters.get("checked", 0) + counters.get("failed", 0)
        previous, self._previous = self._previous, (now, done)
        if previous is None or now <= previous[0] or done < previous[1]:  # first sample, or Redis lost data
            return 0.0
        return round((done - previous[1]) / (now - previous[0]), 1)

    def _recent_lateness(self, workers: list[dict]) -> tuple[float | None, float | None]:
        """p50 and p99 of rows written since the previous sample, all workers together."""
        delta = [0] * (len(SECONDS_BUCKETS) + 1)
        seen = {}
        for worker in workers:
            buckets = worker.get("lateness_buckets")
            if not isinstance(buckets, list) or len(buckets) != len(delta):
                continue
            worker_id = str(worker.get("id"))
            previous = self._worker_buckets.get(worker_id)
            if previous is not None:
                for i, (now_n, then_n) in enumerate(zip(buckets, previous, strict=True)):
                    delta[i] += max(int(now_n) - int(then_n), 0)
            seen[worker_id] = buckets
        self._worker_buckets = seen
        return quantile(delta, SECONDS_BUCKETS, 0.5), quantile(delta, SECONDS_BUCKETS, 0.99)


def verdict(facts: dict) -> str:
    if facts["fresh"]:
        return "every row fresh: no row is overdue by more than 1 s"
    shown = f"{facts['overdue_1s']:,}" + ("+" if facts["overdue_1s"] >= facts["count_cap"] else "")
    reasons = []
    if facts["live_workers"] == 0:
        reasons.append("no live workers")
    if facts["live_dispatchers"] == 0:
        reasons.append("no live dispatcher")
    elif facts["leader"] is None:
        reasons.append("no dispatcher holds the leader lease")
    if facts["queue_depth"] and facts["live_workers"]:
        reasons.append(f"{facts['queue_depth']:,} ids waiting: workers are behind")
    why = f" ({'; '.join(reasons)})" if reasons else ""
    return f"{shown} rows overdue by more than 1 s, the oldest by {facts['oldest_lateness_s']:.1f} s{why}"


def render(facts: dict) -> str:
    def n(value) -> str:
        return "-" if value is None else f"{value:,}"

    lines = [
        f"recheck status: {facts['table']} every {facts['interval_s']:g} s",
        f"  rows              {n(facts['rows'])}",
        f"  due now           {n(facts['due_now'])}",
        f"  overdue > 1 s     {n(facts['overdue_1s'])}",
        f"  oldest lateness   {facts['oldest_lateness_s']:.2f} s",
        f"  quarantined       {n(facts['quarantined'])}",
        f"  queue depth       {n(facts['queue_depth'])}   suspects {n(facts['suspects'])}",
        f"  in flight         {n(facts['in_flight'])}",
        f"  live workers      {facts['live_workers']}   dispatchers {facts['live_dispatchers']}"
        f" (leader {facts['leader'] or 'none'})",
        f"  checks/s          {facts['checks_per_second']:,.0f}",
    ]
    for worker in facts["workers"]:
        lines.append(
            f"    {worker.get('id', '?'):<32} {float(worker.get('rate', 0)):>9,.0f}/s"
            f"  checked {int(worker.get('checked', 0)):,}  failed {int(worker.get('failed', 0)):,}"
        )
    for row in facts["quarantined_ids"]:
        lines.append(f"    quarantined id {row['id']}: {row['reason']}")
    lines.append(f"  {verdict(facts)}")
    return "\n".join(lines)
