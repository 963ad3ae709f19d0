"""Writing a batch's outcomes to MySQL in a constant number of fenced statements.

Successes: one UPDATE. Failures: two more (count the failure, then schedule the retry), all
in one transaction. Every statement is fenced on (id, due time at dispatch): a row whose due
time has moved on (someone else already wrote this cycle) is not touched, so a retry after a
lost connection, or a late duplicate worker, changes nothing.

What the table does to a batch is handled here, once, for both loops:
- a row the application holds locked longer than recheck's lock wait: the rest of the batch
  is written (the rows nobody holds are locked with SKIP LOCKED first) and that row is deferred,
  let go for the sweep to bring back once it is overdue;
- rows still locked when a write is retried after its connection was lost: MySQL may be
  rolling back this very write's transaction (crash recovery, or a killed session) and holds
  its rows until it is done, so such a retry waits a few lock waits longer before deferring;
- a value a column refuses (too long for it, not one of an ENUM's values, a result the result
  column cannot hold): the batch is written in halves until the refusing rows stand alone, and
  each of them is recorded as failed with the server's reason. Never a crash, never a loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from zlib import crc32

import pymysql

from recheck.shared.config import Workload
from recheck.shared.core.entries import Item, datetime_to_ms
from recheck.shared.core.keys import INT_KEYS, KeyKind
from recheck.shared.errors import CheckBoundaryError
from recheck.shared.mysql.db import (
    DATA_ERRORS,
    DEADLOCK,
    LOCK_WAIT_TIMEOUT,
    Database,
    DatabaseDown,
    error_code,
)
from recheck.shared.mysql.rows import Rows
from recheck.shared.mysql.sql import JITTER_RUNS, JITTER_SHIFT, jitter_share
from recheck.shared.policies.lifecycle import lifecycle_of, rhythm_of
from recheck.workers.checks import Outcome
from recheck.workers.writing.schedules import RowSchedules

log = logging.getLogger(__name__)

BY_KEY = itemgetter(0)  # a batch row's key (split_outcomes)
CLOCK_REFRESH = 60.0  # seconds between readings of the database clock, for lateness figures
# Lock waits a retry after a lost connection spends on its rows before deferring them: InnoDB
# rolls back a crashed server's open transactions in the background after it restarts.
PATIENT_LOCK_WAITS = 3


@dataclass(frozen=True)
class Written:
    succeeded: int  # rows written as checked
    failed: int  # rows written as failed (retry scheduled)
    stale: int  # rows fenced out: their due time had moved on
    deferred: tuple[bytes, ...] = ()  # entries of rows another transaction held: not written
    changes: int = 0  # transitions recorded in the change feed (workloads with `changes`)

    def __add__(self, other: Written) -> Written:
        return Written(
            self.succeeded + other.succeeded,
            self.failed + other.failed,
            self.stale + other.stale,
            self.deferred + other.deferred,
            self.changes + other.changes,
        )


NOTHING_WRITTEN = Written(0, 0, 0)


class RowsRefused(CheckBoundaryError):
    """A value in the batch was refused by its column (a data error): some row's, not the batch's."""


def clip(text: str | None, limit: int | None) -> str | None:
    if text is None or limit is None:
        return text
    return text[:limit]


@dataclass(frozen=True)
class NextDue:
    """How a success's next interval travels in the batch (microseconds). jitter > 0: computed
    here, up to `jitter` of it earlier by the same hash the SQL uses for failures (CRC32 of
    "key:due_ms": another share every cycle, the same on a retried write), never below the
    minimum; a per-row hash in the UPDATE cost MySQL about 1.3 us a row (docs/performance.md).
    interval_us None: the row's interval is in SQL (an interval column); only Recheck(after=)
    travels."""

    low: int = 0  # min_interval
    high: int = 2**62  # max_interval
    interval_us: int | None = None
    jitter: float = 0.0

    def clamped(self, after_s: float) -> int:
        """A check's Recheck(after=) in microseconds, kept within [low, high]."""
        return min(max(round(after_s * 1_000_000), self.low), self.high)


def jittered(interval_us: int, crc: int, jitter: float, low: int) -> int:
    """An interval brought forward by the step of `jitter` a seed's CRC32 picks, never below `low`."""
    return max(low, round(interval_us * (1 - jitter * jitter_share(crc))))


