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
from collections.abc import Sequence
from dataclasses import dataclass

import pymysql

from shared.config import Settings, log_prefix
from shared.db import DATA_ERRORS, DEADLOCK, LOCK_WAIT_TIMEOUT, Database, DatabaseDown, error_code
from shared.entries import Item, batch_json, datetime_to_ms
from shared.keytypes import INT_KEYS, KeyKind
from shared.schema import Table, describe_table
from shared.sql import Queries
from workers.checks import Outcome

log = logging.getLogger(__name__)

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

    def __add__(self, other: Written) -> Written:
        return Written(
            self.succeeded + other.succeeded,
            self.failed + other.failed,
            self.stale + other.stale,
            self.deferred + other.deferred,
        )


NOTHING_WRITTEN = Written(0, 0, 0)


class RowsRefused(Exception):
    """A value in the batch was refused by its column (a data error): some row's, not the batch's."""


def clip(text: str | None, limit: int | None) -> str | None:
    if text is None or limit is None:
        return text
    return text[:limit]


def split_outcomes(
    items: Sequence[Item],
    outcomes: Sequence[Outcome],
    result_limit: int | None,
    error_limit: int | None,
    keys: KeyKind = INT_KEYS,
    interval_us: tuple[int, int] = (0, 2**62),
) -> tuple[list[tuple], list[tuple]]:
    """(successes, failures) as rows for the JSON batches: (key, due_ms, text), texts clipped to
    their columns; a success whose check asked for its own next interval (Recheck) gets it as a
    fourth element, in microseconds, kept within interval_us = (min, max)."""
    successes, failures = [], []
    ref = keys.ref
    low, high = interval_us
    for item, outcome in zip(items, outcomes, strict=True):
        if not outcome.ok:
            failures.append((ref(item), item.due_ms, clip(outcome.text, error_limit)))
        elif outcome.after is None:
            successes.append((ref(item), item.due_ms, clip(outcome.text, result_limit)))
        else:
            after_us = min(max(round(outcome.after * 1_000_000), low), high)
            successes.append((ref(item), item.due_ms, clip(outcome.text, result_limit), after_us))
    return successes, failures


