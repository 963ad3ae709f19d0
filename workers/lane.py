"""One workload's part of a worker process: its check, its queue, its write-back, its heartbeat.

A worker serves one lane per workload (all of them, or those `--workloads` names). Each lane has
its own Redis keys (the workload's hash tag), its own MySQL connection (a workload may live on
another server), its own check, kind, batch size and concurrency, and registers and heartbeats
in its workload's registry, so that workload's reclaimer gives back what the lane held if the
process dies. The process (workers/worker.py) owns the lanes' threads and the shared heartbeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from recheck.shared.config import Workload
from recheck.shared.core.failures import Breaker, FailureWatch
from recheck.shared.core.records import WorkerBeat
from recheck.shared.mysql.db import last_write as mysql_wrote
from recheck.shared.mysql.schema import require_table
from recheck.shared.outage import MAX_BACKOFF
from recheck.shared.process.loop import Service
from recheck.shared.process.metrics import worker_metrics
from recheck.shared.process.presence import Presence
from recheck.shared.redis.store import Counts
from recheck.workers.batchloop import BatchLoop
from recheck.workers.checks import check_kind, load_check
from recheck.workers.intake import Intake
from recheck.workers.rowloop import RowLoop
from recheck.workers.turns import Turns
from recheck.workers.writing.completer import Completer
from recheck.workers.writing.writeslots import WriteSlots

log = logging.getLogger(__name__)

IN_HAND_SHOWN = 1000  # due times of due rows in hand a heartbeat carries at most (the oldest)


class Lane:
    def __init__(self, worker: Service, workload: Workload, turns: Turns, check: Callable | None = None):
        self.workload = workload
        self.name = workload.name
        self.store, self.db, self.life = worker.parts_for(workload)
        self.check = check or load_check(workload.check, workload.setting_name("check"))
        self.kind = check_kind(self.check, workload.check_kind)
        self.check_name = f"{self.check.__module__}:{self.check.__qualname__}"
        self.metrics = worker_metrics(self.name)
        self.intake = Intake(self.store, worker.id, self.metrics, workload.log_prefix)
        slots = WriteSlots(
            self.store, worker.id, workload.write_slots, workload.deployment.heartbeat_ttl,
            stopping=lambda: self.life.stopping, waited=self.metrics.write_slot_wait.inc,
            writers=lambda: self.presence.registered,
            probe=lambda: self.life.attempt(self.completer.writeback.probe),  # an outage is logged once
            probe_every=workload.deployment.heartbeat_interval,
        )  # fmt: skip
        self.completer = Completer(
            workload, self.db, self.store, worker.id, self.life.persist, self.metrics,
            whole_batches=self.kind == "batch", slots=slots,
        )  # fmt: skip
        self.counters = self.completer.counters
        parts = (workload, self.check, self.intake, self.completer, self.life, self.metrics)
        self.loop: BatchLoop | RowLoop = (
            BatchLoop(*parts, turns=turns) if self.kind == "batch" else RowLoop(*parts)
        )
        deployment = workload.deployment
        self.presence = Presence(
            self.store, "worker", worker.id, deployment.heartbeat_ttl, count=workload.write_slots > 0,
            interval_seconds=deployment.heartbeat_interval, quiet=self.quiet,
        )  # fmt: skip
        self.intake.on_taken = self.presence.busy_again
        self.failures = FailureWatch(workload.failing_threshold, prefix=workload.log_prefix)
        if workload.backoff_threshold:
            self.intake.breaker = Breaker(workload.backoff_threshold, prefix=workload.log_prefix)
            self.intake.totals = lambda: (self.counters.checked, self.counters.failed)
        self.died: str | None = None  # why this lane's loop ended while the process ran (worker.py)

    def quiet(self) -> bool:
        """This lane holds nothing in Redis and runs nothing: its last take found nothing and told
        the limits no check runs, and no row waits to be checked or written (its heartbeat may
        be published less often: Presence)."""
        return self.intake.quiet and not self.loop.items_in_hand() and not self.completer.writing

    def describe(self) -> str:
        """`batch check acme.checks:blocked, batch 500` (and the concurrency of per-row checks)."""
        s = self.workload
        if self.kind == "row":
            return f"row check {self.check_name}, batch {s.worker_batch}, concurrency {s.concurrency}"
        takes = f", takes up to {s.worker_take_max}" if s.worker_take_max > s.worker_batch else ""
        return f"batch check {self.check_name}, batch {s.worker_batch}{takes}"

    def startup(self) -> None:
        require_table(self.workload, self.db)
        self.completer.writeback.learn_table()
        self.beat()

    @property
    def batch(self) -> BatchLoop:
        """The loop of a batch lane (TypeError for a per-row lane)."""
        if not isinstance(self.loop, BatchLoop):
            raise TypeError(f"workload {self.name}: a per-row lane has no batch loop")
        return self.loop

    def poll(self) -> float:
        """One take of a batch lane, checked and written back; how long to wait before the next
        (a per-row lane runs its own loop: run())."""
        return self.batch.poll()

    def run(self) -> None:
        """This lane's loop, until the process stops (in a thread of its own)."""
        self.loop.run()

    def beat(self) -> None:
        self.presence.publish(self.heartbeat())

    def heartbeat(self) -> WorkerBeat:
        """What this lane's next heartbeat tells (the worker publishes its lanes' together)."""
        c = self.counters
        lateness, _ = self.metrics.lateness.snapshot()
        recent = self.failures.observe(c.checked, c.failed, self.completer.last_error)
        return WorkerBeat(
            **self.presence.identity(),  # type: ignore[arg-type]
            kind=self.kind,
            workload=self.name,
            checked=c.checked,
            failed=c.failed,
            stale=c.stale,
            rate=round(c.rate(), 1),
            take=self.loop.sizer.size if isinstance(self.loop, BatchLoop) else self.workload.worker_batch,
            lateness_buckets=lateness,  # counts per SECONDS_BUCKETS bucket since start
            lateness_max=round(self.completer.lateness_max.value(), 4),  # in the last 2 s
            overdue_in_hand=self.overdue_in_hand(),
            abandoned=self.loop.abandoned,
            recent_checked=recent.checked,
            recent_failed=recent.failed,
            last_error=self.completer.last_error,
            mysql_up_for=round(self.life.mysql_outage.up_for(), 1),
            mysql_wrote_ago=round(time.monotonic() - mysql_wrote(self.db.server), 2),
            limited=self.intake.limited_by(),
        )

    def overdue_in_hand(self) -> list[int]:
        """Due times (ms, the oldest first, at most IN_HAND_SHOWN) of the due rows in this worker's
        hands (status tells them, in flight, from overdue rows waiting for a worker)."""
        in_hand = self.loop.items_in_hand()
        now_ms = self.completer.writeback.db_now_ms(refresh=False)
        return sorted(item.due_ms for item in in_hand if item.due_ms <= now_ms)[:IN_HAND_SHOWN]

    def others_can_write(self, stuck_for: float) -> bool:
        """Whether another live worker of this workload has had a write land on its MySQL since
        this worker's write got stuck `stuck_for` seconds ago (and has reached MySQL for longer
        than an outage's longest backoff): then the stuck write is this worker's problem alone.
        In a stall that holds every writer up (an application's LOCK TABLES), nobody's write
        lands, and the stuck one stays; right after MySQL comes back for everyone, the stuck
        write's own next try lands first."""
        s = self.workload
        me, settled = self.presence.member, MAX_BACKOFF + 2 * s.deployment.heartbeat_interval
        others = [w for w in self.store.live_workers() if w.id != me]
        return any(
            w.mysql_up_for > settled
            # a heartbeat is up to one interval old: its figure plus that must still be inside
            and w.mysql_wrote_ago + s.deployment.heartbeat_interval < stuck_for
            for w in others
        )

    def shutdown(self, persist) -> str:
        """Close; deregister if nothing is held (a blocking wait delivers a wake token, never
        entries: nothing arrives after the last take)."""
        self.close()
        if persist(self.intake.held_count) == 0:
            persist(self.presence.withdraw)  # nothing held: nothing for the reclaimer to do
        c = self.counters
        return f"{c.checked} checked, {c.failed} failed, {c.stale} stale, {c.returned} returned"

    def close(self) -> None:
        self.loop.close()
        self.db.close()

    def give_back_held(self) -> int:
        """Return everything this lane holds in Redis to the head of its queue; how many."""
        held = sorted(self.store.held(self.presence.member))
        if held:
            self.store.acknowledge(self.presence.member, [], held, Counts(), whole=False)
            log.warning("%s: gave back %d held entries", self.name, len(held))
        return len(held)

    def abandon(self) -> None:
        """The stop deadline passed with a loop blocked on a silent server: give back what this
        lane holds (if Redis answers), so nobody waits for the reclaimer."""
        self.give_back_held()
        self.presence.withdraw()
