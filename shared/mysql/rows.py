"""A workload's table as recheck reads and writes it: one method per thing recheck does with its
rows, and the only code that knows the statements' placeholders (their text is in queries.sql).

The roles and commands ask for a due page, a write-back's statements, a quarantine, a release,
freshness facts or one row's story here; the write-back keeps its own policy (halving refused
batches, lock waits, SKIP LOCKED: workers/writing/writeback.py) and runs the statements it gets
from here. The table's shape (DDL, information_schema) stays with schema.py.

Statements that carry keys need the id column's own type: it is read from the table the first
time one is needed (`keys`), so every statement matches keys in the column's own collation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import pymysql

from recheck.shared.config import Workload
from recheck.shared.core.entries import Key
from recheck.shared.core.keys import KeyKind
from recheck.shared.mysql.batches import batch_json, sql_datetime
from recheck.shared.mysql.db import LOCKED_NOWAIT, Database, error_code
from recheck.shared.mysql.rowtext import parse_row_text
from recheck.shared.mysql.schema import Table, describe_table
from recheck.shared.mysql.sql import Queries, interval_params, quote
from recheck.shared.policies.lifecycle import lifecycle_of

log = logging.getLogger(__name__)

Row = tuple[Any, ...]  # a row as PyMySQL returns it, or a record a write-back sends
Cursor = tuple[int, Any]  # (due_ms, key) of the keyset; a None key: before, or after, every key
Progress = Callable[[int, int], None] | None  # (done, total) of a long walk
Statement = tuple[str, dict[str, Any] | list[Any]]


class OneRow(NamedTuple):
    """One row as `recheck inspect` reads it (queries.sql one_row)."""

    due: datetime | None  # None: a one-shot row done
    checked: datetime | None
    result: Any
    check_count: int
    fails: int
    error: str | None
    now: datetime  # the database clock
    late_s: Any  # seconds past its due time (negative: not due yet; NULL when done)
    due_ms: int | None
    key: Key  # as stored (the column's collation may match another spelling)
    group: Any  # as its group list is named; None for a workload without groups


class RowCounts(NamedTuple):
    """The rows set aside, as status counts them (queries.sql row_counts)."""

    quarantined: int
    paused: int
    dead: int
    pending: int  # one-shot rows still to do, up to the cap asked for (0 when not asked)


class SlowCounts(NamedTuple):
    """The counts that scan the table, as a status sample takes them (queries.sql slow_counts)."""

    rows: int
    due_ahead_unchecked: int  # up to the cap asked for
    failing: int  # up to the cap asked for


class KeyState(NamedTuple):
    """What an action needs to know of a row: parked, and how."""

    paused: bool
    quarantined: bool
    dead: bool = False
    done: bool = False  # a one-shot row done (its due time cleared)


SEED_CHUNK = 100_000  # rows per INSERT ... SELECT (what seed_rows can generate in one statement)
SPREAD_CHUNK = 5_000  # rows per UPDATE when spreading due times: short transactions on a live table


class Rows:
    def __init__(self, workload: Workload, db: Database):
        self.workload = workload
        self.db = db
        self.queries = Queries(workload)
        self._table: Table | None = None

    @property
    def table(self) -> Table:
        """The id column's kind and the text columns' sizes, read from the table once."""
        if self._table is None:
            self._table = describe_table(self.workload, self.db)
            self.queries = Queries(
                self.workload,
                keys=self._table.keys,
                row_text=self._table.row_text,
                text_limits=(self._table.result_limit, self._table.error_limit),
            )
        return self._table

    @property
    def keys(self) -> KeyKind:
        return self.table.keys

    # -- the clock --------------------------------------------------------------------------
    def now(self) -> datetime:
        """The database clock (due decisions use it, never a host's)."""
        now: datetime = self.db.scalar(self.queries.db_now)
        return now

    def clock(self) -> tuple[datetime, float]:
        """The database clock as due times read it, and in Unix seconds."""
        (now, epoch), *_ = self.db.query(self.queries.db_clock)
        return now, float(epoch)

    # -- dispatching ------------------------------------------------------------------------
    def due_page(
        self, after: Cursor, before: Cursor, limit: int, lateness_s: float = 0.0, priority: bool = False
    ) -> list[bytes]:
        """Queue entries of the rows due at least `lateness_s` ago after the keyset cursor `after`
        and up to `before` ((due_ms, key) each; a None key: before, or after, every key). With a
        priority column: of the priority rows, or of the rest (queries.sql, `{class_filter}`)."""
        self.table  # noqa: B018 (the page prints keys as their kind spells them)
        rows = self.db.query(
            self.queries.due_page_priority if priority else self.queries.due_page,
            {
                "after_due": sql_datetime(after[0]),
                "after_id": after[1],
                "before_due": sql_datetime(before[0]),
                "before_id": before[1],
                "limit": limit,
                "lateness_us": round(lateness_s * 1_000_000),
            },
        )
        joined = rows[0][0] if rows else None
        if not joined:
            return []
        return (joined.encode() if isinstance(joined, str) else joined).split(b" ")

    # -- writing back (the statements; workers/writing/writeback.py runs them) -----------------
    def write_success(self, successes: Sequence[Row]) -> Statement:
        """Rows (key, due_ms, result[, after_us]) written as checked, fenced on their due time."""
        return self.queries.write_success, {"batch": batch_json(successes), **interval_params(self.workload)}

    def write_unchanged(self, successes: Sequence[Row]) -> Statement:
        """write_success of only the rows whose stored result is this text and that are not
        failing: the change feed has nothing to record of them (queries.sql)."""
        _, args = self.write_success(successes)
        return self.queries.write_unchanged, args

    def write_done(self, done: Sequence[Row]) -> Statement:
        """One-shot rows (key, due_ms, result) done, fenced: their due time cleared, or with
        `done = "delete"` the rows deleted."""
        if self.workload.done == "delete":
            return self.queries.delete_done, {"batch": batch_json((key, due_ms) for key, due_ms, *_ in done)}
        return self.queries.write_done, {
            "batch": batch_json((key, due_ms, result) for key, due_ms, result, *_ in done)
        }

    def write_failures(self, failures: Sequence[Row]) -> list[Statement]:
        """Rows (key, due_ms, error[, at_ms]) written as failed, then their retry scheduled (two statements:
        MySQL does not promise the order of a multi-table UPDATE's assignments); a one-shot row
        that failed max_attempts times is dead instead."""
        s = self.workload
        retry = {
            # A scheduled row's next tick travels last (key, due_ms, error, at_ms): see due_expressions.
            "batch": batch_json((key, due_ms, *tick) for key, due_ms, _, *tick in failures),
            "retry_base_ms": round(s.retry_base * 1000),
            "retry_max_ms": round(s.retry_max * 1000),
            "max_attempts": s.max_attempts,
            **interval_params(s),
        }
        backoff_only = lifecycle_of(s).failure_backoff_only
        schedule = self.queries.schedule_retry_once if backoff_only else self.queries.schedule_retry
        return [(self.queries.record_failure, {"batch": batch_json(failures)}), (schedule, retry)]

    def read_before_write(self, refs: Sequence[Row]) -> Statement:
        """For the change feed: rows (key, due_ms) as they are, locked, fenced like the writes;
        the statement answers (place in the batch from 1, result, fail count)."""
        return self.queries.changes_read, {"batch": batch_json(refs)}

    def read_after_write(self, refs: Sequence[Key]) -> Statement:
        """For the change feed: the stored results of these keys' rows after the write (inside
        the write's transaction); the statement answers (place in `refs` from 1, result)."""
        return self.queries.changes_after_write, {"batch": batch_json((ref,) for ref in refs)}

    def record_changes(self, records: Sequence[Row]) -> Statement:
        """The change feed's rows (key as text, old, new, old_failing, new_failing, error): one
        INSERT with a VALUES group per record."""
        head, group = self.queries.record_changes.rsplit("VALUES", 1)
        sql = head + "VALUES " + ", ".join([group.strip()] * len(records))
        return sql, [value for record in records for value in record]

    def lock_unlocked(self, refs: Sequence[Key]) -> Statement:
        """Lock the rows of these keys that nobody else holds (inside the caller's transaction);
        the statement returns their keys."""
        return self.queries.lock_unlocked, {"batch": batch_json((ref,) for ref in refs)}

    def check_rows(self, refs: Sequence[Key]) -> dict[Any, dict[str, Any]]:
        """key -> its row as the check gets it (column name -> value: the id column and `columns`),
        for the rows of these keys (one statement: as one string when every column's type
        allows, rowtext.py)."""
        args = {"keys": batch_json(refs)}  # bare keys: ["k1", "k2"]
        row_text = self.table.row_text
        if row_text is not None:
            (text, count), *_ = self.db.query(self.queries.check_rows_text, args)
            try:
                return parse_row_text(text, row_text, int(count))
            except (ValueError, ArithmeticError) as error:  # Decimal's errors are ArithmeticErrors
                # Values too big to spell, or a column whose type changed under this worker (its
                # types are read again for the next take): this take row by row, PyMySQL decoding.
                log.info("%sa take's rows did not read as one string (%s); read row by row",
                         self.workload.log_prefix, error)  # fmt: skip
                self._table = None
        names = (self.workload.id_column, *self.workload.read_columns)
        return {
            row[0]: dict(zip(names, row, strict=True)) for row in self.db.query(self.queries.check_rows, args)
        }

    def trace_contexts(self, refs: Sequence[Key]) -> dict[Any, str]:
        """key -> the trace context its producer stored (trace_column), for the rows of these keys
        that have one (one statement)."""
        found = self.db.query(self.queries.trace_rows, {"keys": batch_json(refs)})
        return {key: text.decode() if isinstance(text, bytes) else str(text) for key, text in found}

    def schedules(self, refs: Sequence[Key]) -> dict[int, tuple[str | None, str | None]]:
        """Place in `refs` (from 1) -> (schedule, time zone) as stored, for a scheduled workload's
        rows still there (None where the workload has no such column, or the row's is NULL)."""
        found = self.db.query(self.queries.schedule_rows, {"keys": batch_json(refs)})
        return {
            int(n): (schedule, zone)
            for schedule, zone, places in found  # GROUP_CONCAT's text: bytes where a server says binary
            for n in (places.decode() if isinstance(places, bytes) else places).split(",")
        }

    def probe_writable(self) -> None:
        """Raise DatabaseDown (or DatabaseRefused) unless MySQL takes writes right now."""
        self.db.execute(self.queries.writable)

    # -- recovery and operators' actions --------------------------------------------------------
    def quarantine(self, parked: Sequence[Row], reason: str) -> int:
        """Park rows (key, due_ms), fenced like a write-back; how many were parked."""
        return self.db.execute(self.queries.quarantine, {"batch": batch_json(parked), "reason": reason})

    def release(self, keys: Sequence[Key]) -> int:
        """Put quarantined rows back into rotation, due now; how many were quarantined."""
        return self.db.execute(self.queries.release, {"ids": tuple(keys)})

    # -- the application's actions: now, pause, resume ---------------------------------------------
    def key_states(self, keys: Sequence[Key]) -> dict[Any, KeyState]:
        """key as stored -> KeyState(paused, quarantined, dead), for the keys that exist."""
        if not keys:
            return {}
        rows = self.db.query(self.queries.key_states, {"ids": tuple(keys)})
        return {key: KeyState(bool(p), bool(q), bool(d), bool(n)) for key, p, q, d, n in rows}

    def retry(self, keys: Sequence[Key]) -> int:
        """Dead one-shot rows due now again, their failures forgotten; how many were dead."""
        return self.db.execute(self.queries.retry, {"ids": tuple(keys)}) if keys else 0

    def discard(self, keys: Sequence[Key]) -> int:
        """Dead one-shot rows taken as done (kept, never dispatched); how many were dead."""
        return self.db.execute(self.queries.discard, {"ids": tuple(keys)}) if keys else 0

    def ago(self, seconds: float) -> datetime:
        """The database clock `seconds` ago: a cutoff read once for a whole walk."""
        cutoff: datetime = self.db.scalar(self.queries.now_minus, {"us": round(seconds * 1e6)})
        return cutoff

    def dead_keys(
        self, after: Key | None, limit: int, error: str | None = None, before: datetime | None = None
    ) -> list[Key]:
        """The keys of up to `limit` dead rows after `after` (None: from the first), in key order,
        whose last error contains `error` and whose last attempt was before `before`."""
        found = self.db.query(
            self.queries.dead_chunk, {"after": after, "limit": limit, "error": error, "before": before}
        )
        return [row[0] for row in found]

    def enqueue(
        self, columns: Sequence[str], rows: Sequence[Sequence[Any]], key: str, delay_us: int
    ) -> list[Any]:
        """Client.enqueue's upsert (queries.sql: enqueue), one statement for all the rows; the
        keys (as stored) of the rows it wrote, found again by the unique column `key`."""
        names = [quote(column) for column in columns]
        written = "".join(f"{name} = VALUES({name}), " for name in names if name != quote(key))
        group = "(" + ", ".join(["%s"] * len(columns)) + ", NOW(3) + INTERVAL %s MICROSECOND)"
        sql = (
            self.queries.enqueue.replace("/*enqueue_columns*/", ", ".join(names))
            .replace("/*enqueue_values*/", ", ".join([group] * len(rows)))
            .replace("/*enqueue_set*/", written)
        )
        self.db.execute(sql, [value for row in rows for value in (*row, delay_us)])
        at = columns.index(key)
        found = self.db.query(
            self.queries.enqueued_keys.replace("/*enqueue_key*/", quote(key)),
            {"values": tuple(row[at] for row in rows)},
        )
        return [row[0] for row in found]

    def mark_now(self, keys: Sequence[Key]) -> int:
        """Due now (not paused or quarantined rows); how many rows that touched."""
        return self.db.execute(self.queries.mark_now, {"ids": tuple(keys)}) if keys else 0

    def pause(self, keys: Sequence[Key]) -> int:
        return self.db.execute(self.queries.pause, {"ids": tuple(keys)}) if keys else 0

    def cancel(self, keys: Sequence[Key]) -> int:
        """Cancelled rows marked as on_cancel says: paused, done (one-shot) or deleted."""
        if not keys:
            return 0
        q = self.queries
        sql = {"pause": q.pause, "done": q.cancel_done, "delete": q.cancel_delete}[self.workload.on_cancel]
        return self.db.execute(sql, {"ids": tuple(keys)})

    def resume(self, keys: Sequence[Key]) -> int:
        return self.db.execute(self.queries.resume, {"ids": tuple(keys)}) if keys else 0

    def due_entries(self, keys: Sequence[Key]) -> list[bytes]:
        """Queue entries of these keys' rows that are due now."""
        self.table  # noqa: B018 (entries print keys as their kind spells them)
        joined = self.db.scalar(self.queries.due_entries, {"ids": tuple(keys)}) if keys else None
        if not joined:
            return []
        return (joined.encode() if isinstance(joined, str) else joined).split(b" ")

    # -- the change feed ------------------------------------------------------------------------
    def changes_after(self, after: int, limit: int) -> list[Row]:
        """(pos, key, at, old, new, old_failing, new_failing, error) after position `after`."""
        return list(self.db.query(self.queries.changes_after, {"after": after, "limit": limit}))

    def changes_between(self, low: int, high: int) -> list[Row]:
        """The committed changes at positions low..high, as changes_after answers (never waits)."""
        return list(self.db.query(self.queries.changes_between, {"low": low, "high": high}))

    def changes_pending(self, low: int, high: int) -> bool:
        """Whether a transaction that has not committed yet holds a position in low..high (or
        the row just above it: InnoDB's range locking makes the answer conservative). Never
        waits for it."""
        try:
            self.db.query(self.queries.changes_pending, {"low": low, "high": high})
        except pymysql.err.OperationalError as error:
            if error_code(error) in LOCKED_NOWAIT:
                return True
            raise
        return False

    def changes_span(self) -> tuple[int, int]:
        """(oldest, newest) position kept; (0, 0) when the feed is empty."""
        oldest, newest = self.db.query(self.queries.changes_span)[0]
        return int(oldest), int(newest)

    def trim_changes(self, keep: int, chunk: int = 10_000) -> int:
        """Drop all but the newest `keep` positions of the feed; how many changes went."""
        upto = self.changes_span()[1] - keep
        dropped = 0
        while upto > 0:
            gone = self.db.execute(self.queries.changes_trim, {"upto": upto, "limit": chunk})
            dropped += gone
            if gone < chunk:
                break
        return dropped

    # -- what status, the dashboard and `inspect` read ------------------------------------------
    def one_row(self, key: Key) -> OneRow | None:
        """(due, checked, result, count, fails, error, now, late_s, due_ms, key as stored, group as
        its group list is named: None for a workload without groups)."""
        rows = self.db.query(self.queries.one_row, {"id": key})
        return OneRow(*rows[0]) if rows else None

    def freshness(self, cap: int) -> tuple[int, int, float, float]:
        """(due now, overdue by more than 1 s, database clock in Unix seconds, seconds the most
        overdue row is past its due time: 0 if nothing is due), each count exactly min(true
        count, cap), from one pass over the due index; one statement."""
        (due_now, overdue_1s, epoch, oldest), *_ = self.db.query(self.queries.freshness_counts, {"cap": cap})
        late = max(float(oldest), 0.0) if oldest is not None else 0.0
        return int(due_now), int(overdue_1s), float(epoch), late

    def overdue_rows(self, limit: int) -> list[tuple[int, int, int]]:
        """(due_ms, late_us, own interval_us) of the oldest rows overdue by more than 1 s."""
        args = {"limit": limit, **interval_params(self.workload)}
        return [
            (int(d), int(late), int(every))
            for d, late, every in self.db.query(self.queries.overdue_rows, args)
        ]

    def interval_range(self) -> tuple[float, float]:
        """The shortest and longest interval of any row, in seconds (a scan with an interval
        column; the workload's interval without one)."""
        if not self.workload.interval_column:
            return self.workload.interval, self.workload.interval
        low, high = self.db.query(self.queries.interval_range, interval_params(self.workload))[0]
        if low is None:  # an empty table
            return self.workload.interval, self.workload.interval
        return float(low) / 1e6, float(high) / 1e6

    def needed_rate(self) -> float:
        """Checks per second the table's rows ask for (a scan)."""
        return float(self.db.scalar(self.queries.needed_rate, interval_params(self.workload)))

    def count(self) -> int:
        return int(self.db.scalar(self.queries.count_rows))

    def slow_counts(self, cap: int) -> SlowCounts:
        """The rows, those never checked due more than their interval ahead (inserted from a
        session in another time zone, most likely) and those whose last check failed, both up
        to `cap`: one statement."""
        args = {"cap": cap, **interval_params(self.workload)}
        (rows, ahead, failing), *_ = self.db.query(self.queries.slow_counts, args)
        return SlowCounts(int(rows), int(ahead), int(failing))

    def group_limits(self) -> list[tuple[str, Any, Any, Any]]:
        """(group as the group lists name it, rate, room, weight) of the group limits table."""
        return [
            (str(name), rate, room, weight)
            for name, rate, room, weight in self.db.query(self.queries.group_limits)
        ]

    def counts(self, pending_cap: int = 0) -> RowCounts:
        """Rows quarantined, paused and dead, and (one-shot) still to do up to `pending_cap`
        (0: not counted); one statement."""
        (quarantined, paused, dead, pending), *_ = self.db.query(
            self.queries.row_counts, {"pending_cap": pending_cap}
        )
        return RowCounts(int(quarantined), int(paused), int(dead), int(pending))

    def dead(self, limit: int) -> list[Row]:
        """(key, failures, last error) of dead one-shot rows, the lowest keys first."""
        return list(self.db.query(self.queries.list_dead, {"limit": limit}))

    def count_pending(self, cap: int) -> int:
        """One-shot rows still to do (due now or later, not parked), up to `cap`."""
        return self.counts(pending_cap=cap).pending

    def trim_done(
        self, older_than_s: float, after: Key | None = None, chunk: int = 1000, most: int = 100_000
    ) -> tuple[int, Key | None]:
        """Delete done rows last attempted more than `older_than_s` ago, walking the done rows in
        key order from after `after`, `chunk` at a time, at most `most` of them per call; returns
        how many went and where the next call goes on (None: from the first again)."""
        before = self.ago(older_than_s)
        gone = walked = 0
        while walked < most:
            keys = [
                row[0] for row in self.db.query(self.queries.done_chunk, {"after": after, "limit": chunk})
            ]
            if not keys:
                return gone, None
            gone += self.db.execute(self.queries.trim_done_keys, {"ids": tuple(keys), "before": before})
            after, walked = keys[-1], walked + chunk
        return gone, after

    def adopt_pending(self, progress: Progress = None) -> int:
        """A queue table adopted by a one-shot workload: its rows not sorted yet (ADOPTING_DUE)
        due now where the `pending` condition names them, the others done, in chunks of keys;
        how many rows were set. Resumable: sorted rows are left alone."""
        total = self.count()
        after, done = None, 0
        while True:
            chunk = {"after": after, "limit": SPREAD_CHUNK}
            keys = [row[0] for row in self.db.query(self.queries.adopting_chunk, chunk)]
            if not keys:
                break
            done += self.db.execute(self.queries.adopt_pending, {"ids": tuple(keys)})
            after = keys[-1]
            if progress and total:
                progress(min(done, total), total)
        return done

    def check_pending(self) -> None:
        """Raises pymysql's error if MySQL refuses the `pending` condition on this table."""
        self.db.query(self.queries.pending_valid)

    def quarantined(self, limit: int) -> list[Row]:
        """(key, reason) of quarantined rows."""
        return list(self.db.query(self.queries.list_quarantined, {"limit": limit}))

    def count_failing(self, cap: int) -> int:
        return int(self.db.scalar(self.queries.count_failing, {"cap": cap}))

    def failing(self, limit: int) -> list[Row]:
        """(key, failures in a row, last error) of rows whose last check failed."""
        return list(self.db.query(self.queries.list_failing, {"limit": limit}))

    def count_stale(self, age_s: float) -> int:
        """Rows (not quarantined) not checked within the last `age_s` seconds: a full scan."""
        return int(self.db.scalar(self.queries.count_stale, {"age_us": round(age_s * 1_000_000)}))

    # -- demo rows and spreading due times ------------------------------------------------------
    def seed(
        self, rows: int, *, due_now: bool, truncate: bool, start_in_s: float, progress: Progress = None
    ) -> tuple[int, int]:
        """Insert `rows` rows after the highest id, due over one interval (or all now); returns
        (first id, last id)."""
        if truncate:
            self.db.execute(self.queries.truncate)
        first = int(self.db.scalar(self.queries.max_id)) + 1
        base = self.now() + timedelta(seconds=start_in_s)  # the database clock, read once
        spread_us = 0 if due_now else round(self.workload.interval * 1_000_000)
        done = 0
        while done < rows:
            count = min(SEED_CHUNK, rows - done)
            args = {"first": first + done, "base": base, "offset": done, "spread_us": spread_us}
            self.db.execute(self.queries.seed_rows, {**args, "total": rows, "count": count})
            done += count
            if progress:
                progress(done, rows)
        return first, first + rows - 1

    def spread(self, progress: Progress = None) -> int:
        """Spread every row's due time over one interval from now (each row's own, with an
        interval column), in short primary-key chunks; how many rows were updated."""
        total = self.count()
        after, done = None, 0
        while True:
            last = self.db.scalar(self.queries.spread_chunk_end, {"after": after, "limit": SPREAD_CHUNK})
            if last is None:
                break
            args = {"after": after, "last": last, **interval_params(self.workload)}
            done += self.db.execute(self.queries.spread_due, args)
            after = last
            if progress and total:
                progress(min(done, total), total)
        return done
