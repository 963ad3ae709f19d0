"""Per-row checks, RECHECK_CONCURRENCY at a time, written back in batches.

For I/O-bound checks (an HTTP call, an API lookup) one process keeps hundreds of rows in
progress on one asyncio event loop (plain functions run in a thread pool of that size).
Ids are taken from Redis only when a worthwhile number of slots is free, and finished rows
are written back and acknowledged together every FLUSH_SECONDS or FLUSH_ROWS: never a round
trip per id. The write-back and acknowledgement run in a thread, one batch at a time, so the
event loop keeps starting and finishing checks meanwhile; taking ids from Redis is one short
synchronous call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import time
from collections.abc import Sequence

from recheck.shared.core.entries import Item, entry_key
from recheck.shared.policies.ordering import ordering_of
from recheck.shared.process.tracing import span_id_of
from recheck.workers.checks import Outcome, describe_error, outcome_of
from recheck.workers.intake import split
from recheck.workers.loopbase import HUNG_CHECKS_LIMIT, IDLE_PROBE_EVERY, CheckLoop
from recheck.workers.pool import DaemonPool

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05
FLUSH_ROWS = 500
EMPTY_QUEUE_PAUSE = 0.02  # while checks run and the queue is empty, ask again after this
GROUP_HELD_PAUSE = 0.1  # while checks run and a group's limits hold its rows back, ask again after this
ENDED_PER_TAKE = 1000  # ended entries a take gives their group's room back for (take_grouped.lua's most)
CANCEL_LOOK_EVERY = 0.2  # while checks run: how often the loop asks which were cancelled (recheck cancel)


class RowLoop(CheckLoop):
    def __init__(self, *parts) -> None:
        super().__init__(*parts)
        workload = self.workload
        self.concurrency = workload.concurrency
        self.batch = workload.worker_batch
        # Take from Redis only when this many slots are free (or the pipeline is empty).
        self.min_take = max(1, min(self.batch, self.concurrency // 16))
        self.timeout = workload.check_timeout
        self.is_async = inspect.iscoroutinefunction(self.check)
        self.pool: DaemonPool | None = None if self.is_async else DaemonPool(self.concurrency)
        self.pending: dict[asyncio.Task, Item] = {}
        self.finished: list[tuple[Item, Outcome]] = []
        self.gone: list[bytes] = []  # entries of rows deleted since their dispatch, acknowledged at a flush
        self.last_flush = time.monotonic()
        self.next_take = 0.0  # after an empty take, wait a little before asking Redis again
        self.completed: list[asyncio.Task] = []  # finished checks not yet harvested
        self.wakeup: asyncio.Event | None = None  # set when a check finishes (made inside the loop)
        self.flushing: asyncio.Task | None = None  # the write-back under way, in a thread
        self.flushing_items: list[Item] = []
        self.hung = 0  # plain checks past their timeout whose threads are still running
        self.next_touch = 0.0  # when an idle loop next makes sure MySQL takes its writes
        # group_max_in_flight counts calls: entries whose checks ended give their group's room
        # back at our next take, not at their ack after the write-back (take_grouped.lua ARGV[14..]).
        limit = ordering_of(workload).group_limit
        self.frees_group_room = limit is not None and limit.in_flight > 0
        self.ended: list[bytes] = []
        self.next_cancel_look = 0.0

    def entries_in_hand(self) -> set[bytes]:
        held = {item.entry for item in self.pending.values()} | {item.entry for item, _ in self.finished}
        return held | {item.entry for item in self.flushing_items}

    def run(self) -> None:
        try:
            asyncio.run(self.main())
        finally:
            if self.pool:
                self.pool.shutdown(wait=False, cancel_futures=True)
            self.close_reader()

    async def traced_check(self, arg, item: Item, parent: str | None) -> Outcome:
        """check_one in a `recheck.check` span, the child of the row's producer's span (parent: the
        traceparent its trace_column holds; the check's own spans nest in it, on the loop or in
        its thread)."""
        attributes = {"recheck.workload": self.workload.name, "recheck.id": span_id_of(item.id)}
        with self.tracing.span("recheck.check", attributes, parent=parent) as span:
            outcome = await self.check_one(arg)
            if not outcome.ok:
                self.tracing.failed(span, outcome.text or "")
            return outcome

    async def check_one(self, arg) -> Outcome:
        """One row's check: `arg` is its id, or its row with `columns`."""
        started = time.monotonic()
        running = None  # a plain function's call in the pool
        try:
            async with asyncio.timeout(self.timeout):  # no extra task per row, unlike wait_for
                if self.is_async:
                    value = await self.check(arg)
                else:
                    if self.tracing.on:  # the check's own spans nest in its row's, in the thread too
                        running = self.threads().submit(contextvars.copy_context().run, self.check, arg)
                    else:
                        running = self.threads().submit(self.check, arg)
                    value = await asyncio.wrap_future(running)
        except TimeoutError:
            if running is not None and not running.done():
                self.abandon(running)
            return Outcome(False, f"TimeoutError: check did not finish within {self.timeout:g}s")
        except asyncio.CancelledError as error:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # a graceful stop cancelling this row: not the check's
                raise
            return Outcome(False, describe_error(error))  # the check's own (a library cancelled itself)
        except BaseException as error:  # a check may raise anything, sys.exit() too: only its row fails
            return Outcome(False, describe_error(error))
        self.metrics.check_duration.observe(time.monotonic() - started)
        return outcome_of(value)

    def threads(self) -> DaemonPool:
        """The thread pool a plain (not async) check runs in."""
        if self.pool is None:
            raise TypeError("an async check runs on the event loop, not in threads")
        return self.pool

    def abandon(self, running) -> None:
        """A plain check past its timeout keeps its thread: the pool gets one more in its place,
        and a process with too many of them restarts (a thread cannot be interrupted)."""
        self.threads().grow(1)
        self.hung += 1
        loop = asyncio.get_running_loop()
        running.add_done_callback(lambda _: self.call_in_loop(loop, self.unhung))
        if self.hung >= max(HUNG_CHECKS_LIMIT, self.concurrency):
            self.life.fail(
                f"{self.hung} per-row checks hung and cannot be interrupted; exiting for a fresh process"
            )

    @staticmethod
    def call_in_loop(loop: asyncio.AbstractEventLoop, callback) -> None:
        """A hung check may end after its lane stopped and its loop closed: nothing to count then."""
        with contextlib.suppress(RuntimeError):  # "Event loop is closed"
            loop.call_soon_threadsafe(callback)

    def unhung(self) -> None:
        self.hung -= 1
        self.threads().grow(-1)

    async def writable(self) -> bool:
        """While MySQL is failing: probe it (in a thread: checks keep running meanwhile). Not while
        a write-back is under way: that retries through the outage itself and says when it ends."""
        ok, delay = await asyncio.to_thread(self.life.attempt, self.ready_to_write)
        if not ok:
            self.next_take = time.monotonic() + delay
        return ok

    def at_rest(self) -> bool:
        """No check running, no result and no deleted row waiting for the next flush."""
        return not (self.pending or self.finished or self.gone)

    async def wait_for_work(self) -> None:
        """Block in Redis until a wake token comes (or IDLE_WAIT passes); idle, make sure MySQL
        still takes our writes every few seconds, as the batch loop does (keep_in_touch)."""
        ok, woken = await asyncio.to_thread(self.life.attempt, self.intake.wait_for_work)
        if ok and not woken:
            await asyncio.to_thread(self.life.attempt, self.keep_in_touch)

    async def main(self) -> None:
        life, intake = self.life, self.intake
        self.wakeup = asyncio.Event()
        while not life.stopping:
            free = self.concurrency - len(self.pending)
            wants = free >= self.min_take or (free > 0 and not self.pending)
            if (
                wants
                and time.monotonic() >= self.next_take
                and (not life.mysql_outage.down or (self.flushing is None and await self.writable()))
            ):
                if intake.idle(self.hung) and self.at_rest() and not self.ended:
                    # Nothing to do, nothing to tell the limits, and no token since the last empty
                    # take: block until one comes.
                    await self.wait_for_work()
                    continue
                limit = min(free, self.batch)
                # Running: our checks in progress, and abandoned ones whose threads still call
                # the provider (max_in_flight counts them until they end).
                running = len(self.pending) + self.hung
                ended = self.ended[:ENDED_PER_TAKE]
                take = functools.partial(intake.take, limit, self.entries_in_hand, running, ended)
                ok, taken = life.attempt(take)
                if not ok:
                    await asyncio.sleep(taken)  # the backoff delay
                    continue
                del self.ended[: len(ended)]
                held_back = intake.limit_wait() if not taken else 0.0
                if held_back and intake.held_by_group() and not self.pending:
                    # A group's limits or breaker: blocked meanwhile, woken by other groups' new work.
                    await asyncio.to_thread(life.attempt, functools.partial(intake.wait_for_work, held_back))
                    continue
                if held_back and intake.held_by_group():  # checks run: ask again soon, not after its wait
                    held_back = min(held_back, GROUP_HELD_PAUSE)
                if held_back:  # ids are queued, but the limits say wait: checks go on meanwhile
                    self.next_take = time.monotonic() + held_back
                elif not taken and self.at_rest():
                    # Nothing to do: block in Redis until work arrives (or IDLE_WAIT passes).
                    await self.wait_for_work()
                    continue
                if not taken and not held_back:
                    self.next_take = time.monotonic() + EMPTY_QUEUE_PAUSE
                self.start(taken)
            if self.pending:
                self.look_for_cancels()
                # Woken by the first check to finish (or the flush period): O(finished), never
                # O(pending) as asyncio.wait over hundreds of tasks would be on every wake-up.
                if not self.completed:
                    self.wakeup.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(FLUSH_SECONDS):
                            await self.wakeup.wait()
                self.harvest()
            elif self.flushing is not None:
                # Nothing running: yield to the loop until the write-back in its thread ends
                # (a loop that never awaits here would never see it finish).
                await asyncio.wait({self.flushing}, timeout=FLUSH_SECONDS)
            else:
                await asyncio.sleep(0.01)  # queue empty: the next take waits for work
                if time.monotonic() >= self.next_touch:  # idle: is MySQL still there for us?
                    self.next_touch = time.monotonic() + IDLE_PROBE_EVERY
                    await asyncio.to_thread(life.attempt, self.keep_in_touch)
            if self.flushing is not None and self.flushing.done():
                self.flushing.result()  # re-raises what the thread raised
                self.flushing, self.flushing_items = None, []
            if (
                (self.finished or self.gone)
                and self.flushing is None
                and (len(self.finished) >= FLUSH_ROWS or time.monotonic() - self.last_flush >= FLUSH_SECONDS)
            ):
                (batch, self.finished), (gone, self.gone) = (self.finished, []), (self.gone, [])
                self.last_flush = time.monotonic()
                self.flushing_items = [item for item, _ in batch]
                self.flushing = asyncio.create_task(asyncio.to_thread(self.flush, batch, gone))
        await self.drain()

    def start(self, entries: list[bytes]) -> None:
        items, malformed = split(entries, self.completer.writeback.keys)
        if malformed:
            self.completer.give_back([], malformed)
        ok, read = self.life.attempt(lambda: self.with_rows(items)) if items else (True, ([], [], []))
        if not ok:  # MySQL away: the rows go back, and takes pause for the backoff
            self.completer.give_back([item.entry for item in items])
            self.next_take = time.monotonic() + read
            return
        items, args, gone = read
        self.gone += gone
        traced = self.tracing.on
        for item, arg in zip(items, args, strict=True):
            task = asyncio.create_task(
                self.traced_check(arg, item, self.contexts.get(item.id)) if traced else self.check_one(arg)
            )
            task.add_done_callback(self.on_done)
            self.pending[task] = item

    def on_done(self, task: asyncio.Task) -> None:
        self.completed.append(task)
        if self.wakeup is not None:  # made by main() before any check starts
            self.wakeup.set()

    def harvest(self) -> None:
        done, self.completed = self.completed, []
        if done and self.intake.waiting_for_room():
            # max_in_flight held our last take back, and our own checks just made room: ask now
            # rather than at the next retry (the take reports how many we still run).
            self.next_take = 0.0
        for task in done:
            item = self.pending.pop(task, None)
            if item is None:
                continue
            if task.cancelled():  # recheck cancel: acknowledged at the next flush, nothing written
                self.gone.append(item.entry)
            else:
                self.finished.append((item, task.result()))
            if self.frees_group_room:
                self.ended.append(item.entry)

    def look_for_cancels(self) -> None:
        """Checks an operator cancelled while they run (Client.cancel, `recheck cancel`): their
        tasks cancelled (a plain function's thread runs on, its result dropped), their entries
        acknowledged without a write (their rows are paused, done or deleted by then). One
        SMEMBERS every CANCEL_LOOK_EVERY, only while checks run."""
        now = time.monotonic()
        if now < self.next_cancel_look:
            return
        self.next_cancel_look = now + CANCEL_LOOK_EVERY
        store = self.completer.store
        ok, marked = self.life.attempt(store.cancelled)
        if not ok or not marked:
            return
        hit = {
            task: entry_key(item.entry)
            for task, item in self.pending.items()
            if entry_key(item.entry) in marked
        }
        for task in hit:
            task.cancel()
        if hit:
            log.warning("%scancelled %d running checks (recheck cancel)", self.workload.log_prefix, len(hit))
            self.life.attempt(lambda: store.forget_cancelled(list(hit.values())))

    def flush(self, batch: list[tuple[Item, Outcome]], gone: Sequence[bytes] = ()) -> None:
        """Write back and acknowledge finished rows (runs in a thread, one batch at a time)."""
        self.complete([item for item, _ in batch], [outcome for _, outcome in batch], gone=gone)

    @property
    def abandoned(self) -> int:
        return self.hung

    def items_in_hand(self) -> list[Item]:
        """The rows being checked, checked or being written (the heartbeat reports their due times)."""
        # Read from the heartbeat thread while the loop changes them: copies (atomic in CPython) first.
        pending, finished, flushing = self.pending.copy(), list(self.finished), list(self.flushing_items)
        return [*pending.values(), *(item for item, _ in finished), *flushing]

    async def drain(self) -> None:
        """Graceful stop: let running checks finish until the deadline, return the rest."""
        if self.pending:
            await asyncio.wait(self.pending, timeout=max(self.life.time_left(), 0.0))
            self.harvest()
        untouched = [item.entry for item in self.pending.values()]
        for task in self.pending:
            task.cancel()
        self.pending.clear()
        if self.flushing is not None:
            await self.flushing
            self.flushing, self.flushing_items = None, []
        if self.finished or self.gone:
            (batch, self.finished), (gone, self.gone) = (self.finished, []), (self.gone, [])
            await asyncio.to_thread(self.flush, batch, gone)
        if untouched:
            self.completer.give_back(untouched)
