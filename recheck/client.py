"""The application's side of recheck: check rows now, pause and resume them, tell one row's
state, and follow what changed.

    from recheck import Client

    monitors = Client(workload="monitors")   # the same configuration as the commands
    monitors.now(["4f1c..."])                # the user just edited this monitor
    monitors.pause(ids); monitors.resume(ids)
    for change in monitors.changes(since=last_pos, follow=True):
        notify(change.id, change.old, change.new)

A Client holds one MySQL connection and one Redis client: use one per thread. Its actions
(recheck/shared/actions.py) change only recheck's due column, in MySQL (the source of truth: a
pause survives every restart and the loss of Redis), then tell the dispatcher through Redis so
that `now` takes effect within a poll, also for a row in flight (it is checked again right
after). With Redis away, the keyset cursor still finds rows made due now.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from recheck.shared.actions import Acted, Actions
from recheck.shared.config import ConfigError, Settings, Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.mysql.schema import SchemaProblem, feed_taken
from recheck.shared.redis.connection import REDIS_DOWN, connect_redis
from recheck.shared.redis.store import Store, open_store
from recheck.shared.views.rowstory import RowStory, row_story
from recheck.shared.workloads import read_workloads, select_workloads

GAP_RECHECK = 0.1  # seconds between looks while skipped positions are awaited
GAP_SETTLED = 1.0  # seconds between the two clean looks that let a skipped range go (see Gaps)
READ_CHUNK = 1000  # changes read per statement


@dataclass(frozen=True)
class Change:
    """One transition of a row's stored result (or between failing and succeeding)."""

    pos: int  # its position in the feed: resume after it with changes(since=pos)
    id: str  # the row's key as text (binary keys as hex)
    at: datetime  # the database time of the write-back that made it
    old: str | None
    new: str | None
    old_failing: bool
    new_failing: bool
    error: str | None  # the failure's message, when it started failing
    checkpoint: int  # resume from here (changes(since=checkpoint)) to miss nothing: see changes()

    def as_json(self) -> dict:
        return {"pos": self.pos, "id": self.id, "at": self.at.isoformat(sep=" ", timespec="milliseconds"),
                "old": self.old, "new": self.new, "old_failing": self.old_failing,
                "new_failing": self.new_failing, "error": self.error,
                "checkpoint": self.checkpoint}  # fmt: skip