class WriteBack:
    def __init__(self, settings: Settings, db: Database):
        self.settings = settings
        self.db = db
        self.queries = Queries(settings)
        self.table: Table | None = None
        self.clock_offset_ms = 0.0  # database clock minus this host's clock
        self.clock_read_at = -CLOCK_REFRESH

    def learn_table(self) -> None:
        """Read the id column's type and the text columns' sizes (once, at start)."""
        self.table = describe_table(self.settings, self.db)
        self.queries = Queries(self.settings, keys=self.table.keys)

    @property
    def keys(self) -> KeyKind:
        """How this table's keys travel (read with the table at start)."""
        if self.table is None:
            self.learn_table()
        return self.table.keys

    def db_now_ms(self) -> float:
        """The database clock, estimated from this host's (offset measured once a minute).

        Never raises: a lost connection keeps the last offset, since a lateness figure must not
        stand between a written batch and its acknowledgement."""
        if time.monotonic() - self.clock_read_at >= CLOCK_REFRESH:
            try:
                before = time.time()
                db_now = datetime_to_ms(self.db.scalar(self.queries.db_now))
                after = time.time()
                self.clock_offset_ms = db_now - (before + after) * 500
            except DatabaseDown as error:
                log.debug("database clock not read (%s); keeping the last offset", error)
            self.clock_read_at = time.monotonic()
        return time.time() * 1000 + self.clock_offset_ms

    def probe(self) -> None:
        """Raise DatabaseDown (or DatabaseRefused) unless MySQL takes writes right now."""
        self.db.execute(self.queries.writable)

    def write(self, items: Sequence[Item], outcomes: Sequence[Outcome], retry: bool = False) -> Written:
        """retry: an earlier attempt of this write lost its connection (see PATIENT_LOCK_WAITS)."""
        if self.table is None:
            self.learn_table()
        return self._write_isolating(list(zip(items, outcomes, strict=True)), retry)

    def _write_isolating(self, pairs: list[tuple[Item, Outcome]], retry: bool = False) -> Written:
        """Write the pairs; where a column refuses a value, halve until each refusing row is alone."""
        try:
            return self._write(pairs, retry)
        except RowsRefused as refused:
            if len(pairs) > 1:
                half = len(pairs) // 2
                return self._write_isolating(pairs[:half]) + self._write_isolating(pairs[half:])
            return self._refused_alone(pairs[0], refused)

    def _refused_alone(self, pair: tuple[Item, Outcome], refused: RowsRefused) -> Written:
        item, outcome = pair
        if outcome.ok:  # the result was refused: the row fails with the server's reason
            try:
                return self._write([(item, Outcome(False, f"ResultRefused: the result column refused "
                                                          f"the check's result: {refused}"))])  # fmt: skip
            except RowsRefused as again:
                refused = again
        log.error("%srow %s: not even its failure can be stored (%s); left for a later cycle",
                  log_prefix(self.settings), item.id, refused)  # fmt: skip
        return Written(0, 0, 0, (item.entry,))

    def _write(self, pairs: list[tuple[Item, Outcome]], retry: bool = False) -> Written:
        """One transaction (one statement when all succeeded); if another transaction holds a
        row, the rows nobody holds are locked first and written, the held ones deferred. A
        retry after a lost connection first waits PATIENT_LOCK_WAITS lock waits for its rows."""
        statements, tally = self._statements(pairs)
        if not statements:
            return NOTHING_WRITTEN
        for attempt in range(1 + (PATIENT_LOCK_WAITS if retry else 0)):
            try:
                return tally(self.db.transaction(statements))
            except pymysql.err.MySQLError as error:
                code = error_code(error)
                if code in DATA_ERRORS:
                    raise RowsRefused(str(error)) from error
                if code not in (LOCK_WAIT_TIMEOUT, DEADLOCK):
                    raise
            if retry and attempt == 0:
                log.warning("%srows of a write retried after a lost connection are still locked (the "
                            "server rolling back the lost attempt?); waiting up to %d more lock waits",
                            log_prefix(self.settings), PATIENT_LOCK_WAITS)  # fmt: skip
        return self.db.run_in_transaction(lambda cursor: self._write_unlocked(cursor, pairs))

    def _write_unlocked(self, cursor, pairs: list[tuple[Item, Outcome]]) -> Written:
        refs = batch_json((self.table.keys.ref(item),) for item, _ in pairs)
        cursor.execute(self.queries.lock_unlocked, {"batch": refs})
        locked = {row[0] for row in cursor.fetchall()}
        held = tuple(item.entry for item, _ in pairs if item.id not in locked)
        if held:
            log.warning("%s%d rows are locked by another transaction; deferred to a later cycle",
                        log_prefix(self.settings), len(held))  # fmt: skip
        statements, tally = self._statements([pair for pair in pairs if pair[0].id in locked])
        counts = [cursor.execute(sql, args) for sql, args in statements]
        return tally(counts) + Written(0, 0, 0, held)

    def _statements(self, pairs: list[tuple[Item, Outcome]]):
        """The batch's statements, and a function turning their row counts into a Written."""
        settings, queries, table = self.settings, self.queries, self.table
        bounds = round(settings.min_interval * 1_000_000), round(settings.max_interval * 1_000_000)
        successes, failures = split_outcomes(
            [item for item, _ in pairs],
            [outcome for _, outcome in pairs],
            table.result_limit,
            table.error_limit,
            table.keys,
            bounds,
        )
        statements: list[tuple[str, dict]] = []
        if successes:
            interval = {
                "batch": batch_json(successes),
                "interval_us": round(settings.interval * 1_000_000),
                "min_interval_us": bounds[0],
                "max_interval_us": bounds[1],
            }
            statements.append((queries.write_success, interval))
        if failures:
            statements.append((queries.record_failure, {"batch": batch_json(failures)}))
            retry = {
                "batch": batch_json((row_id, due_ms) for row_id, due_ms, _ in failures),
                "retry_base_ms": round(settings.retry_base * 1000),
                "retry_max_ms": round(settings.retry_max * 1000),
            }
            statements.append((queries.schedule_retry, retry))

        def tally(counts: list[int]) -> Written:
            succeeded = counts[0] if successes else 0
            failed = counts[1 if successes else 0] if failures else 0
            return Written(succeeded, failed, len(successes) - succeeded + len(failures) - failed)

        return statements, tally