def jitter_steps(interval_us: int, jitter: float, low: int) -> tuple[int, ...]:
    """The JITTER_RUNS intervals a row's may become, indexed by crc32(seed) >> JITTER_SHIFT."""
    return tuple(jittered(interval_us, step << JITTER_SHIFT, jitter, low) for step in range(JITTER_RUNS))


def split_outcomes(
    items: Sequence[Item],
    outcomes: Sequence[Outcome],
    result_limit: int | None,
    error_limit: int | None,
    keys: KeyKind = INT_KEYS,
    due: NextDue = NextDue(),
    ticks: Mapping[bytes, int] | None = None,
) -> tuple[list[tuple], list[tuple]]:
    """(successes, failures) as rows for the JSON batches: (key, due_ms, text), texts clipped to
    their columns; a success gets its next interval as a fourth element, in microseconds, when
    its check asked for one (Recheck, kept within [due.low, due.high]) or when it is jittered
    here (see NextDue). ticks (a scheduled workload): entry -> the row's next tick (due_ms), last
    in both kinds of rows (a success's fourth element then None when its check asked nothing)."""
    if ticks is not None:
        return scheduled_outcomes(items, outcomes, result_limit, error_limit, keys, due, ticks)
    successes: list[tuple] = []
    failures: list[tuple] = []
    ref = keys.ref
    low, jitter = due.low, due.jitter
    # The seed of a row's step is its entry: the key as the batch carries it (v.row_key), ':' and
    # the due time, both as MySQL printed them (the SQL hashes CONCAT(v.row_key, ':', v.due_ms)).
    # That holds for every entry recheck makes (MySQL prints both parts; the scripts only move
    # them); one spelled otherwise by hand ('007:5': the parsers accept it) gets another valid
    # step than the SQL would give it, nothing worse.
    # No steps: the interval is the SQL's (an interval column, one-shot rows) or jitter is 0.
    steps = jitter_steps(due.interval_us, jitter, low) if due.interval_us is not None and jitter > 0 else ()
    for item, outcome in zip(items, outcomes, strict=True):
        key = ref(item)
        if not outcome.ok:
            failures.append((key, item.due_ms, clip(outcome.text, error_limit)))
            continue
        text = clip(outcome.text, result_limit)
        if outcome.after is not None:
            after_us = due.clamped(outcome.after)
            if steps:
                after_us = jittered(after_us, crc32(item.entry), jitter, low)
        elif steps:
            after_us = steps[crc32(item.entry) >> JITTER_SHIFT]
        else:  # the SQL's own interval
            successes.append((key, item.due_ms, text))
            continue
        successes.append((key, item.due_ms, text, after_us))
    return successes, failures


def scheduled_outcomes(
    items: Sequence[Item],
    outcomes: Sequence[Outcome],
    result_limit: int | None,
    error_limit: int | None,
    keys: KeyKind,
    due: NextDue,
    ticks: Mapping[bytes, int],
) -> tuple[list[tuple], list[tuple]]:
    """split_outcomes of a scheduled workload: (key, due_ms, text, after_us or None, at_ms) and
    (key, due_ms, error, at_ms); no jitter (a tick is a tick)."""
    successes: list[tuple] = []
    failures: list[tuple] = []
    for item, outcome in zip(items, outcomes, strict=True):
        key, at_ms = keys.ref(item), ticks[item.entry]
        if not outcome.ok:
            failures.append((key, item.due_ms, clip(outcome.text, error_limit), at_ms))
            continue
        after_us = None if outcome.after is None else due.clamped(outcome.after)
        successes.append((key, item.due_ms, clip(outcome.text, result_limit), after_us, at_ms))
    return successes, failures


