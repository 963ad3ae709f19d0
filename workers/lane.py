"""One workload's part of a worker process: its check, its queue, its write-back, its heartbeat.

A worker serves one lane per workload (all of them, or those `--workloads` names). Each lane has
its own Redis keys (the workload's hash tag), its own MySQL connection (a workload may live on
another server), its own check, kind, batch size and concurrency, and registers and heartbeats
in its workload's registry, so that workload's reclaimer gives back what the lane held if the
process dies. The process (workers/worker.py) owns the lanes' threads and the shared heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from shared.config import Settings, log_prefix
from shared.failing import FailureWatch
from shared.loop import Service
from shared.metrics import worker_metrics
from shared.outage import MAX_BACKOFF
from shared.presence import Presence
from shared.schema import require_table
from shared.store import Counts
from workers.batchloop import BatchLoop
from workers.checks import check_kind, load_check
from workers.completer import Completer
from workers.intake import Intake
from workers.rowloop import RowLoop
from workers.turns import Turns
from workers.writeslots import WriteSlots

log = logging.getLogger(__name__)


class Lane:
    def __init__(self, worker: Service, settings: Settings, turns: Turns, check: Callable | None = None):
        self.settings = settings
        self.name = settings.workload
        self.store, self.db, self.life = worker.parts_for(settings)
        self.check = check or load_check(settings.check)
        self.kind = check_kind(self.check, settings.check_kind)
        self.check_name = f"{self.check.__module__}:{self.check.__qualname__}"
        self.metrics = worker_metrics(self.name)
        self.intake = Intake(self.store, worker.id)
        slots = WriteSlots(
            self.store, worker.id, settings.write_slots, settings.heartbeat_ttl,
            stopping=lambda: self.life.stopping, waited=self.metrics.write_slot_wait.inc,
            writers=lambda: self.presence.registered,
        )  # fmt: skip
        self.completer = Completer(
            settings, self.db, self.store, worker.id, self.life.persist, self.metrics,
            whole_batches=self.kind == "batch", slots=slots,
        )  # fmt: skip
        self.counters = self.completer.counters
        parts = (settings, self.check, self.intake, self.completer, self.life, self.metrics)
        self.batch = BatchLoop(*parts, turns=turns) if self.kind == "batch" else None
        self.rows = RowLoop(*parts) if self.kind == "row" else None
        self.presence = Presence(self.store, "worker", worker.id, settings.heartbeat_ttl)
        self.failures = FailureWatch(settings.failing_threshold, prefix=log_prefix(settings))

    def describe(self) -> str:
        """`batch check acme.checks:blocked, batch 500` (and the concurrency of per-row checks)."""
        s = self.settings
        if self.kind == "row":
            return f"row check {self.check_name}, batch {s.worker_batch}, concurrency {s.concurrency}"
        takes = f", takes up to {s.worker_take_max}" if s.worker_take_max > s.worker_batch else ""
        return f"batch check {self.check_name}, batch {s.worker_batch}{takes}"

    def startup(self) -> None:
        require_table(self.settings, self.db)
        self.completer.writeback.learn_table()
        self.beat()

    def run(self) -> None:
        """This lane's loop, until the process stops (a thread of its own when there are several)."""
        if self.rows is not None:
            self.rows.run()
            return
        life = self.life
        while not life.stopping:
            _, wait = life.attempt(self.batch.poll)  # a poll's wait, or the backoff after an outage
            if wait:
                life.wait(wait)

    def beat(self) -> None:
        c = self.counters
        lateness, _ = self.metrics.lateness.snapshot()
        recent = self.failures.observe(c.checked, c.failed, self.completer.last_error)
        self.presence.publish(
            {
                "kind": self.kind,
                "workload": self.name,
                "checked": c.checked,
                "failed": c.failed,
                "stale": c.stale,
                "rate": round(c.rate(), 1),
                "take": self.batch.sizer.size if self.batch is not None else self.settings.worker_batch,
                "lateness_buckets": lateness,  # counts per SECONDS_BUCKETS bucket since start
                "lateness_max": round(self.completer.lateness_max.value(), 4),  # in the last 2 s
                "recent_checked": recent.checked,  # the last minute's, for "checks failing"
                "recent_failed": recent.failed,
                "last_error": self.completer.last_error,
                # Seconds this worker's MySQL has worked since its last outage (0: down now).
                "mysql_up_for": round(self.life.mysql_outage.up_for(), 1),
            }
        )

    def others_can_write(self) -> bool:
        """Whether another live worker of this workload has reached its MySQL for longer than an
        outage's longest backoff: then a write stuck here is this worker's problem alone. (Right
        after MySQL comes back for everyone, the stuck write's own next try lands first.)"""
        me, settled = self.presence.member, MAX_BACKOFF + 2 * self.settings.heartbeat_interval
        others = [w for w in self.store.live_workers() if w.get("id") != me]
        return any(float(w.get("mysql_up_for") or 0) > settled for w in others)

    def shutdown(self, persist) -> None:
        """Give back what a last blocking wait delivered; deregister if nothing is held."""
        landed = persist(lambda: self.intake.take(0))
        if landed:
            self.completer.give_back(landed)
        self.close()
        if persist(self.intake.held_count) == 0:
            persist(self.presence.withdraw)  # nothing held: nothing for the reclaimer to do
        c = self.counters
        return f"{c.checked} checked, {c.failed} failed, {c.stale} stale, {c.returned} returned"

    def close(self) -> None:
        if self.batch is not None:
            self.batch.close()
        self.db.close()

    def abandon(self) -> None:
        """The stop deadline passed with a loop blocked on a silent server: give back what this
        lane holds (if Redis answers), so nobody waits for the reclaimer."""
        held = sorted(self.store.held(self.presence.member))
        if held:
            self.store.acknowledge(self.presence.member, [], held, Counts(), whole=False)
            log.warning("%s: gave back %d held entries at the stop deadline", self.name, len(held))
        self.presence.withdraw()
