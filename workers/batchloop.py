"""Batch checks: take a batch, call the check on it (in slices of RECHECK_WORKER_BATCH), complete it.

How much to take is the TakeSizer's call (workers/batchsize.py): more while the queue is deep
and checks are quick, so that each write-back statement stays large even when the check's own
batch size is small.

The check runs in a thread of its own so that a hung check can be abandoned after
RECHECK_CHECK_TIMEOUT (its rows fail) and a graceful stop is not held up past its deadline; a
take's slices go to that thread at once, one hand-off per take (workers/slicerun.py).
A worker serving several batch workloads lets them take turns by weight (workers/turns.py);
waiting for work happens outside the turn, so an idle workload holds nobody up.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time

from recheck.shared.core.entries import Item
from recheck.shared.process.tracing import rows_attributes
from recheck.workers.batchsize import TakeSizer, slices
from recheck.workers.checks import CheckShapeError, Outcome, batch_outcomes, describe_error
from recheck.workers.intake import split
from recheck.workers.loopbase import HUNG_CHECKS_LIMIT, CheckLoop
from recheck.workers.pool import DaemonPool
from recheck.workers.slicerun import Call, SliceRun
from recheck.workers.turns import Turns

log = logging.getLogger(__name__)


class BatchLoop(CheckLoop):
    def __init__(self, *parts, turns: Turns | None = None) -> None:
        super().__init__(*parts)
        self.turns = turns or Turns()
        self.sizer = TakeSizer(self.workload.worker_batch, self.workload.worker_take_max)
        self._executor = DaemonPool(1)
        self._hung = 0
        self._abandoned: list[tuple[concurrent.futures.Future, int]] = []  # (call, its rows) left running
        self.in_hand: list[Item] = []  # the take being checked (the heartbeat reports its due times)
        self.check_seconds = 0.0  # the last take's checks, all slices (wall time)

    def poll(self) -> float:
        self.ready_to_write()
        waiting, self.completer.waiting_after_ack = self.completer.waiting_after_ack, None
        # Waiting for work happens outside the turn: the other workloads go on meanwhile. When the
        # last batch's ack saw nothing waiting, the wait comes first: at moderate rates the take
        # after each batch found nothing, a round trip (and a wake-up) per batch for no entry.
        # Idle (the last take found nothing and no token came since), the same until a look is due.
        if (waiting == 0 or self.intake.idle(self.still_running())) and not self.intake.limited:
            if self.intake.wait_for_work():
                self.take_turn()
            else:
                self.keep_in_touch()
            return 0.0
        if not self.take_turn():
            held_back = self.intake.limit_wait()
            if held_back and self.intake.held_by_group():
                # A group's limits or breaker: blocked meanwhile, woken by other groups' new work.
                if self.intake.wait_for_work(held_back):
                    self.take_turn()
                return 0.0
            if held_back:  # ids are queued, but the limits say wait (never a blocking take)
                return held_back
            if self.intake.wait_for_work():
                self.take_turn()
            else:
                self.keep_in_touch()  # idle for IDLE_WAIT
        return 0.0

    def take_turn(self) -> bool:
        """Take a batch and finish it, in this workload's turn; False if nothing was due."""
        workload = self.workload
        with self.turns.turn(workload.name, workload.weight) as turn:
            asked = self.sizer.size
            entries = self.intake.take(asked, running=self.still_running())
            if entries:
                self.process(entries)
                self.sizer.observe(asked, len(entries), self.check_seconds)
                turn.rows = len(entries)
        return bool(entries)

    def process(self, entries: list[bytes]) -> None:
        if not self.tracing.on:
            self.finish(entries)
            return
        with self.tracing.span("recheck.take", rows_attributes(self.workload.name, len(entries))):
            self.finish(entries)

    def finish(self, entries: list[bytes]) -> None:
        """The take's rows read, checked, written back and acknowledged (or given back)."""
        items, malformed = split(entries, self.completer.writeback.keys)
        read = self.life.persist(lambda: self.with_rows(items)) if items else ([], [], [])
        if read is None:  # MySQL stayed away through the stop deadline: nothing was done
            self.completer.give_back([item.entry for item in items], malformed)
            return
        items, args, gone = read
        self.in_hand = items
        started = time.monotonic()
        outcomes = self.run_check(items, args) if items else []
        self.check_seconds = time.monotonic() - started
        if outcomes is None:  # stop deadline passed while the check ran: nothing was done
            self.completer.give_back([item.entry for item in items], [*malformed, *gone])
        else:
            self.complete(items, outcomes, malformed, gone)
        self.in_hand = []

    def run_check(self, items: list[Item], args: list) -> list[Outcome] | None:
        """Outcomes for each item, the check called on slices of at most RECHECK_WORKER_BATCH
        (of ids, or of rows with `columns`); None if a graceful stop ran out of time first."""
        parts = slices(len(items), self.workload.worker_batch)
        if not self.tracing.on:
            return self.check_slices(items, args, parts)
        outcomes: list[Outcome] = []
        for part in parts:  # a span per call, so one call per hand-off
            done = self.traced_slice(items[part.start : part.stop], args[part.start : part.stop])
            if done is None:
                return None
            outcomes += done
        return outcomes

    def traced_slice(self, items: list[Item], args: list) -> list[Outcome] | None:
        """One call of the check in a `recheck.check` span linked to its rows' producers' traces."""
        links = [self.contexts[item.id] for item in items if item.id in self.contexts]
        attributes = rows_attributes(self.workload.name, len(items))
        with self.tracing.span("recheck.check", attributes, links=links) as span:
            outcomes = self.check_slices(items, args, [range(len(items))])  # one call
            failed = [outcome.text or "" for outcome in outcomes or () if not outcome.ok]
            self.tracing.record(span, {"recheck.check_failures": len(failed)})
            if failed and len(failed) == len(items):  # the call itself failed, or every row did
                self.tracing.failed(span, failed[0])
        return outcomes

    def check_slices(self, items: list[Item], args: list, parts: list[range]) -> list[Outcome] | None:
        """Outcomes of the check called on each part in turn, handed to its thread at once
        (workers/slicerun.py), each call within RECHECK_CHECK_TIMEOUT (a call past it: its rows
        fail, its thread is left behind, the parts after it go on in a fresh one); None if a
        graceful stop ran out of time first."""
        outcomes: list[Outcome] = []
        timeout = self.workload.check_timeout
        first = 0
        while first < len(parts):
            rest = parts[first:]
            given = [list(args[part.start : part.stop]) for part in rest]  # the check's own copies
            run = SliceRun(self.check, given)
            future = self._executor.submit(run)
            calls, ended = self._watch(run, future, timeout)
            for part, copy, call in zip(rest, given, calls, strict=False):  # calls: the finished ones
                outcomes += self._outcomes(items[part.start : part.stop], copy, call)
            first += len(calls)
            if ended == "done" or first == len(parts):  # (all done by the time it was abandoned)
                continue
            hung = len(parts[first])
            if ended == "stop":
                self._abandon("graceful stop: check still running at RECHECK_SHUTDOWN_TIMEOUT", future, hung)
                return None
            self._abandon("check did not finish within RECHECK_CHECK_TIMEOUT", future, hung)
            outcomes += [Outcome(False, f"TimeoutError: check did not finish within {timeout:g}s")] * hung
            first += 1
        return outcomes

    def _watch(
        self, run: SliceRun, future: concurrent.futures.Future, timeout: float
    ) -> tuple[list[Call], str]:
        """Wait for a run of calls: its calls and "done"; or, once a call ran `timeout` seconds or
        a graceful stop's deadline came, the run abandoned, the calls finished before the one
        running and "timeout" or "stop"."""
        while True:
            running = run.running()
            step = min(timeout - running[1] if running else timeout, 0.5, max(self.life.time_left(), 0.0))
            try:
                future.result(timeout=max(step, 0.0))
                return run.calls(), "done"
            except concurrent.futures.TimeoutError:
                pass
            finished = run.abandon_if_past(timeout)
            if finished is not None:
                return finished, "timeout"
            if self.life.time_left() <= 0:
                return run.abandon(), "stop"

    def _outcomes(self, items: list[Item], given: list, call: Call) -> list[Outcome]:
        """One call's outcome for each of its items: what it returned, read as batch_outcomes
        does, or all failed if it raised or returned the wrong shape."""
        ids = [item.id for item in items]
        if call.error is not None:
            return [Outcome(False, describe_error(call.error))] * len(ids)
        self.metrics.check_duration.observe(call.seconds)
        try:
            return batch_outcomes(ids, call.value, given, self.key_of)
        except BaseException as error:  # the wrong shape, or a result whose len() or lookup raised
            reason = str(error) if isinstance(error, CheckShapeError) else describe_error(error)
            log.error(
                "check %s: %s; the batch's %d rows are recorded as failed", self.check_name, reason, len(ids)
            )
            return [Outcome(False, f"CheckShapeError: {reason}")] * len(ids)

    @property
    def abandoned(self) -> int:
        """Checks abandoned past their timeout so far (their threads may still run)."""
        return self._hung

    def still_running(self) -> int:
        """Rows of abandoned calls whose threads still run (max_in_flight counts them: they may
        still be calling the provider)."""
        self._abandoned = [(future, rows) for future, rows in self._abandoned if not future.done()]
        return sum(rows for _, rows in self._abandoned)

    def _abandon(self, why: str, future: concurrent.futures.Future | None = None, rows: int = 0) -> None:
        """Leave a hung check's thread behind; a process with too many of them restarts."""
        log.warning("%s; abandoning it", why)
        if future is not None:
            self._abandoned.append((future, rows))
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = DaemonPool(1)
        self._hung += 1
        if self._hung >= HUNG_CHECKS_LIMIT:
            self.life.fail(f"{self._hung} checks hung and cannot be interrupted; exiting for a fresh process")

    def run(self) -> None:
        """Takes until the process stops (a poll's wait, or the backoff after an outage)."""
        life = self.life
        while not life.stopping:
            _, wait = life.attempt(self.poll)
            if wait:
                life.wait(wait)

    def items_in_hand(self) -> list[Item]:
        return self.in_hand

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.close_reader()
