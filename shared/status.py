"""`recheck status`: is every row fresh, and if not, why? Facts from MySQL and Redis.

Fresh means no row overdue by more than 1 s AND checks not failing (a failed check is not a
fresh row: see shared/failing.py). Every figure sampled again and again is read through the
(due, id) index and capped, or from the workers' heartbeats, so sampling stays cheap on a table
of millions of rows with a large backlog; the count of failing rows is a capped scan, taken by
one-shot `recheck status` and at most every few seconds by a Sampler.

Freshness samples cost O(SAMPLED_COUNT_CAP) whatever the backlog: one pass over the oldest due
index entries gives all three counts, beyond the cap a count reads "N+" and the oldest lateness
(one index probe) tells how far behind. And one sample a second serves the whole deployment:
whoever samples first (a dispatcher's monitor, `recheck run`'s live line, `recheck watch`)
shares it in Redis for SHARE_MS, and the others read it instead of asking MySQL again.
"""

from __future__ import annotations

import time

from shared.config import Settings, redact_url
from shared.db import Database
from shared.failing import Recent, failing
from shared.metrics import SECONDS_BUCKETS, quantile
from shared.sql import Queries
from shared.store import Store

COUNT_CAP = 1_000_000  # one-shot `recheck status`
SAMPLED_COUNT_CAP = 10_000  # counts taken every second (dashboard, live line, watch): O(cap) each
SHARE_MS = 1000  # how long one freshness sample serves every sampler of a deployment
SLOW_EVERY = 30.0  # seconds between exact row counts and failing-rows samples in a Sampler
FAILING_EVERY = 5.0  # ... and between failing-rows samples while checks are failing
NOT_FRESH = 3  # `recheck status` exit code when rows are overdue or checks failing


def shown_key(key: int | str | bytes) -> int | str:
    """A key as status, JSON and the dashboard show it: binary keys as hex."""
    return key.hex() if isinstance(key, bytes | bytearray) else key


def freshness(settings: Settings, db: Database, queries: Queries, cap: int) -> dict:
    """Due and overdue counts (each exactly min(true count, cap)) and the oldest lateness."""
    args = {"interval_us": round(settings.interval * 1_000_000), "cap": cap}
    (due_now, overdue_1s, overdue_interval), *_ = db.query(queries.freshness_counts, args)
    oldest = db.scalar(queries.oldest_lateness)
    return {
        "due_now": int(due_now),
        "overdue_1s": int(overdue_1s),
        "overdue_interval": int(overdue_interval),
        "count_cap": cap,
        "oldest_lateness_s": max(float(oldest), 0.0) if oldest is not None else 0.0,
    }


def shared_freshness(settings: Settings, db: Database, store: Store, queries: Queries) -> dict:
    """The deployment's latest sample if one is under SHARE_MS old, else a new one, shared."""
    sample = store.shared_sample()
    if sample is None or sample.get("count_cap") != SAMPLED_COUNT_CAP:
        sample = freshness(settings, db, queries, SAMPLED_COUNT_CAP)
        store.share_sample(sample, SHARE_MS)
    return sample