class WriteBack:
    def __init__(self, workload: Workload, db: Database):
        self.workload = workload
        self.db = db
        self.rows = Rows(workload, db)
        self.next_due = NextDue(
            low=round(workload.min_interval * 1_000_000),
            high=round(workload.max_interval * 1_000_000),
            # No interval of its own: a row's interval column, or a one-shot workload (a success is
            # done; only a Recheck(after=) reschedules it).
            interval_us=None
            if workload.interval_column or rhythm_of(workload).calendar or lifecycle_of(workload).success_done
            else round(workload.interval * 1_000_000),
            jitter=workload.jitter,
        )
        self.clock_offset_ms = 0.0  # database clock (DATETIME in the session time zone) minus this host's
        self.epoch_offset_s = 0.0  # database clock (Unix seconds) minus this host's
        self.clock_read_at = -CLOCK_REFRESH
        self.schedules = RowSchedules(workload, self.rows) if rhythm_of(workload).calendar else None

    def learn_table(self) -> None:
        """Read the id column's type and the text columns' sizes (once, at start)."""
        self.rows.table  # noqa: B018

    @property
    def keys(self) -> KeyKind:
        """How this table's keys travel (read with the table at start)."""
        return self.rows.keys

    def _read_clock(self) -> None:
        """Measure the database clock against this host's, once a minute.

        Never raises: a lost connection keeps the last offsets, since a lateness figure or an
        error's time must not stand between a written batch and its acknowledgement."""
        if time.monotonic() - self.clock_read_at < CLOCK_REFRESH:
            return
        try:
            before = time.time()
            db_now, db_epoch = self.rows.clock()
            host = (before + time.time()) / 2
            self.clock_offset_ms = datetime_to_ms(db_now) - host * 1000
            self.epoch_offset_s = float(db_epoch) - host
        except DatabaseDown as error:
            log.debug("database clock not read (%s); keeping the last offset", error)
        self.clock_read_at = time.monotonic()

    def db_now_ms(self, refresh: bool = True) -> float:
        """The database clock as due times read it (ms), estimated from this host's. refresh:
        False from a thread that must not touch this connection (the heartbeat)."""
        if refresh:
            self._read_clock()
        return time.time() * 1000 + self.clock_offset_ms

    def db_epoch(self) -> float:
        """The database clock in Unix seconds, estimated from this host's."""
        self._read_clock()
        return time.time() + self.epoch_offset_s

    def probe(self) -> None:
        """Raise DatabaseDown (or DatabaseRefused) unless MySQL takes writes right now."""
        self.rows.probe_writable()

    def write(self, items: Sequence[Item], outcomes: Sequence[Outcome], retry: bool = False) -> Written:
        """retry: an earlier attempt of this write lost its connection (see PATIENT_LOCK_WAITS)."""
        pairs = list(zip(items, outcomes, strict=True))
        if self.schedules is None:
            return self._write_isolating(pairs, retry)
        return self._write_scheduled(pairs, retry)

    def _write_scheduled(self, pairs: list[tuple[Item, Outcome]], retry: bool) -> Written:
        """A scheduled workload's write: each row due again at its next tick; a row whose schedule
        cannot be used is parked with the reason (fenced, as every write)."""
        assert self.schedules is not None
        self._read_clock()
        ticks = self.schedules.next_ticks(
            [item for item, _ in pairs], self.clock_offset_ms, self.epoch_offset_s
        )
        written = Written(0, 0, len(ticks.gone))  # deleted since their dispatch: nothing to write
        keys = self.rows.keys
        for reason, parked in ticks.parked.items():
            n = self.rows.quarantine([(keys.ref(item), item.due_ms) for item in parked], reason)
            log.error("%srows %s: %s", self.workload.log_prefix,
                      ", ".join(str(keys.show(item.id)) for item in parked[:10]), reason)  # fmt: skip
            written += Written(0, n, len(parked) - n)
        kept = [pair for pair in pairs if pair[0].entry in ticks.at_ms]
        return written + (self._write_isolating(kept, retry, ticks.at_ms) if kept else NOTHING_WRITTEN)

    def _write_isolating(
        self, pairs: list[tuple[Item, Outcome]], retry: bool = False, ticks: Mapping[bytes, int] | None = None
    ) -> Written:
        """Write the pairs; where a column refuses a value, halve until each refusing row is alone."""
        try:
            return self._write(pairs, retry, ticks)
        except RowsRefused as refused:
            if len(pairs) > 1:
                half = len(pairs) // 2
                return self._write_isolating(pairs[:half], ticks=ticks) + self._write_isolating(
                    pairs[half:], ticks=ticks
                )
            return self._refused_alone(pairs[0], refused, ticks)

    def _refused_alone(
        self, pair: tuple[Item, Outcome], refused: RowsRefused, ticks: Mapping[bytes, int] | None
    ) -> Written:
        item, outcome = pair
        if outcome.ok:  # the result was refused: the row fails with the server's reason
            try:
                return self._write([(item, Outcome(False, f"ResultRefused: the result column refused "
                                                          f"the check's result: {refused}"))],
                                   ticks=ticks)  # fmt: skip
            except RowsRefused as again:
                refused = again
        log.error("%srow %s: not even its failure can be stored (%s); left for a later cycle",
                  self.workload.log_prefix, item.id, refused)  # fmt: skip
        return Written(0, 0, 0, (item.entry,))

    def _write(
        self, pairs: list[tuple[Item, Outcome]], retry: bool = False, ticks: Mapping[bytes, int] | None = None
    ) -> Written:
        """One transaction (one statement when all succeeded); if another transaction holds a
        row, the rows nobody holds are locked first and written, the held ones deferred. A
        retry after a lost connection first waits PATIENT_LOCK_WAITS lock waits for its rows."""
        plan = self._plan(pairs, ticks)
        if plan is None:
            return NOTHING_WRITTEN
        for attempt in range(1 + (PATIENT_LOCK_WAITS if retry else 0)):
            try:
                return self.db.run_in_transaction(plan.run, begin=plan.statements > 1)
            except pymysql.err.MySQLError as error:
                code = error_code(error)
                if code in DATA_ERRORS:
                    raise RowsRefused(str(error)) from error
                if code not in (LOCK_WAIT_TIMEOUT, DEADLOCK):
                    raise
            if retry and attempt == 0:
                log.warning("%srows of a write retried after a lost connection are still locked (the "
                            "server rolling back the lost attempt?); waiting up to %d more lock waits",
                            self.workload.log_prefix, PATIENT_LOCK_WAITS)  # fmt: skip
        return self.db.run_in_transaction(lambda cursor: self._write_unlocked(cursor, pairs, ticks))

    def _write_unlocked(
        self, cursor, pairs: list[tuple[Item, Outcome]], ticks: Mapping[bytes, int] | None = None
    ) -> Written:
        keys = self.rows.keys
        cursor.execute(*self.rows.lock_unlocked([keys.ref(item) for item, _ in pairs]))
        locked = {row[0] for row in cursor.fetchall()}
        held = tuple(item.entry for item, _ in pairs if item.id not in locked)
        if held:
            log.warning("%s%d rows are locked by another transaction; deferred to a later cycle",
                        self.workload.log_prefix, len(held))  # fmt: skip
        plan = self._plan([pair for pair in pairs if pair[0].id in locked], ticks)
        return (plan.run(cursor) if plan else NOTHING_WRITTEN) + Written(0, 0, 0, held)

    def _plan(
        self, pairs: list[tuple[Item, Outcome]], ticks: Mapping[bytes, int] | None = None
    ) -> WritePlan | None:
        """The batch's statements, to run in one transaction (None: nothing to write)."""
        workload, table = self.workload, self.rows.table
        successes, failures = split_outcomes(
            [item for item, _ in pairs],
            [outcome for _, outcome in pairs],
            table.result_limit,
            table.error_limit,
            table.keys,
            self.next_due,
            ticks,
        )
        if not successes and not failures:
            return None
        # Successes in key order: the UPDATE's join follows its JSON batch, so the rows' primary
        # key pages and each jitter step's run in the due index are written in ascending order
        # (MariaDB 0.6-1.1 us less per check in a drain, docs/performance.md). A stable sort; text
        # keys go by their bytes' hex, which is their index's order only in a binary collation.
        successes.sort(key=BY_KEY)
        shown = None
        if workload.changes:  # the keys as the feed shows them, in the order of the two lists
            ok = sorted((item for item, outcome in pairs if outcome.ok), key=table.keys.ref)  # as above
            ordered = ok + [item for item, outcome in pairs if not outcome.ok]
            shown = [str(table.keys.show(item.id)) for item in ordered]
        return WritePlan(self.rows, successes, failures, shown)


