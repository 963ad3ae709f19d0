"""One workload's part of a dispatcher process: its lease, its dispatch cursor, its jobs.

Each workload is led separately: a lease per workload, so the dispatcher replicas of a
deployment split the workloads between them, and any of them takes over a workload whose
leader died. A lane's jobs (reclaim, sweep, orphans, the monitor) run on the process's
scheduler, each with a MySQL connection of its own to the workload's server.
"""

from __future__ import annotations

import contextlib
import logging
import time

from recheck.dispatcher.dispatcher import AskedPusher, Dispatcher, DuePusher
from recheck.dispatcher.lease import Lease, NotLeader
from recheck.dispatcher.monitor import Monitor
from recheck.dispatcher.reconciler import (
    GROUP_LIMITS_EVERY,
    SETTLE_EVERY,
    GroupLimitsCopier,
    Housekeeper,
    OrphanCollector,
    Reclaimer,
    Settler,
    Sweeper,
)
from recheck.shared.config import Workload
from recheck.shared.core.records import DispatcherBeat
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.schema import require_table
from recheck.shared.mysql.sql import Queries
from recheck.shared.policies.ordering import ordering_of
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
        deployment = workload.deployment
        self.presence = Presence(
            self.store, "dispatcher", service.id, deployment.heartbeat_ttl,
            interval_seconds=deployment.heartbeat_interval, quiet=self.beats_quietly,
            published=self.role_published,
        )  # fmt: skip
        self.held_beaten: bool | None = None  # whether it led in the last heartbeat published
        self.held_asked: bool | None = None  # whether it led when the heartbeat now going out was asked for
        self.lease = Lease(self.store, service.id, workload.deployment.leader_ttl)
        # Its passes over the table (two with a priority column, the priority rows' first), each
        # with its own cursor, polled in turn by the dispatch loop; `dispatcher` reads the others.
        self.passes = Dispatcher.passes(workload, self.db, self.store, service.id)
        self.dispatcher = self.passes[-1]
        self.metrics = dispatcher_metrics(self.name)
        self.job_dbs: list[Database] = []
        # A standby's check that it could lead: short timeouts, so a silent MySQL cannot hold it up.
        self.probe_db = self._own_db(read_timeout=PROBE_TIMEOUT, connect_timeout=PROBE_TIMEOUT)
        # At rest, sampled every few seconds; at once when this lane leads and its dispatch loop
        # finds work (a standby goes by its samples alone).
        self.monitor = Monitor(
            workload,
            self._own_db(),
            self.store,
            self.metrics,
            busy=lambda: self.lease.held and not self.quiet,
        )
        self.jobs = self._make_jobs()
        self.free_since: float | None = None  # when this lane's lease was first seen free
        self.paging_since: float | None = None  # when the page being read and pushed now began
        # Leading, but its lists not yet settled for its ordering (settle): it pushes nothing yet.
        self.unsettled = True

    def _own_db(self, read_timeout: float = 60.0, connect_timeout: float = 5.0) -> Database:
        """Each job runs in its own thread: its own MySQL connection."""
        self.job_dbs.append(
            Database(self.workload, read_timeout=read_timeout, connect_timeout=connect_timeout)
        )
        return self.job_dbs[-1]

    def _make_jobs(self) -> dict:
        """name -> (job, period, leader only)."""
        s, own_db = self.workload, self._own_db
        pusher = DuePusher(s, own_db(), self.store, self.service.id)
        self.sweeper = sweeper = Sweeper(s, pusher, dispatcher_cursor=lambda: self.dispatcher.cursor)
        if len(self.passes) > 1:  # the priority rows behind the priority pass's cursor, too
            first = self.passes[0]
            sweeper.also(
                DuePusher(s, own_db(), self.store, self.service.id, priority=True), lambda: first.cursor
            )
        self.asked = AskedPusher(DuePusher(s, own_db(), self.store, self.service.id))
        reclaimer = Reclaimer(s, own_db(), self.store, pushes=lambda: (self.store.pushes, self.lease.gained))
        self.settler = Settler(s, self.store, self.service.id, quiet=reclaimer.quiet)
        jobs = {
            "settle": (self.settler, SETTLE_EVERY, True),
            "reclaim": (reclaimer, s.deployment.reclaim_interval, True),
            "sweep": (sweeper, s.deployment.sweep_interval, True),
            "orphans": (OrphanCollector(s, own_db(), self.store), s.deployment.orphan_interval, True),
            "housekeeping": (Housekeeper(s, own_db(), self.store), s.deployment.orphan_interval, True),
        }
        if ordering_of(s).group_limits_from:  # an operator's change reaches the takes within this period
            jobs["group_limits"] = (GroupLimitsCopier(s, own_db(), self.store), GROUP_LIMITS_EVERY, True)
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
        self.paging_since = time.monotonic()
        try:
            if self.unsettled:
                self.settle()
            return min(one.poll() for one in self.passes)
        except NotLeader:
            self.lease.deposed()
            return 0.0
        finally:
            self.paging_since = None

    def renew(self) -> None:
        """Renew a held lease, unless this leader cannot make progress (renewable)."""
        if self.renewable():
            self.lease.renew()

    @property
    def renews_together(self) -> bool:
        """Its lease may be renewed with the other workloads' (lease.renew_together): one
        partition (a partitioned workload's renewal also takes its later partitions' leases)."""
        return self.store.count == 1

    def renewable(self) -> bool:
        """Whether a held lease is to be renewed: a leader that cannot read MySQL, or whose page
        has been under way for a whole TTL (stuck on a silent server), gives the lease up here so
        that a standby leads. Liveness is not progress."""
        ttl = self.workload.deployment.leader_ttl
        paging_for = time.monotonic() - (self.paging_since or time.monotonic())
        if self.life.mysql_outage.down_for() >= ttl:
            why = f"has not been able to read mysql for {self.life.mysql_outage.down_for():.1f}s"
        elif paging_for >= ttl:
            why = f"has been reading and pushing one page for {paging_for:.1f}s"
        else:
            return True
        if self.lease.held:  # (else the other thread gave it up first)
            log.warning("dispatcher %s %s; giving up the lease of %s", self.service.id, why, self.name)
            self.lease.release()
        return False

    def take(self, may_take: bool) -> None:
        """From the dispatch loop (a new leader rewinds its cursor): take the lease if it is
        ours in Redis, or free and `may_take`."""
        lease = self.lease
        if not lease.held:
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
                self.unsettled = True
                for one in self.passes:  # a new leader starts from the oldest due row
                    one.rewind()

    def settle(self) -> None:
        """A new leader's lists made right for its ordering before its first push (Settler).
        An outage midway: the next poll settles again (it pushes nothing before); the lease lost
        meanwhile: NotLeader, as a push would raise (nothing moved without it)."""
        self.settler.settle()
        self.unsettled = False

    def beat(self) -> DispatcherBeat:
        """From the scheduler's heartbeat job, after the leases' renewal (the service renews its
        lanes' together): the heartbeat to publish (the service publishes its lanes' together).
        Not from the dispatch loop: there, each beat waited for the page under way and delayed
        the next (0.4 s more per round trip: a page and a beat outlasted a 3 s lease)."""
        held = self.lease.held
        self.metrics.leader.set(1 if held else 0)
        return DispatcherBeat(
            **self.presence.identity(),  # type: ignore[arg-type]
            role="leader" if held else "standby",
            workload=self.name,
            dispatched=self.dispatched(),
            pages=sum(one.pages for one in self.passes),
        )

    def beats_quietly(self) -> bool:
        """Its heartbeat may be published less often (Presence): a standby, or a leader whose last
        poll read nothing, that led or stood by in the last heartbeat published too (a change of
        role is published at once, and again at each heartbeat until one lands: status shows who
        leads)."""
        self.held_asked = held = self.lease.held
        return held == self.held_beaten and (not held or self.quiet)

    def role_published(self) -> None:
        """A heartbeat of this lane is in Redis: the role it was asked for with is the one shown."""
        self.held_beaten = self.held_asked

    @property
    def quiet(self) -> bool:
        """Led, and its last poll read no row: the idle probe asks for it (dispatcher/idle.py)."""
        return self.lease.held and all(one.quiet for one in self.passes)

    def probe_part(self) -> tuple[Queries, tuple]:
        """Its part of the idle probe: its queries, and where its next poll's rows begin (of two
        passes at different places, from the earlier due time with every key: a wider read)."""
        starts = {one.probe_from() for one in self.passes}
        start = starts.pop() if len(starts) == 1 else (min(due for due, _ in starts), None)
        return self.dispatcher.pusher.rows.queries, start

    @property
    def leads(self) -> bool:
        return self.lease.held

    @property
    def asked_soon(self) -> bool:
        return self.asked.soon

    def read_asked(self) -> None:
        """Push the ids the application asked for (dispatcher/asked.py's thread; the leader only).
        An outage is logged once, with the dispatch loop's; NotLeader: the loop notices it too."""
        with contextlib.suppress(NotLeader):
            self.life.attempt(self.asked.run_once)

    def dispatched(self) -> int:
        """Ids pushed by this lane: pages and the ids the application asked for."""
        return sum(one.dispatched for one in self.passes) + self.asked.dispatched

    def can_read_mysql(self) -> bool:
        """Liveness is not progress: a standby takes a lease only if it can read MySQL itself."""
        ok, _ = self.life.attempt(lambda: self.probe_db.scalar("SELECT 1"))
        return ok

    def close(self) -> None:
        for db in [*self.job_dbs, self.db]:
            db.close()
