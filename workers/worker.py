"""The worker process: its lifecycle, its heartbeat, and one lane per workload it serves.

What a worker holds lives in Redis (each workload's processing set), never only in its memory:
if it dies, the workload's reclaimer gives the entries back once its heartbeat key expires. A
heartbeat thread keeps every lane's key alive while checks run, however long they take, and
gives back a write-back that cannot land (liveness is not progress).

Each workload is a lane (workers/lane.py) with its own check, kind and concurrency; with several
lanes each runs in a thread of its own, batch lanes taking turns by weight (workers/turns.py).

Graceful stop (SIGTERM/SIGINT): take no more work, finish and write back the batches in hand
within RECHECK_SHUTDOWN_TIMEOUT, return untouched entries to the queue head, exit 0.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable

from recheck.shared.config import ConfigError, Settings, Workload
from recheck.shared.mysql.db import LOCK_WAIT_SECONDS
from recheck.shared.mysql.schema import require_distinct_tables
from recheck.shared.process.loop import Service
from recheck.shared.process.metrics import serve as serve_metrics
from recheck.shared.process.presence import publish_together
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.workloads import read_workloads, select_workloads
from recheck.workers.lane import Lane
from recheck.workers.turns import Turns

log = logging.getLogger(__name__)

# Seconds: how soon after a take its lane beats again (at most this often). Rows are taken about
# 50 ms after they fall due, so a beat within 0.5 s tells status of them long before they are 1 s
# overdue; more often cost the rate-limit grants' fairness (a beat's GIL time at each grant).
EARLY_BEAT = 0.5
Steps = list[tuple[str, Callable[[], object]]]  # a round's work: steps, in turn, and whose they are


def lanes_named(lanes: list[Lane]) -> str:
    """`workload a` or `workloads a, b`: whose step failed, in a log line."""
    return f"workload{'s' if len(lanes) > 1 else ''} {', '.join(lane.name for lane in lanes)}"


class Worker(Service):
    role = "worker"

    def __init__(self, workloads: list[Workload], checks: dict[str, Callable] | None = None):
        """workloads: every workload this worker serves, a lane each; checks: workload name ->
        that workload's check function itself (tests), instead of importing its `check`."""
        super().__init__(workloads)
        unknown = set(checks or {}) - {w.name for w in workloads}
        if unknown:
            raise ConfigError(f"checks given for workloads this worker does not serve: {sorted(unknown)}")
        self.turns = Turns()
        self.lanes = [Lane(self, w, self.turns, (checks or {}).get(w.name)) for w in workloads]
        self._heartbeat_stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._keeper = threading.Thread(target=self._keeper_loop, name="write-slots", daemon=True)
        self._next_full = 0.0  # when the heartbeat thread's next full beat is due
        self._metrics_tried = False

    def stop(self) -> None:
        """Stop gracefully; idle lanes blocked on their wake tokens end their waits at once (a
        token of their own, Store.wake_stopping, pushed from a thread: Redis may not answer)."""
        stopping_already = self.stopping
        super().stop()
        if not stopping_already:
            threading.Thread(target=self._wake_lanes, name="wake-lanes", daemon=True).start()

    def _wake_lanes(self) -> None:
        for lane in self.lanes:
            with contextlib.suppress(*REDIS_DOWN):  # then they end at their wait's timeout
                lane.store.wake_stopping(self.id)

    def lane(self, workload: str) -> Lane:
        """The lane of the named workload."""
        for lane in self.lanes:
            if lane.name == workload:
                return lane
        raise KeyError(f"this worker serves no workload {workload!r}")

    def heartbeat_keys(self) -> list[str]:
        return [lane.presence.key for lane in self.lanes]

    def startup(self) -> None:
        if not self._metrics_tried:  # once: a busy port is reported, not retried
            self._metrics_tried = True
            serve_metrics(self.deployment.metrics_host, self.deployment.metrics_port)
        self.start_lanes(self.lanes)  # StartLater while a workload's server is away
        require_distinct_tables([(lane.workload, lane.db) for lane in self.lanes])  # ConfigError: exit 2
        if not self._heartbeat.is_alive():
            self._heartbeat.start()
            self._keeper.start()
        for lane in self.lanes:
            s = lane.workload
            where = f"workload {lane.name} ({s.mysql.database}.{s.table}), " if len(self.lanes) > 1 else ""
            log.info("worker %s started: %s%s", self.id, where, lane.describe())

    def loop(self) -> None:
        """Each lane in a thread of its own, however many there are; this thread waits for them."""
        threads = [
            threading.Thread(target=self._run_lane, args=(lane,), name=f"lane-{lane.name}", daemon=True)
            for lane in self.lanes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _run_lane(self, lane: Lane) -> None:
        """A lane's loop. Checks cannot end it (workers/checks.py: whatever they raise is their rows'
        failure), so a lane that ends while the process runs is recheck's own fault: never silent.
        The whole process stops (health fails at once) and exits 1 for a fresh one, handing back
        what the dead lane held instead of leaving it for the reclaimer."""
        try:
            lane.run()
        except BaseException as error:
            lane.died = f"{type(error).__name__}: {error}"
            log.error("workload %s: its loop died", lane.name, exc_info=True)
            self.fail(f"workload {lane.name}: its loop died ({lane.died}); exiting for a fresh process")

    def shutdown(self) -> None:
        self._heartbeat_stop.set()
        for lane in self.lanes:
            persist = functools.partial(self.persist, mysql_outage=lane.life.mysql_outage)
            if lane.died:  # whatever it held mid-batch goes back now, not after its heartbeat expires
                persist(lane.give_back_held)
            summary = lane.shutdown(persist)
            where = f" ({lane.name})" if len(self.lanes) > 1 else ""
            log.info("worker %s stopped%s: %s", self.id, where, summary)

    def close(self) -> None:
        """Stop heartbeating and release connections (what is held stays for the reclaimer)."""
        self._heartbeat_stop.set()
        for lane in self.lanes:
            lane.close()

    def beat(self, lanes: list[Lane] | None = None) -> None:
        """Publish the lanes' heartbeats (all of them by default) in one round trip per Redis."""
        publish_together([(lane.presence, lane.heartbeat) for lane in lanes or self.lanes])

    def _heartbeat_loop(self) -> None:
        """A full beat every heartbeat_interval; between them, a lane that took rows beats again
        within EARLY_BEAT, so that `status` knows those rows are in flight before one of them can
        pass 1 s overdue unreported (it would count as waiting for a worker).

        Nothing but the beats runs here (the write slots have a thread of their own), and each
        round starts a pause after the last one began: on a slow network a round is a round trip
        per lane. With the slot's renewal and a give-back in the same round, and a whole pause
        after it, 0.4 s round trips spaced the heartbeat's SETs 1.05 s apart, past a 1 s TTL: a
        live worker was taken for dead and its batch checked twice."""
        interval = self.deployment.heartbeat_interval
        self._next_full = time.monotonic() + interval
        self._every(min(EARLY_BEAT, interval), "a heartbeat", lambda: self._beat_round(interval))

    def _beat_round(self, interval: float) -> Steps:
        now = time.monotonic()
        full = now >= self._next_full
        if full:
            self._next_full = now + interval
        due = [lane for lane in self.lanes if full or lane.intake.took.is_set()]
        for lane in due:
            lane.intake.took.clear()
        return [(lanes_named(due), functools.partial(self.beat, due))] if due else []

    def _keeper_loop(self) -> None:
        """Every heartbeat_interval: a live holder keeps its write slot, and a write-back stuck
        this long goes to other workers (alive is not progressing: it may spend one lock wait on
        a row the application holds, then skip that row)."""
        bound = self.deployment.heartbeat_ttl + LOCK_WAIT_SECONDS

        def round_() -> Steps:
            return [
                (lanes_named([lane]), functools.partial(self._keep_lane, lane, bound)) for lane in self.lanes
            ]

        self._every(self.deployment.heartbeat_interval, "a write slot's renewal", round_)

    @staticmethod
    def _keep_lane(lane: Lane, bound: float) -> None:
        lane.completer.slots.renew()
        lane.completer.give_back_if_stuck(bound, lane.others_can_write)

    def _every(self, pause: float, what: str, round_: Callable[[], Steps]) -> None:
        """Run each round's steps, a round starting `pause` after the last one began, until the
        worker stops. A step whose Redis is away is skipped (the lane's loop logs the outage);
        any other failure is logged once per kind and the rounds go on."""
        failures: set[str] = set()
        spent = 0.0
        while not self._heartbeat_stop.wait(max(0.0, pause - spent)):
            began = time.monotonic()
            for lanes, step in round_():
                try:
                    step()
                except REDIS_DOWN:
                    pass
                except Exception as error:  # a bug must not end the rounds: the beats would stop
                    if repr(error) not in failures:
                        failures.add(repr(error))
                        log.error("%s: %s failed", lanes, what, exc_info=True)
            spent = time.monotonic() - began

    def abandon(self) -> None:
        for lane in self.lanes:
            with contextlib.suppress(*REDIS_DOWN):
                lane.abandon()


def serve(settings: Settings, workloads: str | None = None, options: dict | None = None) -> int:
    """Run one worker until a signal stops it; 1 if it chose to exit for a fresh process."""
    chosen = select_workloads(read_workloads(settings), workloads)
    if options:
        chosen = [w.evolve(**options) for w in chosen]
    worker = Worker(chosen)
    worker.install_signal_handlers()
    worker.run()
    return 1 if worker.fatal else 0