class WritePlan:
    """One write-back's statements: [read the rows as they are,] the successes' UPDATE (a one-shot
    workload's: the rescheduled ones' UPDATE and the done ones' UPDATE or DELETE), the failures'
    two UPDATEs[, read back what may have changed, the change feed's INSERT]; run(cursor) runs them
    in the caller's transaction and counts what they did."""

    def __init__(self, rows: Rows, successes: list[tuple], failures: list[tuple], shown: list[str] | None):
        self.rows, self.successes, self.failures, self.shown = rows, successes, failures, shown
        rescheduled, done = successes, []
        if lifecycle_of(rows.workload).success_done:  # unless its check said when to run it again
            rescheduled = [row for row in successes if len(row) > 3]
            done = [row for row in successes if len(row) <= 3]
        self.success_writes = [rows.write_success(rescheduled)] if rescheduled else []
        self.success_writes += [rows.write_done(done)] if done else []
        self.writes = self.success_writes + (rows.write_failures(failures) if failures else [])
        self.statements = len(self.writes) + (3 if shown is not None else 0)
        # The change feed of a recurring workload: first the successes it has nothing to record of
        # (most of them, most of the time), in one UPDATE without a read before it.
        self.unchanged = (
            rows.write_unchanged(successes) if shown is not None and successes and not done else None
        )

    def run(self, cursor) -> Written:
        unchanged = cursor.execute(*self.unchanged) if self.unchanged is not None else 0
        if self.unchanged is not None and unchanged == len(self.successes) and not self.failures:
            return Written(unchanged, 0, 0)
        return self.run_all(cursor, unchanged)

    def run_all(self, cursor, unchanged: int = 0) -> Written:
        """Every statement; after write_unchanged (`unchanged` rows written), for the rows it left:
        the fence skips the others."""
        before = None
        if self.shown is not None:
            cursor.execute(*self.rows.read_before_write([row[:2] for row in self.successes + self.failures]))
            before = {int(n): (result, fails) for n, result, fails in cursor.fetchall()}
        counts = [cursor.execute(sql, args) for sql, args in self.writes]
        succeeded = unchanged + sum(counts[: len(self.success_writes)])
        failed = counts[len(self.success_writes)] if self.failures else 0  # the failures' first UPDATE
        stale = len(self.successes) - succeeded + len(self.failures) - failed
        recorded = 0
        if before and self.shown is not None:
            maybe = candidates(before, self.successes)
            after = {}
            if maybe:  # read back, in the column's own type, only what may have changed
                cursor.execute(*self.rows.read_after_write([self.successes[place - 1][0] for place in maybe]))
                after = {maybe[int(n) - 1]: result for n, result in cursor.fetchall()}
            records = transitions(before, after, self.successes, self.failures, self.shown)
            if records:
                recorded = cursor.execute(*self.rows.record_changes(records))
        return Written(succeeded, failed, stale, changes=recorded)


