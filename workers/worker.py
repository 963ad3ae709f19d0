"""The worker role: take a batch, run the check, write it back fenced, acknowledge.

What a worker holds lives in Redis (its processing set), never only in its memory: if it
dies, the reclaimer gives the entries back once its heartbeat key expires. A heartbeat thread
keeps that key alive while the check runs, however long the check takes.

Graceful stop (SIGTERM/SIGINT): take no more work, finish and write back the batch in hand
within RECHECK_SHUTDOWN_TIMEOUT, return untouched entries to the queue head, exit 0.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from shared.config import Settings
from shared.entries import Item, parse_entries
from shared.loop import Service
from shared.metrics import serve as serve_metrics
from shared.metrics import worker_metrics
from shared.presence import Presence
from shared.redisconn import REDIS_DOWN
from shared.schema import require_table
from workers.checks import CheckShapeError, Outcome, batch_outcomes, check_kind, describe_error, load_check
from workers.pool import DaemonPool
from workers.writeback import WriteBack, Written

log = logging.getLogger(__name__)

HUNG_CHECKS_LIMIT = 3  # abandoned, still-running checks after which the process restarts itself


class Counters:
    """What this worker has done; read by the heartbeat thread for status."""

    def __init__(self) -> None:
        self.checked = 0
        self.failed = 0
        self.stale = 0
        self.malformed = 0
        self.returned = 0
        self.batches = 0
        self._samples: deque[tuple[float, int]] = deque(maxlen=64)

    def rate(self, window: float = 5.0) -> float:
        """Rows completed per second over about the last `window` seconds."""
        now, done = time.monotonic(), self.checked + self.failed
        self._samples.append((now, done))
        old = next((s for s in self._samples if now - s[0] <= window), self._samples[0])
        return (done - old[1]) / (now - old[0]) if now > old[0] else 0.0


class Worker(Service):
    role = "worker"

    def __init__(self, settings: Settings, check: Callable | None = None):
        super().__init__(settings)
        self.presence = Presence(
            self.client, self.keys.heartbeat(self.id), self.keys.workers, self.id, settings.heartbeat_ttl
        )
        self.writeback = WriteBack(settings, self.db)
        self.check = check or load_check(settings.check)
        self.kind = check_kind(self.check, settings.check_kind)
        self.check_name = f"{self.check.__module__}:{self.check.__qualname__}"
        self.counters = Counters()
        self.metrics = worker_metrics()
        self.lateness_max = 0.0  # since the last heartbeat
        self.deadline: float | None = None  # monotonic time the graceful stop must end by
        self.fatal: str | None = None
        self._heartbeat_stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._executor = self._new_executor()
        self._hung = 0
        self._resync = False
        self._metrics_tried = False
        # Entries being checked right now outside the batch loop (the per-row pipeline sets it).
        self.in_hand: Callable[[], set[bytes]] = set

    # -- lifecycle -------------------------------------------------------------------------
    def stop(self) -> None:
        if self.deadline is None:
            self.deadline = time.monotonic() + self.settings.shutdown_timeout
        super().stop()

    def time_left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def startup(self) -> None:
        if not self._metrics_tried:  # once: a busy port is reported, not retried
            self._metrics_tried = True
            serve_metrics(self.settings.metrics_host, self.settings.metrics_port)
        require_table(self.settings, self.db)
        self.writeback.read_column_limits()
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

    def loop(self) -> None:
        if self.kind == "row":
            from workers.rows import RowPipeline

            RowPipeline(self).run()
        else:
            super().loop()

    def shutdown(self) -> None:
        landed = self.persist(lambda: self.take(0))  # what a last BLMOVE delivered goes back
        if landed:
            self.finish([], landed, Written(0, 0, 0), 0)
        self.close()
        held = self.persist(lambda: self.client.scard(self.keys.processing(self.id)))
        if held == 0:
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
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.db.close()

    # -- Redis side ------------------------------------------------------------------------
    def beat(self) -> None:
        c = self.counters
        lateness, _ = self.metrics.lateness.snapshot()
        window_max, self.lateness_max = self.lateness_max, 0.0
        self.presence.publish(
            {
                "kind": self.kind,
                "checked": c.checked,
                "failed": c.failed,
                "stale": c.stale,
                "rate": round(c.rate(), 1),
                "lateness_buckets": lateness,  # counts per SECONDS_BUCKETS bucket since start
                "lateness_max": round(window_max, 4),  # the largest since the previous heartbeat
            }
        )

    def _heartbeat_loop(self) -> None:
        while not self._heartbeat_stop.wait(self.settings.heartbeat_interval):
            # The main loop logs an outage; the key is set again once Redis is back.
            with contextlib.suppress(*REDIS_DOWN):
                self.beat()

    def take(self, limit: int) -> list[bytes]:
        keys = self.keys
        try:
            _suspect, entries = self.scripts.pop(
                keys=[keys.queue, keys.suspects, keys.processing(self.id), keys.landing(self.id)],
                args=[limit],
                client=self.client,
            )
        except REDIS_DOWN:
            # The script may have run and only its reply been lost: entries would then sit in our
            # processing set unseen. The reclaimer leaves a live worker's set alone, so adopt them.
            self._resync = True
            raise
        if self._resync:
            entries = entries + self.adopt_unseen(entries)
            self._resync = False
        return entries

    def adopt_unseen(self, just_taken: list[bytes]) -> list[bytes]:
        """Entries in our processing set that we neither just took nor have in hand."""
        known = set(just_taken) | self.in_hand()
        unseen = [e for e in self.client.smembers(self.keys.processing(self.id)) if e not in known]
        if unseen:
            log.warning(
                "adopted %d held entries whose delivery was cut off by a lost connection", len(unseen)
            )
        return unseen

    def wait_for_work(self, timeout: float = 1.0) -> bool:
        """Block until the queue has an entry (moved into our landing list); False on timeout."""
        moved = self.client.blmove(self.keys.queue, self.keys.landing(self.id), timeout, "LEFT", "RIGHT")
        return moved is not None

    def finish(self, done: Sequence[bytes], back: Sequence[bytes], written: Written, malformed: int) -> None:
        """Acknowledge finished entries and return untouched ones, retrying through outages."""
        keys = self.keys
        counts = [written.succeeded, written.failed, written.stale, malformed]
        self.persist(
            lambda: self.scripts.ack(
                keys=[
                    keys.processing(self.id),
                    keys.inflight,
                    keys.queue,
                    keys.stats,
                    keys.reclaims,
                    keys.sweep_guard,
                    keys.dispatch_guard,
                    keys.completed,
                ],
                args=[len(done), *counts, *done, *back],
                client=self.client,
            )
        )
        c = self.counters
        c.checked += written.succeeded
        c.failed += written.failed
        c.stale += written.stale
        c.malformed += malformed
        c.returned += len(back)
        checks = self.metrics.checks
        checks.labels("ok").inc(written.succeeded)
        checks.labels("failed").inc(written.failed)
        checks.labels("stale").inc(written.stale)
        self.metrics.malformed.inc(malformed)

    def written_back(self, items: Sequence[Item], outcomes: Sequence[Outcome]) -> None:
        """Lateness (due time -> written back, on the database clock) of the rows just written."""
        now_ms = self.writeback.db_now_ms()
        lateness = [
            (now_ms - item.due_ms) / 1000 for item, outcome in zip(items, outcomes, strict=True) if outcome.ok
        ]
        if lateness:
            self.metrics.lateness.observe_many(lateness)
            self.lateness_max = max(self.lateness_max, max(lateness))

    def persist(self, step):
        """Retry step() through outages; None if the graceful-stop deadline passes first."""
        while True:
            ok, value = self.attempt(step)
            if ok:
                return value
            if self.time_left() <= 0:
                log.error("giving up on an unreachable server at shutdown; the reclaimer will finish")
                return None
            if self.stopping:
                time.sleep(min(value, self.time_left()))
            else:
                self.wait(value)

    # -- the batch loop --------------------------------------------------------------------
    def poll(self) -> float:
        entries = self.take(self.settings.worker_batch)
        if not entries:
            if not self.wait_for_work():
                return 0.0
            entries = self.take(self.settings.worker_batch)
        if entries:
            self.process(entries)
        return 0.0

    def split(self, entries: list[bytes]) -> tuple[list[Item], list[bytes]]:
        items, malformed = parse_entries(entries)
        if malformed:
            log.warning("dropped %d malformed queue entries (e.g. %r)", len(malformed), malformed[0][:40])
        return items, malformed

    def process(self, entries: list[bytes]) -> None:
        items, malformed = self.split(entries)
        outcomes = self.run_batch_check(items) if items else []
        if outcomes is None:  # stop deadline passed while the check ran: nothing was done
            self.finish(malformed, [item.entry for item in items], Written(0, 0, 0), len(malformed))
            return
        written = self.persist(lambda: self.writeback.write(items, outcomes)) if items else Written(0, 0, 0)
        if written is None:  # MySQL stayed away through the whole stop deadline
            self.finish(malformed, [item.entry for item in items], Written(0, 0, 0), len(malformed))
            return
        self.counters.batches += 1
        self.written_back(items, outcomes)
        self.finish([item.entry for item in items] + malformed, [], written, len(malformed))
        if self.fatal:
            self.stop()

    def run_batch_check(self, items: list[Item]) -> list[Outcome] | None:
        """Outcomes for each item; None if a graceful stop ran out of time first."""
        ids = [item.id for item in items]
        future = self._executor.submit(self.check, ids)
        started = time.monotonic()
        timeout = self.settings.check_timeout
        while True:
            waited = time.monotonic() - started
            step = min(timeout - waited, 0.5, max(self.time_left(), 0.0))
            try:
                results = future.result(timeout=max(step, 0.0))
                self.metrics.check_duration.observe(time.monotonic() - started)
                break
            except concurrent.futures.TimeoutError:
                if time.monotonic() - started >= timeout:
                    self._abandon("check did not finish within RECHECK_CHECK_TIMEOUT")
                    error = f"TimeoutError: check did not finish within {timeout:g}s"
                    return [Outcome(False, error)] * len(ids)
                if self.time_left() <= 0:
                    self._abandon("graceful stop: check still running at RECHECK_SHUTDOWN_TIMEOUT")
                    return None
            except Exception as error:  # a check may raise anything; its rows fail
                return [Outcome(False, describe_error(error))] * len(ids)
        try:
            return batch_outcomes(ids, results)
        except CheckShapeError as error:
            log.error(
                "check %s: %s; the batch's %d rows are recorded as failed",
                self.check_name,
                error,
                len(ids),
            )
            return [Outcome(False, f"CheckShapeError: {error}")] * len(ids)

    def _new_executor(self) -> DaemonPool:
        return DaemonPool(1)

    def _abandon(self, why: str) -> None:
        """Leave a hung check's thread behind; a process with too many of them restarts."""
        log.warning("%s; abandoning it", why)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = self._new_executor()
        self._hung += 1
        if self._hung >= HUNG_CHECKS_LIMIT and not self.fatal:
            self.fatal = f"{self._hung} checks hung and cannot be interrupted; exiting for a fresh process"
            log.error(self.fatal)
