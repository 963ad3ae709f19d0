"""The dispatcher process: the dispatch loop in the main thread, reconciler jobs on APScheduler.

Several dispatcher processes may run (compose runs two): the one holding the leader lease
dispatches and runs the jobs, the others stand by and take over when its lease expires.
The jobs run in APScheduler's thread pool, each with its own MySQL connection (PyMySQL
connections are not thread-safe) and the shared, thread-safe Redis client.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time

from apscheduler.schedulers.background import BackgroundScheduler

from dispatcher.dispatcher import Dispatcher, DuePusher
from dispatcher.lease import Lease, NotLeader
from dispatcher.monitor import Monitor
from dispatcher.reconciler import OrphanCollector, Reclaimer, Sweeper
from dispatcher.web import Dashboard
from shared.config import Settings
from shared.db import Database
from shared.launch import launch
from shared.loop import Service, attempt
from shared.metrics import dispatcher_metrics
from shared.metrics import serve as serve_metrics
from shared.presence import Presence
from shared.schema import require_table

log = logging.getLogger(__name__)

MONITOR_INTERVAL = 1.0  # seconds between freshness samples (metrics, dashboard)
DESCRIPTION = "Run the dispatcher and its reconciler jobs (configuration: RECHECK_* variables, .env)."


class DispatcherService(Service):
    role = "dispatcher"

    def __init__(self, settings: Settings):
        super().__init__(settings)
        keys = self.keys
        self.presence = Presence(
            self.store, keys.dispatcher_heartbeat(self.id), keys.dispatchers, self.id, settings.heartbeat_ttl
        )
        self.lease = Lease(self.store, self.id, settings.leader_ttl)
        self.dispatcher = Dispatcher(settings, DuePusher(settings, self.db, self.store, self.id))
        self.scheduler = BackgroundScheduler(
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
        )
        self.metrics = dispatcher_metrics()
        self.job_dbs: list[Database] = []
        self.monitor = Monitor(settings, self._own_db(), self.store, self.metrics)
        self.jobs = self._make_jobs()
        title = f"{settings.mysql.database}.{settings.table}"
        self.dashboard = Dashboard(self.monitor, settings.dashboard_host, settings.dashboard_port, title)
        self.next_beat = 0.0
        self.served = False

    def _own_db(self) -> Database:
        """Each job runs in its own thread: its own MySQL connection."""
        self.job_dbs.append(Database(self.settings))
        return self.job_dbs[-1]

    def _make_jobs(self) -> dict:
        """name -> (job, period, leader only)."""
        s, own_db = self.settings, self._own_db
        pusher = DuePusher(s, own_db(), self.store, self.id)
        sweeper = Sweeper(s, pusher, dispatcher_cursor=lambda: self.dispatcher.cursor)
        jobs = {
            "reclaim": (Reclaimer(s, own_db(), self.store), s.reclaim_interval, True),
            "sweep": (sweeper, s.sweep_interval, True),
            "orphans": (OrphanCollector(s, own_db(), self.store), s.orphan_interval, True),
        }
        if s.metrics_port or s.dashboard_port:  # sampling costs MySQL queries: only when someone looks
            jobs["monitor"] = (self.monitor, MONITOR_INTERVAL, False)  # standbys serve the dashboard too
        return jobs

    def startup(self) -> None:
        require_table(self.settings, self.db)
        self.client.ping()
        if not self.served:  # once: a busy port is reported, not retried
            self.served = True
            serve_metrics(self.settings.metrics_host, self.settings.metrics_port)
            self.dashboard.start()
        if not self.scheduler.running:
            for name, (job, period, leader_only) in self.jobs.items():
                self.scheduler.add_job(
                    self._job_runner(job, leader_only), "interval", seconds=period, id=name
                )
            self.scheduler.start()
        log.info(
            "dispatcher %s started: table %s.%s, interval %gs, high water %d",
            self.id,
            self.settings.mysql.database,
            self.settings.table,
            self.settings.interval,
            self.settings.high_water,
        )

    def _job_runner(self, job, leader_only: bool):
        def run() -> None:
            if leader_only and not self.lease.held:
                return  # standbys only watch
            # Outages are shared with the dispatch loop: one line per outage per process.
            # NotLeader: the dispatch loop notices it too, and stands by.
            with contextlib.suppress(NotLeader):
                attempt(job.run_once, self.redis_outage, self.mysql_outage)

        return run

    def poll(self) -> float:
        if time.monotonic() >= self.next_beat:
            self.beat()
        if not self.lease.held:
            return max(self.next_beat - time.monotonic(), 0.0)
        try:
            return self.dispatcher.poll()
        except NotLeader:
            self.lease.deposed()
            return 0.0

    def beat(self) -> None:
        """Renew or try to take the lease, and refresh this process's heartbeat."""
        was_leader = self.lease.held
        if self.lease.hold() and not was_leader:
            self.dispatcher.rewind()  # a new leader starts from the oldest due row
        self.metrics.leader.set(1 if self.lease.held else 0)
        self.presence.publish(
            {
                "role": "leader" if self.lease.held else "standby",
                "dispatched": self.dispatcher.dispatched,
                "pages": self.dispatcher.pages,
            }
        )
        self.next_beat = time.monotonic() + self.settings.heartbeat_interval

    def shutdown(self) -> None:
        self.dashboard.stop()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        attempt(self.lease.release, self.redis_outage, self.mysql_outage)
        for db in [*self.job_dbs, self.db]:
            db.close()
        attempt(self.presence.withdraw, self.redis_outage, self.mysql_outage)
        log.info("dispatcher %s stopped: %d ids dispatched", self.id, self.dispatcher.dispatched)


def serve(settings: Settings) -> int:
    """Run one dispatcher until a signal stops it (what `recheck dispatcher` runs)."""
    service = DispatcherService(settings)
    service.install_signal_handlers()
    service.run()
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m dispatcher`."""
    argparse.ArgumentParser(prog="python -m dispatcher", description=DESCRIPTION).parse_args(argv)
    return launch("dispatcher", serve)