def as_text(value) -> str | None:
    """A stored result as the feed shows it: text as it is, binary as UTF-8 (bad bytes replaced),
    numbers and times as Python writes them (PyMySQL's values: Decimal('0.50') is '0.50')."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def candidates(before: dict, successes: Sequence[tuple]) -> list[int]:
    """Places (from 1) of the successes whose stored result may change or that end a failing
    streak: those whose stored value, as text, differs from the check's text. Equal text is
    the same value in every column type; different text may still be the same value ('0.5'
    into a DECIMAL holding 0.50, 'ok ' into a CHAR), which reading back tells."""
    return [
        place
        for place, row in enumerate(successes, 1)
        if place in before and (before[place][1] or as_text(before[place][0]) != row[2])
    ]


def transitions(
    before: dict, after: dict, successes: Sequence[tuple], failures: Sequence[tuple], shown: Sequence[str]
) -> list[tuple]:
    """The change feed's records (key, old, new, old_failing, new_failing, error) of one write:
    a success whose stored result changed (compared as stored, in the column's own type: 'UP' is
    not 'up', 0.50 is 0.5), or that ends a failing streak; a failure that starts one (the stored
    result stays). before: place in successes + failures (from 1) -> (stored result, fail count)
    for the rows the write touches (the others are fenced out and change nothing); after: place
    -> stored result after the write, for the successes read back (candidates())."""
    records = []
    for place in sorted(after):
        old, fails = before[place]
        new = after[place]
        if fails or old != new:
            records.append((shown[place - 1], as_text(old), as_text(new), bool(fails), False, None))
    for place, row in enumerate(failures, len(successes) + 1):
        if place in before and not before[place][1]:
            old = as_text(before[place][0])
            records.append((shown[place - 1], old, old, False, True, row[2]))
    return records