class Client:
    def __init__(self, workload: str | None = None, *, settings: Settings | Workload | None = None):
        """workload: the workload's name (needed when the workloads file has several); settings:
        the environment to read (default: RECHECK_* variables, .env and the workloads file, as
        the commands read them), or a Workload itself."""
        if isinstance(settings, Workload) and workload in (None, settings.name):
            self.workload = settings
        else:
            chosen = select_workloads(read_workloads(settings or Settings()), workload)
            if len(chosen) > 1:
                names = ", ".join(w.name for w in chosen)
                raise ConfigError(f"there are several workloads ({names}): say which, Client(workload=NAME)")
            self.workload = chosen[0]
        self.db = Database(self.workload)
        self.rows = Rows(self.workload, self.db)
        self._store: Store | None = None
        self.actions = Actions(self.rows, lambda: self.store)

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(connect_redis(self.workload.deployment), self.workload)
        return self._store

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    # -- actions (recheck/shared/actions.py) ---------------------------------------------------
    def now(self, ids: Iterable) -> Acted:
        return self.actions.now(ids)

    def enqueue(self, rows: Sequence[Mapping[str, Any]], key: str, delay: float = 0.0) -> list:
        return self.actions.enqueue(rows, key, delay)

    def pause(self, ids: Iterable) -> Acted:
        return self.actions.pause(ids)

    def resume(self, ids: Iterable) -> Acted:
        return self.actions.resume(ids)

    def cancel(self, ids: Iterable) -> Acted:
        return self.actions.cancel(ids)

    def release(self, ids: Iterable) -> Acted:
        return self.actions.release(ids)

    def retry(self, ids: Iterable) -> Acted:
        return self.actions.retry(ids)

    def retry_dead(self, error: str | None = None, older_than: float | None = None) -> int:
        return self.actions.retry_dead(error, older_than)

    def discard_dead(self, error: str | None = None, older_than: float | None = None) -> int:
        return self.actions.discard_dead(error, older_than)

    now.__doc__, pause.__doc__ = Actions.now.__doc__, Actions.pause.__doc__
    resume.__doc__, release.__doc__ = Actions.resume.__doc__, Actions.release.__doc__
    retry.__doc__, enqueue.__doc__ = Actions.retry.__doc__, Actions.enqueue.__doc__
    cancel.__doc__ = Actions.cancel.__doc__
    retry_dead.__doc__, discard_dead.__doc__ = Actions.retry_dead.__doc__, Actions.discard_dead.__doc__

    def state(self, row_id) -> RowStory | None:
        """One row's story, as `recheck inspect` tells it (None: no such row): a typed record
        (`.state`, `.where`, `.due`, ...; `.as_json()` for the dict `inspect --json` prints;
        `["state"]` still reads a field)."""
        return row_story(self.workload, self.db, self.store, self.rows.keys, self.actions.key(row_id))

    # -- the change feed -------------------------------------------------------------------------
    def changes(self, since: int | None = 0, *, follow: bool = False, idle: float = 1.0) -> Iterator[Change]:
        """The workload's change feed (`changes = true`), oldest first, after position `since`
        (0: from the oldest kept; None: only what comes next). follow: keep waiting for more,
        woken at once by the workers (a Redis stream; with Redis away, every `idle` seconds).

        Positions grow, but two write-backs can commit out of order: a position below one
        already delivered may still appear. A skipped position is awaited for as long as a
        write-back that has not committed holds it, however long that is and however slowly
        this reader goes (then delivered: nothing is missed); it is let go only once MySQL says
        no transaction holds it, twice, GAP_SETTLED apart (a rolled back write-back, a trimmed
        change). To resume after a restart without missing anything, pass the last delivered
        `Change.checkpoint` as `since` (it stays below every position still awaited, so a change
        may come twice: `pos` tells)."""
        if not self.workload.changes:
            raise ConfigError(f"workload {self.workload.name!r} records no changes: set changes = true")
        taken = feed_taken(self.workload, self.db)
        if taken:
            raise SchemaProblem(taken)
        high = self.rows.changes_span()[1] if since is None else since  # the highest position read
        gaps = Gaps(self.rows)
        signal = self._last_signal() if follow else None
        while True:
            found = sorted(gaps.look(), key=lambda row: int(row[0]))
            for index, row in enumerate(found):  # late commits: the checkpoint stays below the rest
                yield self._change(row, gaps, high, found[index + 1 :])
            batch = self.rows.changes_after(high, READ_CHUNK)
            for row in batch:
                pos = int(row[0])
                gaps.skipped(high + 1, pos - 1)
                high = pos
                yield self._change(row, gaps, high)
            if len(batch) == READ_CHUNK:
                continue
            if not follow:
                # Done, but for skipped ranges that may still settle: wait for those (at most
                # GAP_SETTLED), not for a write-back still committing (its checkpoint says so).
                if not gaps or gaps.pending:
                    return
                time.sleep(GAP_RECHECK)
                continue
            signal = self._wait(signal, GAP_RECHECK if gaps else idle)

    def _change(self, row: tuple, gaps: Gaps, high: int, unsent: Sequence[tuple] = ()) -> Change:
        """The change of a feed row; its checkpoint stays below every position still awaited and
        every change found but not yet delivered (`unsent`)."""
        pos, key, at, old, new, old_failing, new_failing, error = row
        below = [gaps.lowest()] if gaps else []
        below += [int(other[0]) for other in unsent]
        checkpoint = min(below) - 1 if below else high
        return Change(int(pos), key, at, old, new, bool(old_failing), bool(new_failing), error, checkpoint)

    def _last_signal(self) -> str | None:
        try:
            return self.store.last_change_signal()
        except REDIS_DOWN:
            return None

    def _wait(self, signal: str | None, idle: float) -> str | None:
        """Until a worker signals new changes (or `idle` seconds pass)."""
        if signal is None:
            time.sleep(idle)
            return self._last_signal()
        try:
            return self.store.wait_for_changes(signal, idle)
        except REDIS_DOWN:
            time.sleep(idle)
            return None


class Gaps:
    """The ranges of positions a reader skipped, each awaited until MySQL says nothing can still
    appear in it. Every look first delivers what has committed there since (a plain read), then
    asks with a locking read that never waits whether a transaction still holds a position there
    (rows.changes_pending). A range goes after two such answers of "none", GAP_SETTLED apart:
    the second rules out a write-back whose INSERT had taken its positions but not yet written
    the rows (within one statement: microseconds). Time only counts between looks, so a reader
    that is slow to ask for the next change loses nothing."""

    def __init__(self, rows: Rows):
        self.rows = rows
        self.ranges: list[list] = []  # [low, high, when first seen clean (or None), positions delivered]
        self.pending = False  # whether the last look found a write-back still holding a position
        self.looked = 0.0  # when the last look was (a reader going through a backlog looks at most
        # every GAP_RECHECK, not after every READ_CHUNK changes)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def lowest(self) -> int:
        return min(low for low, *_ in self.ranges)

    def skipped(self, low: int, high: int) -> None:
        if low <= high:
            self.ranges.append([low, high, None, set()])

    def look(self) -> list[tuple]:
        """The changes that committed in a skipped range since the last look; ranges settled go."""
        if not self.ranges or time.monotonic() - self.looked < GAP_RECHECK:
            return []
        self.looked = time.monotonic()
        found = []
        self.pending = False
        for gap in list(self.ranges):
            low, high, clean_since, delivered = gap
            pending = self.rows.changes_pending(low, high)
            for row in self.rows.changes_between(low, high):
                if int(row[0]) not in delivered:
                    delivered.add(int(row[0]))
                    found.append(row)
            now = time.monotonic()
            if len(delivered) == high - low + 1:  # every position came: nothing left to await
                self.ranges.remove(gap)
            elif pending:
                gap[2] = None
                self.pending = True
            elif clean_since is None:
                gap[2] = now
            elif now - clean_since >= GAP_SETTLED:
                self.ranges.remove(gap)
        return found
