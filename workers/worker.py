"""The worker process: its lifecycle, its heartbeat, and the loop its check calls for.

What a worker holds lives in Redis (its processing set), never only in its memory: if it
dies, the reclaimer gives the entries back once its heartbeat key expires. A heartbeat thread
keeps that key alive while the check runs, however long the check takes.

Graceful stop (SIGTERM/SIGINT): take no more work, finish and write back the batch in hand
within RECHECK_SHUTDOWN_TIMEOUT, return untouched entries to the queue head, exit 0.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import threading
from collections.abc import Callable

from shared.config import Settings
from shared.launch import launch, positive_int
from shared.loop import Service
from shared.metrics import serve as serve_metrics
from shared.metrics import worker_metrics
from shared.presence import Presence
from shared.redisconn import REDIS_DOWN
from shared.schema import require_table
from workers.batchloop import BatchLoop
from workers.checks import check_kind, load_check
from workers.completer import Completer
from workers.intake import Intake
from workers.rowloop import RowLoop

log = logging.getLogger(__name__)

DESCRIPTION = "Run one worker: take due ids, run the check, write results back (RECHECK_* variables)."


class Worker(Service):
    role = "worker"

    def __init__(self, settings: Settings, check: Callable | None = None):
        super().__init__(settings)
        self.presence = Presence(
            self.store, self.keys.heartbeat(self.id), self.keys.workers, self.id, settings.heartbeat_ttl
        )
        self.check = check or load_check(settings.check)
        self.kind = check_kind(self.check, settings.check_kind)
        self.check_name = f"{self.check.__module__}:{self.check.__qualname__}"
        self.metrics = worker_metrics()
        self.intake = Intake(self.store, self.id)
        self.completer = Completer(settings, self.db, self.store, self.id, self.persist, self.metrics)
        self.counters = self.completer.counters
        parts = (settings, self.check, self.intake, self.completer, self, self.metrics)
        self.batch = BatchLoop(*parts) if self.kind == "batch" else None
        self.rows = RowLoop(*parts) if self.kind == "row" else None
        self._heartbeat_stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._metrics_tried = False

    def startup(self) -> None:
        if not self._metrics_tried:  # once: a busy port is reported, not retried
            self._metrics_tried = True
            serve_metrics(self.settings.metrics_host, self.settings.metrics_port)
        require_table(self.settings, self.db)
        self.completer.writeback.read_column_limits()
        self.beat()
        if not self._heartbeat.is_alive():
            self._heartbeat.start()
        log.info(
            "worker %s started: %s check %s, batch %d%s",
            self.id,
            self.kind,
            self.check_name,
            self.settings.worker_batch,
            f", concurrency {self.settings.concurrency}" if self.kind == "row" else "",
        )

    def poll(self) -> float:
        return self.batch.poll()

    def loop(self) -> None:
        if self.rows is not None:
            self.rows.run()
        else:
            super().loop()

    def shutdown(self) -> None:
        landed = self.persist(lambda: self.intake.take(0))  # what a last BLMOVE delivered goes back
        if landed:
            self.completer.give_back(landed)
        self.close()
        if self.persist(self.intake.held_count) == 0:
            # Deregister: nothing is held, so there is nothing for the reclaimer to do.
            self.persist(self.presence.withdraw)
        c = self.counters
        log.info(
            "worker %s stopped: %d checked, %d failed, %d stale, %d returned",
            self.id,
            c.checked,
            c.failed,
            c.stale,
            c.returned,
        )

    def close(self) -> None:
        """Stop heartbeating and release connections (what is held stays for the reclaimer)."""
        self._heartbeat_stop.set()
        if self.batch is not None:
            self.batch.close()
        self.db.close()

    def beat(self) -> None:
        c = self.counters
        lateness, _ = self.metrics.lateness.snapshot()
        self.presence.publish(
            {
                "kind": self.kind,
                "checked": c.checked,
                "failed": c.failed,
                "stale": c.stale,
                "rate": round(c.rate(), 1),
                "lateness_buckets": lateness,  # counts per SECONDS_BUCKETS bucket since start
                "lateness_max": round(self.completer.take_lateness_max(), 4),  # since the last beat
            }
        )

    def _heartbeat_loop(self) -> None:
        while not self._heartbeat_stop.wait(self.settings.heartbeat_interval):
            # The main loop logs an outage; the key is set again once Redis is back.
            with contextlib.suppress(*REDIS_DOWN):
                self.beat()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--concurrency", type=positive_int, help="rows checked at once (per-row checks)")
    parser.add_argument("--batch", type=positive_int, help="ids taken from Redis at a time")


def overrides(args: argparse.Namespace) -> dict:
    """The command-line options as settings (they win over RECHECK_CONCURRENCY/_WORKER_BATCH)."""
    chosen = {"concurrency": args.concurrency, "worker_batch": args.batch}
    return {name: value for name, value in chosen.items() if value is not None}


def serve(settings: Settings) -> int:
    """Run one worker until a signal stops it; 1 if it chose to exit for a fresh process."""
    worker = Worker(settings)
    worker.install_signal_handlers()
    worker.run()
    return 1 if worker.fatal else 0


def main(argv: list[str] | None = None) -> int:
    """`python -m workers [--concurrency C] [--batch B]`."""
    parser = argparse.ArgumentParser(prog="python -m workers", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    return launch("worker", serve, overrides(args))
