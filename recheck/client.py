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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from recheck.shared.actions import Acted, Actions
from recheck.shared.config import ConfigError, Settings, Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.redis.connection import REDIS_DOWN, connect_redis
from recheck.shared.redis.store import Store, open_store
from recheck.shared.views.rowstory import row_story
from recheck.shared.workloads import read_workloads, select_workloads

GAP_WAIT = 30.0  # seconds a reader looks for a skipped position (see changes())
GAP_RECHECK = 0.1  # seconds between looks while one is awaited
MAX_AWAITED = 10_000  # skipped positions looked for at most, below each one read
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

    def pause(self, ids: Iterable) -> Acted:
        return self.actions.pause(ids)

    def resume(self, ids: Iterable) -> Acted:
        return self.actions.resume(ids)

    def release(self, ids: Iterable) -> Acted:
        return self.actions.release(ids)

    now.__doc__, pause.__doc__ = Actions.now.__doc__, Actions.pause.__doc__
    resume.__doc__, release.__doc__ = Actions.resume.__doc__, Actions.release.__doc__

    def state(self, row_id) -> dict | None:
        """One row's story, as `recheck inspect` tells it (None: no such row)."""
        return row_story(self.workload, self.db, self.store, self.rows.keys, self.actions.key(row_id))

    # -- the change feed -------------------------------------------------------------------------
    def changes(self, since: int | None = 0, *, follow: bool = False, idle: float = 1.0) -> Iterator[Change]:
        """The workload's change feed (`changes = true`), oldest first, after position `since`
        (0: from the oldest kept; None: only what comes next). follow: keep waiting for more,
        woken at once by the workers (a Redis stream; with Redis away, every `idle` seconds).

        Positions grow, but two write-backs can commit out of order: a position below one
        already delivered may still appear for a moment. Such a skipped position is looked for
        again until it appears (then delivered: nothing is missed) or GAP_WAIT seconds pass
        (a rolled back write-back: nothing to miss). To resume after a restart without missing
        anything, pass the last delivered `Change.checkpoint` as `since` (it stays below any
        position still awaited, so a change may come twice: `pos` tells)."""
        if not self.workload.changes:
            raise ConfigError(f"workload {self.workload.name!r} records no changes: set changes = true")
        oldest, newest = self.rows.changes_span()
        trimmed = min(oldest - 1, newest - self.workload.changes_keep)  # gone for good, not awaited
        high = newest if since is None else max(since, trimmed)  # the highest position read
        awaited: dict[int, float] = {}  # skipped positions below `high` -> when first missed
        signal = self._last_signal() if follow else None
        while True:
            now = time.monotonic()
            for pos, missed_at in list(awaited.items()):
                if now - missed_at >= GAP_WAIT:
                    del awaited[pos]
            for row in self.rows.changes_at(sorted(awaited)[:READ_CHUNK]):
                del awaited[int(row[0])]
                yield self._change(row, awaited, high)
            batch = self.rows.changes_after(high, READ_CHUNK)
            for row in batch:
                pos = int(row[0])
                for skipped in range(max(high + 1, pos - MAX_AWAITED), pos):
                    awaited[skipped] = now
                high = pos
                yield self._change(row, awaited, high)
            if len(batch) == READ_CHUNK:
                continue
            if not follow:
                return
            signal = self._wait(signal, GAP_RECHECK if awaited else idle)

    def _change(self, row: tuple, awaited: dict, high: int) -> Change:
        pos, key, at, old, new, old_failing, new_failing, error = row
        checkpoint = min(awaited) - 1 if awaited else high
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