def gather(
    settings: Settings, db: Database, store: Store, *, count_rows: bool = True, sampled: bool = False
) -> dict:
    """Every fact status shows. count_rows: also the counts that scan the table (rows, failing).
    sampled: taken again and again (counts capped at SAMPLED_COUNT_CAP, the sample shared)."""
    queries = Queries(settings)
    if sampled:
        fresh = shared_freshness(settings, db, store, queries)
    else:
        fresh = freshness(settings, db, queries, COUNT_CAP)
    cap = fresh["count_cap"]
    facts: dict = {
        "table": f"{settings.mysql.database}.{settings.table}",
        "mysql": redact_url(settings.mysql_url),
        "redis": redact_url(settings.redis_url),
        "interval_s": settings.interval,
        "rows": int(db.scalar(queries.count_rows)) if count_rows else None,
        **fresh,
        "quarantined": int(db.scalar(queries.count_quarantined)),
    }
    facts["failing_rows"] = int(db.scalar(queries.count_failing, {"cap": cap})) if count_rows else None
    facts["quarantined_ids"] = (
        [
            {"id": shown_key(i), "reason": reason}
            for i, reason in db.query(queries.list_quarantined, {"limit": 20})
        ]
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
    recent = Recent(
        sum(int(w.get("recent_checked") or 0) for w in workers),
        sum(int(w.get("recent_failed") or 0) for w in workers),
    )
    facts["recent_checks"] = recent.checked + recent.failed  # the last minute's, all live workers
    facts["recent_failed"] = recent.failed
    facts["checks_failing"] = failing(recent, settings.failing_threshold)
    facts["last_error"] = next((w["last_error"] for w in workers if w.get("last_error")), None)
    facts["errors"] = error_groups(store)
    facts["fresh"] = facts["overdue_1s"] == 0 and not facts["checks_failing"]
    return facts


class Sampler:
    """Facts sampled again and again (dashboard, --watch): cheap queries each time, the exact
    row count every 30 s and failing rows every 30 s (every 5 s while checks fail); checks/s
    from the cluster-wide counters and lateness percentiles from the histograms workers
    publish, both since the last sample."""

    def __init__(self, settings: Settings, db: Database, store: Store):
        self.settings = settings
        self.db = db
        self.store = store
        self.queries = Queries(settings)
        self.cap = SAMPLED_COUNT_CAP
        self._slow_at = -SLOW_EVERY
        self._failing_at = -SLOW_EVERY
        self._rows: int | None = None
        self._failing_rows: int | None = None
        self._failing: list[dict] = []
        self._previous: tuple[float, int] | None = None  # (time, checked + failed)
        self._worker_buckets: dict[str, list[int]] = {}

    def sample(self) -> dict:
        now = time.monotonic()
        slow = now - self._slow_at >= SLOW_EVERY
        facts = gather(self.settings, self.db, self.store, count_rows=False, sampled=True)
        if slow:
            self._slow_at = now
            self._rows = int(self.db.scalar(self.queries.count_rows))
        # Failing rows: a scan, so every 30 s, but every 5 s while checks fail or rows are failing.
        hurry = facts["recent_failed"] or self._failing
        if slow or (hurry and now - self._failing_at >= FAILING_EVERY):
            self._failing_at = now
            self._failing_rows = int(self.db.scalar(self.queries.count_failing, {"cap": self.cap}))
            self._failing = [
                {"id": shown_key(i), "fails": int(n), "error": error}
                for i, n, error in self.db.query(self.queries.list_failing, {"limit": 20})
            ]
        facts["rows"] = self._rows
        facts["failing_rows"] = self._failing_rows
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


ERRORS_SHOWN = 10
ERRORS_RECENT_S = 3600.0  # groups seen in the last hour are shown


def error_groups(store: Store, now: float | None = None) -> list[dict]:
    """Failures of the last hour grouped by their (normalised) error, most frequent first: the
    counts workers keep in Redis (shared/lua/errors.lua), so no scan of the table."""
    now = time.time() if now is None else now
    groups = [
        {"error": message, "count": int(group.get("count", 0)), "examples": group["examples"],
         "first_seen": group.get("first"), "last_seen": group.get("last")}
        for message, group in store.error_groups().items()
        if float(group.get("last", 0)) >= now - ERRORS_RECENT_S
    ]  # fmt: skip
    return sorted(groups, key=lambda g: -g["count"])[:ERRORS_SHOWN]


def clock(unix: float | None) -> str:
    return "-" if unix is None else time.strftime("%H:%M:%S", time.localtime(float(unix)))


def headline(facts: dict) -> str:
    """The one line a screen leads with (the dashboard's page says the same in its own code)."""
    rows = "All" if facts["rows"] is None else f"All {facts['rows']:,}"
    if facts["fresh"]:
        return f"{rows} rows fresh"
    if facts["overdue_1s"]:
        capped = "+" if facts["overdue_1s"] >= facts["count_cap"] else ""
        return f"{facts['overdue_1s']:,}{capped} rows overdue"
    return "Checks failing"


def verdict(facts: dict) -> str:
    if facts["fresh"]:
        return "every row fresh: no row is overdue by more than 1 s, and checks succeed"
    failing_part = ""
    if facts["checks_failing"]:
        share = facts["recent_failed"] / max(facts["recent_checks"], 1)
        failing_part = (
            f"checks failing: {share:.0%} of the {facts['recent_checks']:,} checks in the last minute "
            f"failed (last error: {facts['last_error'] or 'unknown'})"
        )
        if facts["overdue_1s"] == 0:
            return f"NOT FRESH: {failing_part}"
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
    overdue = f"{shown} rows overdue by more than 1 s, the oldest by {facts['oldest_lateness_s']:.1f} s{why}"
    return f"NOT FRESH: {overdue}" + (f"; {failing_part}" if failing_part else "")


def render(facts: dict, workload: str | None = None) -> str:
    """The text `recheck status` prints for one workload (named when there are several)."""

    def n(value) -> str:
        return "-" if value is None else f"{value:,}"

    named = f"workload {workload}: " if workload else ""
    lines = [
        f"recheck status: {named}{facts['table']} every {facts['interval_s']:g} s",
        f"  rows              {n(facts['rows'])}",
        f"  due now           {n(facts['due_now'])}",
        f"  overdue > 1 s     {n(facts['overdue_1s'])}",
        f"  oldest lateness   {facts['oldest_lateness_s']:.2f} s",
        f"  failing rows      {n(facts['failing_rows'])}"
        f"   (checks in the last minute {facts['recent_checks']:,}, failed {facts['recent_failed']:,})",
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
    if facts["errors"]:
        lines.append("  failures in the last hour, by error:")
    for group in facts["errors"]:
        examples = ", ".join(group["examples"][:3])
        lines.append(
            f"    {group['count']:>9,}x  {group['error']}  (e.g. {examples}; "
            f"first {clock(group['first_seen'])}, last {clock(group['last_seen'])})"
        )
    lines.append(f"  {verdict(facts)}")
    return "\n".join(lines)
