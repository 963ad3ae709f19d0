"""Prometheus metrics: what each process exports, and a histogram cheap enough for every row.

Workers export what they did (checks, duration, lateness); dispatchers export the cluster's
freshness, sampled from MySQL and Redis once a second (see dispatcher/monitor.py). Every name
starts with recheck_, counters end in _total, durations are in seconds, and every series carries
a `workload` label. The families are registered once per process (WorkerMetrics,
DispatcherMetrics); `.of(workload)` gives one workload's series under the attribute names the
code uses (`.checks.labels(outcome)`, `.lateness.observe_many(...)`).
"""

from __future__ import annotations

import bisect
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, disable_created_metrics, make_wsgi_app
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer

from recheck.shared.views.buckets import SECONDS_BUCKETS

disable_created_metrics()  # no *_created series: noise for dashboards and alerts

log = logging.getLogger(__name__)


class BulkHistogram:
    """Cumulative-bucket histogram fed a batch at a time (a bisect per value, one lock per batch).

    prometheus_client's Histogram.observe takes a lock per value: too slow for 100,000 rows a
    second. This one is exported through a collector in the same format.
    """

    def __init__(self, name: str, documentation: str, buckets: Sequence[float] = SECONDS_BUCKETS):
        self.name = name
        self.documentation = documentation
        self.bounds = list(buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # the last slot is +Inf
        self.total = 0.0
        self._lock = threading.Lock()

    def observe_many(self, values: Iterable[float]) -> None:
        bounds, local, total = self.bounds, [0] * len(self.counts), 0.0
        for value in values:
            local[bisect.bisect_left(bounds, value)] += 1
            total += value
        with self._lock:
            for i, n in enumerate(local):
                self.counts[i] += n
            self.total += total

    def snapshot(self) -> tuple[list[int], float]:
        with self._lock:
            return list(self.counts), self.total

    def cumulative(self) -> tuple[list[tuple[str, int]], float]:
        counts, total = self.snapshot()
        cumulative, running = [], 0
        for bound, n in zip([*map(str, self.bounds), "+Inf"], counts, strict=True):
            running += n
            cumulative.append((bound, running))
        return cumulative, total


class LabelledBulkHistograms:
    """One BulkHistogram per workload, exported as one family with a `workload` label."""

    def __init__(self, name: str, documentation: str):
        self.name = name
        self.documentation = documentation
        self._by_workload: dict[str, BulkHistogram] = {}
        self._lock = threading.Lock()

    def labels(self, workload: str) -> BulkHistogram:
        with self._lock:
            if workload not in self._by_workload:
                self._by_workload[workload] = BulkHistogram(self.name, self.documentation)
            return self._by_workload[workload]

    def collect(self):
        family = HistogramMetricFamily(self.name, self.documentation, labels=["workload"])
        with self._lock:
            histograms = dict(self._by_workload)
        for workload, histogram in sorted(histograms.items()):
            cumulative, total = histogram.cumulative()
            family.add_metric([workload], cumulative, total)
        yield family


class RecentMax:
    """The largest value seen in the last `window` seconds (thread-safe). Published in each
    heartbeat, so a reader sampling less often than the heartbeat beats (the benchmark, once a
    second) still sees every maximum: the windows of successive heartbeats overlap."""

    def __init__(self, window: float = 2.0):
        self.window = window
        self._seen: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self._seen.append((time.monotonic(), value))

    def value(self) -> float:
        with self._lock:
            cutoff = time.monotonic() - self.window
            while self._seen and self._seen[0][0] < cutoff:
                self._seen.popleft()
            return max((v for _, v in self._seen), default=0.0)


class _Bound:
    """A labelled family with the workload label already chosen: .labels(rest...)."""

    def __init__(self, family, workload: str):
        self.family, self.workload = family, workload

    def labels(self, *rest: str):
        return self.family.labels(self.workload, *rest)


WORKLOAD = ("workload",)


class WorkerMetrics:
    """The worker's metric families (once per process)."""

    def __init__(self, registry=REGISTRY):
        self.checks = Counter(
            "recheck_checks_total",
            "Rows whose check completed, by outcome: ok (written), failed (written as a failure, tried "
            "again per the retry setting), stale (fenced out: the row had been written for that due time), "
            "deferred (the application held the row locked: not written, checked again later)",
            [*WORKLOAD, "outcome"],
            registry=registry,
        )
        self.malformed = Counter(
            "recheck_malformed_entries_total",
            "Queue entries dropped as malformed",
            WORKLOAD,
            registry=registry,
        )
        self.check_duration = Histogram(
            "recheck_check_duration_seconds",
            "Time one call of the check function took (a batch, or one row for per-row checks)",
            WORKLOAD,
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.write_slot_wait = Counter(
            "recheck_write_slot_wait_seconds_total",
            "Time workers spent getting a write slot before a write-back (RECHECK_WRITE_SLOTS): "
            "growing by about a second per second and per worker, the slots are too few",
            WORKLOAD,
            registry=registry,
        )
        self.limit_granted = Counter(
            "recheck_limit_granted_total",
            "Ids taken under the workload's rate_limit or max_in_flight (each a token of the rate limit)",
            WORKLOAD,
            registry=registry,
        )
        self.limit_wait = Counter(
            "recheck_limit_wait_seconds_total",
            "Time workers waited with ids queued because of the workload's limits: reason rate "
            "(tokens of rate_limit), in_flight (max_in_flight checks running) or backoff (backing "
            "off a failing provider: backoff_threshold)",
            [*WORKLOAD, "reason"],
            registry=registry,
        )
        self.lateness = LabelledBulkHistograms(
            "recheck_lateness_seconds", "Time from a row's due time to its result being written back"
        )
        registry.register(self.lateness)

    def of(self, workload: str) -> WorkloadWorkerMetrics:
        return WorkloadWorkerMetrics(self, workload)


class WorkloadWorkerMetrics:
    """One workload's worker series."""

    def __init__(self, families: WorkerMetrics, workload: str):
        self.checks = _Bound(families.checks, workload)
        self.malformed = families.malformed.labels(workload)
        self.check_duration = families.check_duration.labels(workload)
        self.write_slot_wait = families.write_slot_wait.labels(workload)
        self.lateness = families.lateness.labels(workload)
        self.limit_granted = families.limit_granted.labels(workload)
        self.limit_wait = _Bound(families.limit_wait, workload)


class DispatcherMetrics:
    """The dispatcher's metric families (once per process); .of(workload) for one workload's."""

    def __init__(self, registry=REGISTRY):
        def gauge(name: str, doc: str, labels: Sequence[str] = ()) -> Gauge:
            return Gauge(name, doc, [*WORKLOAD, *labels], registry=registry)

        self.dispatched = Counter(
            "recheck_dispatched_total", "Ids pushed to the queue", WORKLOAD, registry=registry
        )
        self.reclaimed = Counter(
            "recheck_reclaimed_total",
            "Ids given back from workers whose heartbeat expired",
            WORKLOAD,
            registry=registry,
        )
        self.quarantined = Counter(
            "recheck_quarantined_total",
            "Ids quarantined for killing their workers",
            WORKLOAD,
            registry=registry,
        )
        self.last_dispatch = gauge(
            "recheck_last_dispatch_timestamp_seconds", "Unix time of the last push of due ids to the queue"
        )
        self.leader = gauge(
            "recheck_dispatcher_leader", "1 if this dispatcher holds the leader lease, else 0"
        )
        self.interval = gauge(
            "recheck_interval_seconds",
            "The shortest interval of any row: the workload's, or its rows' own (an interval column)",
        )
        self.rows = gauge("recheck_rows", "Rows in the table")
        self.overdue = gauge(
            "recheck_rows_overdue",
            "Rows waiting (no worker is checking them) past their due time by more than the threshold "
            "(1s, or their own interval), counted through the index up to a cap",
            ["threshold"],
        )
        self.overdue_in_flight = gauge(
            "recheck_rows_overdue_in_flight",
            "Rows more than 1 s past their due time that a worker is checking (slow checks, in flight)",
        )
        self.oldest = gauge(
            "recheck_oldest_lateness_seconds",
            "How long the most overdue row is past its due time, in flight or not (0 if none)",
        )
        self.waiting = gauge(
            "recheck_waiting_lateness_seconds",
            "How long the oldest row waiting for a worker is past its due time (0 if none)",
        )
        self.waiting_intervals = gauge(
            "recheck_waiting_lateness_intervals",
            "The most any waiting row is late, in its own interval (2: two of its intervals late)",
        )
        self.past_timeout = gauge(
            "recheck_checks_past_timeout", "Checks abandoned after their timeout whose threads still run"
        )
        self.failing_threshold = gauge(
            "recheck_failing_threshold",
            "The share of failed checks above which the workload counts as failing (its failing_threshold)",
        )
        self.queue_depth = gauge("recheck_queue_depth", "Ids waiting in the queue")
        self.groups_open = gauge(
            "recheck_groups_open", "Groups whose breaker is open: their rows wait (group_breaker_failures)"
        )
        self.priority_depth = gauge(
            "recheck_priority_queue_depth", "Of the ids waiting, those in the priority list (priority_column)"
        )
        self.in_flight = gauge("recheck_in_flight", "Ids queued or being checked")
        self.live_workers = gauge("recheck_live_workers", "Workers whose heartbeat is alive")
        self.quarantined_rows = gauge("recheck_quarantined_rows", "Rows currently quarantined")
        self.paused_rows = gauge("recheck_paused_rows", "Rows the application paused (never dispatched)")
        self.dead_rows = gauge(
            "recheck_dead_rows", "One-shot rows that failed max_attempts times (kept, never dispatched)"
        )
        self.one_shot = gauge("recheck_one_shot", "1 for a one-shot workload (once = true), 0 otherwise")
        self.pending_rows = gauge(
            "recheck_pending_rows", "One-shot rows still to do, due now or later (counted up to a cap)"
        )
        self.limited = gauge(
            "recheck_rate_limited",
            "1 while the workload's rate_limit or max_in_flight holds workers' takes back (ids wait for "
            "tokens, not for workers)",
        )
        self.rate_limit = gauge("recheck_rate_limit", "The workload's rate_limit in checks/s (0: none)")
        self.failing_rows = gauge(
            "recheck_failing_rows", "Rows whose last check failed (sampled, counted up to a cap)"
        )
        self._bound: dict[str, WorkloadDispatcherMetrics] = {}
        self._lock = threading.Lock()

    def of(self, workload: str) -> WorkloadDispatcherMetrics:
        with self._lock:
            if workload not in self._bound:
                self._bound[workload] = WorkloadDispatcherMetrics(self, workload)
            return self._bound[workload]


class WorkloadDispatcherMetrics:
    """One workload's dispatcher series, under the families' own names (bound when made)."""

    def __getattr__(self, name: str) -> Any:  # the series set in __init__, one per family
        raise AttributeError(name)

    def __init__(self, families: DispatcherMetrics, workload: str):
        for name, family in vars(families).items():
            if name.startswith("_"):
                continue
            if name == "overdue":  # labelled by threshold too
                setattr(self, name, _Bound(family, workload))
            else:
                setattr(self, name, family.labels(workload))


@cache
def worker_families() -> WorkerMetrics:
    """One set per process (prometheus-client allows each name once per registry)."""
    return WorkerMetrics()


@cache
def dispatcher_families() -> DispatcherMetrics:
    return DispatcherMetrics()


@cache
def worker_metrics(workload: str = "default") -> WorkloadWorkerMetrics:
    return worker_families().of(workload)


def dispatcher_metrics(workload: str = "default") -> WorkloadDispatcherMetrics:
    return dispatcher_families().of(workload)


# The metrics server is never shut down (it goes with its process), so its loop need not wake to
# look for a shutdown: prometheus_client's start_http_server polls every 0.5 s, two wake-ups a
# second in every idle process.
METRICS_POLL_S = 3600.0


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


def serve(host: str, port: int, registry=REGISTRY) -> bool:
    """Expose /metrics; a port already in use is reported once, not fatal. 0 disables. As
    prometheus_client's start_http_server (an IPv6 host too), but with its loop asleep."""
    if not port:
        return False
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        family, address = found[0], str(found[4][0])
        server = type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})
        app = make_wsgi_app(registry)
        httpd: WSGIServer = make_server(address, port, app, server, handler_class=QuietHandler)
    except OSError as error:
        log.warning("metrics not served: cannot listen on %s:%d (%s)", host, port, error)
        return False
    poll = {"poll_interval": METRICS_POLL_S}
    threading.Thread(target=httpd.serve_forever, kwargs=poll, name="metrics", daemon=True).start()
    log.info("metrics on http://%s:%d/metrics", host, port)
    return True
