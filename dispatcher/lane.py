"""One workload's part of a dispatcher process: its lease, its dispatch cursor, its jobs.

Each workload is led separately: a lease per workload, so the dispatcher replicas of a
deployment split the workloads between them, and any of them takes over a workload whose
leader died. A lane's jobs (reclaim, sweep, orphans, the monitor) run on the process's
scheduler, each with a MySQL connection of its own to the workload's server.
"""

from __future__ import annotations

import logging
import time

from recheck.dispatcher.dispatcher import Dispatcher, DuePusher
from recheck.dispatcher.lease import Lease, NotLeader
from recheck.dispatcher.monitor import Monitor
from recheck.dispatcher.reconciler import OrphanCollector, Reclaimer, Sweeper
from recheck.shared.config import Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.schema import require_table
from recheck.shared.process.loop import Service
from recheck.shared.process.metrics import dispatcher_metrics
from recheck.shared.process.presence import Presence

log = logging.getLogger(__name__)

MONITOR_INTERVAL = 1.0  # seconds between freshness samples (metrics, dashboard)
PROBE_TIMEOUT = 2.0  # seconds a standby waits for MySQL before deciding it cannot lead


class DispatchLane:
    def __init__(self, service: Service, workload: Workload):
        self.service = service
        self.workload = workload
        self.name = workload.name
        self.store, self.db, self.life = service.parts_for(workload)
        self.presence = Presence(self.store, "dispatcher", service.id, workload.deployment.heartbeat_ttl)
        self.lease = Lease(self.store, service.id, workload.deployment.leader_ttl)
        self.dispatcher = Dispatcher(workload, DuePusher(workload, self.db, self.store, service.id))
        self.metrics = dispatcher_metrics(self.name)
        self.job_dbs: list[Database] = []
        # A standby's check that it could lead: short timeouts, so a silent MySQL cannot hold it up.
        self.probe_db = self._own_db(read_timeout=PROBE_TIMEOUT, connect_timeout=PROBE_TIMEOUT)
        self.monitor = Monitor(workload, self._own_db(), self.store, self.metrics)
        self.jobs = self._make_jobs()
        self.free_since: float | None = None  # when this lane's lease was first seen free

    def _own_db(self, **timeouts: float) -> Database:
        """Each job runs in its own thread: its own MySQL connection."""
        self.job_dbs.append(Database(self.workload, **timeouts))
        return self.job_dbs[-1]

    def _make_jobs(self) -> dict:
        """name -> (job, period, leader only)."""
        s, own_db = self.workload, self._own_db
        pusher = DuePusher(s, own_db(), self.store, self.service.id)
        sweeper = Sweeper(s, pusher, dispatcher_cursor=lambda: self.dispatcher.cursor)
        jobs = {
            "reclaim": (Reclaimer(s, own_db(), self.store), s.deployment.reclaim_interval, True),
            "sweep": (sweeper, s.deployment.sweep_interval, True),
            "orphans": (OrphanCollector(s, own_db(), self.store), s.deployment.orphan_interval, True),
        }
        if (
            s.deployment.metrics_port or s.deployment.dashboard_port
        ):  # sampling costs MySQL queries: only when someone looks
            jobs["monitor"] = (self.monitor, MONITOR_INTERVAL, False)  # standbys serve the dashboard too
        return jobs

    def startup(self) -> None:
        require_table(self.workload, self.db)
        self.dispatcher.pusher.learn_keys()

    def poll(self) -> float | None:
        """One page if this dispatcher leads the workload; None if it does not."""
        if not self.lease.held:
            return None
        try:
            return self.dispatcher.poll()
        except NotLeader:
            self.lease.deposed()
            return 0.0

    def beat(self, may_take: bool) -> None:
        """Renew the lease, or take it if free and `may_take`; publish the heartbeat."""
        lease, was_leader = self.lease, self.lease.held
        if was_leader:
            if self.life.mysql_outage.down_for() < self.workload.deployment.leader_ttl:
                lease.hold()
            else:
                log.warning(
                    "dispatcher %s has not been able to read mysql for %.1fs; giving up the lease of %s",
                    self.service.id, self.life.mysql_outage.down_for(), self.name,
                )  # fmt: skip
                lease.release()
        else:
            holder = self.store.lease_holder()
            now = time.monotonic()
            self.free_since = (self.free_since or now) if holder is None else None
            # A free lease goes to a dispatcher under its share; one free for a whole TTL (its
            # leader gone, the others at their share) to anyone, so no workload goes unled.
            long_free = (
                self.free_since is not None and now - self.free_since >= self.workload.deployment.leader_ttl
            )
            # A partitioned workload's lease may be half taken (shared/redis/store.py): go on.
            mine = holder == self.service.id
            wanted = mine or (holder is None and (may_take or long_free))
            if wanted and self.can_read_mysql() and lease.hold():
                self.free_since = None
                self.dispatcher.rewind()  # a new leader starts from the oldest due row
        self.metrics.leader.set(1 if lease.held else 0)
        self.presence.publish(
            {
                "role": "leader" if lease.held else "standby",
                "workload": self.name,
                "dispatched": self.dispatcher.dispatched,
                "pages": self.dispatcher.pages,
            }
        )

    def can_read_mysql(self) -> bool:
        """Liveness is not progress: a standby takes a lease only if it can read MySQL itself."""
        ok, _ = self.life.attempt(lambda: self.probe_db.scalar("SELECT 1"))
        return ok

    def close(self) -> None:
        for db in [*self.job_dbs, self.db]:
            db.close()
