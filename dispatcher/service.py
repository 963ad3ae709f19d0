"""The dispatcher process: one lane per workload, dispatch in the main thread, jobs on APScheduler.

Several dispatcher processes may run (compose runs two). Each workload has a lease of its own:
the dispatcher holding it dispatches that workload and runs its reconciler jobs, the others
stand by. Dispatchers share the leases out (each takes a free one only while it leads fewer
than its share of the workloads, and gives one back when it leads more), and take over any
lease left free for a whole RECHECK_LEADER_TTL. The jobs run in APScheduler's thread pool, each
with its own MySQL connection (PyMySQL connections are not thread-safe) and the shared,
thread-safe Redis client. Workloads with nothing due are asked together, one statement per
MySQL server each round (dispatcher/idle.py); the ids applications ask for are read by a
thread of their own when the deployment's bell rings (dispatcher/asked.py).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from recheck.dispatcher.asked import AskedThread
from recheck.dispatcher.dispatcher import idle_pause
from recheck.dispatcher.idle import IdleProbe
from recheck.dispatcher.lane import DispatchLane
from recheck.dispatcher.lease import NotLeader, renew_together
from recheck.dispatcher.reconciler import SweepProbe
from recheck.dispatcher.web import Dashboard
from recheck.shared.config import Settings, Workload, redact_url
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.schema import require_distinct_tables
from recheck.shared.policies.lifecycle import rhythm_of
from recheck.shared.process.loop import Service
from recheck.shared.process.metrics import serve as serve_metrics
from recheck.shared.process.presence import publish_together
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.redis.store import Store, by_client
from recheck.shared.workloads import read_workloads

log = logging.getLogger(__name__)


class DispatcherService(Service):
    role = "dispatcher"

    def __init__(self, workloads: list[Workload]):
        super().__init__(workloads)
        self.lanes = [DispatchLane(self, workload) for workload in workloads]
        # A thread for every job and the heartbeat: jobs blocked on a silent MySQL must not keep
        # the heartbeat (the lease renewal) from running.
        jobs = sum(len(lane.jobs) for lane in self.lanes) + 1
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=max(10, jobs))},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
        )
        self.dashboard = Dashboard(
            [lane.monitor for lane in self.lanes],
            self.deployment.dashboard_host,
            self.deployment.dashboard_port,
            self.deployment.dashboard_token.get_secret_value(),
            self.deployment.dashboard_hosts,
        )
        store = self.lanes[0].store  # the asked bell is the deployment's: any lane's store rings it
        self.asked = AskedThread(
            self, self.lanes, store.wait_for_asked, store.last_asked_ring,
            holding=lambda lanes: Store.asked_waiting([lane.store for lane in lanes]),
        )  # fmt: skip
        self.idle_probe = IdleProbe()
        self.sweep_probes: list[SweepProbe] = []  # one per MySQL server with several workloads (job_groups)
        self.next_beat = 0.0
        self.next_share_look = 0.0  # when the beat next compares what it leads with its share
        self.served = False

    def heartbeat_keys(self) -> list[str]:
        return [lane.presence.key for lane in self.lanes]

    def startup(self) -> None:
        self.start_lanes(self.lanes)  # StartLater while a workload's server is away
        require_distinct_tables([(lane.workload, lane.db) for lane in self.lanes])  # ConfigError: exit 2
        self.client.ping()
        if not self.served:  # once: a busy port is reported, not retried
            self.served = True
            serve_metrics(self.deployment.metrics_host, self.deployment.metrics_port)
            self.dashboard.start()
        if not self.scheduler.running:
            for (name, period, server), runners in self.job_groups().items():
                self.scheduler.add_job(
                    functools.partial(run_in_turn, runners), "interval", seconds=period, id=f"{name}@{server}"
                )
            # The heartbeat on the scheduler's thread, not in the dispatch loop (DispatchLane.beat).
            self.scheduler.add_job(self.beat, "interval", seconds=self.deployment.heartbeat_interval,
                                   id="heartbeat", next_run_time=datetime.now(UTC))  # fmt: skip
            self.scheduler.start()
        self.asked.start()
        for lane in self.lanes:
            s = lane.workload
            where = f"workload {lane.name}, " if len(self.lanes) > 1 else ""
            rhythm = rhythm_of(s).says
            log.info(
                "dispatcher %s started: %stable %s.%s, %s, high water %d",
                self.id, where, s.mysql.database, s.table, rhythm, s.high_water,
            )  # fmt: skip

    def job_groups(self) -> dict[tuple[str, float, str], list[Callable[[], None]]]:
        """Every lane's jobs, one scheduled job per kind and period for the workloads on one MySQL
        server, running their lanes' in turn: an idle process wakes once per kind and period,
        not once per workload (each wake costs more CPU than an idle job's work). Servers apart:
        a silent one holds up only its own workloads' jobs; on one server a job waits at most
        LOCK_WAIT_SECONDS for the application's row locks. Several workloads' sweeps on one
        server are asked first in one statement (_sweep_probe)."""
        groups: dict[tuple[str, float, str], list[Callable[[], None]]] = {}
        members: dict[tuple[str, float, str], list[DispatchLane]] = {}
        for lane in self.lanes:
            server = redact_url(lane.workload.mysql_url)
            for name, (job, period, leader_only) in lane.jobs.items():
                groups.setdefault((name, period, server), []).append(
                    self._job_runner(lane, name, job, leader_only)
                )
                members.setdefault((name, period, server), []).append(lane)
        for key, lanes in members.items():
            if key[0] == "sweep" and len(lanes) > 1:  # asked together first (SweepProbe)
                groups[key].insert(0, self._sweep_probe(lanes))
        return groups

    def _sweep_probe(self, lanes: list[DispatchLane]) -> Callable[[], None]:
        """The run that precedes a sweep group's: one statement for the led lanes' sweeps."""
        probe = SweepProbe(Database(lanes[0].workload))
        self.sweep_probes.append(probe)

        def run() -> None:
            for lane in lanes:  # a lane that did not run since (its lease went) keeps nothing stale
                lane.sweeper.clear = set()
            led = [lane.sweeper for lane in lanes if lane.lease.held]
            if not led:
                return
            try:  # whatever goes wrong, nothing is marked: each sweep reads for itself
                lanes[0].life.attempt(functools.partial(probe.mark, led))
            except Exception:
                log.exception("the sweeps' probe failed; each sweep reads for itself")

        return run

    def _job_runner(self, lane: DispatchLane, name: str, job, leader_only: bool):
        def run() -> None:
            if leader_only and not lane.lease.held:
                return  # standbys only watch
            # Outages are shared with the dispatch loop: one line per outage per process.
            # NotLeader: the dispatch loop notices it too, and stands by.
            try:
                with contextlib.suppress(NotLeader):
                    lane.life.attempt(job.run_once)
            except Exception:  # a bug in one workload's job must not skip the others' in its group
                log.exception("%sthe %s job failed", lane.workload.log_prefix, name)

        return run

    def poll(self) -> float:
        if time.monotonic() >= self.next_beat:
            self.take_free_leases()
        idle = [lane for lane in self.lanes if lane.quiet]
        woken = self.probe(idle)
        # A pause never runs past the next beat: free leases are looked for from this loop
        # (take_free_leases), however long the led workloads' pauses (a long idle_poll_interval).
        # An outage's backoff keeps its own length.
        until_beat = max(self.next_beat - time.monotonic(), 0.0)
        waits = []
        for lane in self.lanes:  # one page per led workload per round: none starves another
            if lane in idle and lane not in woken:  # nothing due: its probe is its poll
                waits.append(min(idle_pause(self.deployment), until_beat))
                continue
            ok, wait = lane.life.attempt(lane.poll)
            if not ok:
                waits.append(wait)
            elif wait is not None:
                waits.append(min(wait, until_beat))
        return min(waits, default=until_beat)

    def probe(self, idle: list[DispatchLane]) -> list:
        """The idle lanes with a row due now (dispatcher/idle.py). Reading for them counts as
        their page under way: a probe stuck on a silent MySQL for a whole TTL gives their
        leases up (DispatchLane.renew), as a stuck page does."""
        started = time.monotonic()
        for lane in idle:
            lane.paging_since = started
        try:
            return self.idle_probe.woken(idle)
        finally:
            for lane in idle:
                lane.paging_since = None

    def share(self) -> tuple[int, int]:
        """(live dispatchers, how many workloads each should lead). Every dispatcher serves every
        workload and registers in each one's registry: the live ones are those any registry has."""
        registries = Store.live_dispatchers_of([lane.store for lane in self.lanes])
        live = {d.id for beats in registries for d in beats}
        return max(1, len(live)), math.ceil(len(self.lanes) / max(1, len(live)))

    def take_free_leases(self) -> None:
        """From the dispatch loop, every heartbeat: take free leases, sharing them out between
        the live dispatchers (a leader of every workload asks Redis nothing here)."""
        self.next_beat = time.monotonic() + self.deployment.heartbeat_interval
        if all(lane.lease.held for lane in self.lanes):
            return
        ok, found = self.attempt(self.share)
        if not ok:
            return
        _, share = found
        for lane in self.lanes:
            held = sum(other.lease.held for other in self.lanes)
            lane.life.attempt(functools.partial(lane.take, may_take=held < share))

    def beat(self) -> None:
        """The heartbeat job (the scheduler's thread): renew held leases and publish each lane's
        heartbeat (all lanes' in one round trip); hand a workload over when this dispatcher leads
        more than its share."""
        self.renew_leases()
        beats = []
        for lane in self.lanes:
            ok, beat = lane.life.attempt(lane.beat)
            if ok:
                beats.append((lane.presence, beat))
        self.attempt(functools.partial(publish_together, beats))
        held = [lane for lane in self.lanes if lane.lease.held]
        now = time.monotonic()
        if len(held) <= 1 or now < self.next_share_look:
            return  # leading one workload is never more than a share
        # Handing over is never urgent: the share is looked at once a leader_ttl (it reads every
        # workload's registry), and one workload at a time goes.
        self.next_share_look = now + self.deployment.leader_ttl
        ok, found = self.attempt(self.share)
        if ok and len(held) > found[1]:
            live = found[0]
            log.info("dispatcher %s leads %d of %d workloads with %d dispatchers live; handing over %s",
                     self.id, len(held), len(self.lanes), live, held[-1].name)  # fmt: skip
            held[-1].lease.release()

    def renew_leases(self) -> None:
        """Renew the held leases of the lanes that can make progress (DispatchLane.renewable):
        together, one script call per Redis client (lease.renew_together); a partitioned
        workload's alone (its renewal also takes its later partitions' leases)."""
        together = []
        for lane in self.lanes:
            if not lane.lease.held:
                continue
            if not lane.renews_together:
                lane.life.attempt(lane.renew)
            elif lane.life.attempt(lane.renewable) == (True, True):
                together.append(lane.lease)
        for group in by_client(together, lambda lease: lease.store):  # a Redis away holds up its own
            self.attempt(functools.partial(renew_together, group))

    def abandon(self) -> None:
        """The stop deadline passed with the loop blocked on a silent server: hand over at once."""
        for lane in self.lanes:
            with contextlib.suppress(*REDIS_DOWN):
                lane.lease.release()

    def shutdown(self) -> None:
        self.dashboard.stop()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        self.idle_probe.close()
        for probe in self.sweep_probes:
            probe.close()
        for lane in self.lanes:
            lane.life.attempt(lane.lease.release)
            lane.close()
            lane.life.attempt(lane.presence.withdraw)
            where = f" ({lane.name})" if len(self.lanes) > 1 else ""
            log.info("dispatcher %s stopped%s: %d ids dispatched", self.id, where, lane.dispatched())


def run_in_turn(runners: list[Callable[[], None]]) -> None:
    """A job group's run: each workload's job in turn (each handles its own outages)."""
    for run in runners:
        run()


def serve(settings: Settings) -> int:
    """Run one dispatcher for every workload until a signal stops it (`recheck dispatcher`)."""
    service = DispatcherService(read_workloads(settings))
    service.install_signal_handlers()
    service.run()
    return 0
