"""The application's actions on rows: check now, pause, resume, release.

Used by `recheck.Client`, the commands of the same names and the dashboard. Each changes only
recheck's due column, in MySQL (the source of truth: a pause survives every restart and the loss
of Redis), then asks the dispatcher through Redis to read the rows at once, so that `now` takes
effect within a poll, also for a row in flight (checked again right after: dispatch.lua). With
Redis away the keyset cursor finds rows made due now anyway (their due time is ahead of it).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recheck.shared.mysql.rows import Rows
from recheck.shared.policies.lifecycle import lifecycle_of
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.redis.store import Store

# What the command line and the dashboard offer.
ACTIONS = ("now", "pause", "resume", "release", "retry", "cancel")
BULK_CHUNK = 1_000  # rows per statement of a bulk retry, discard or enqueue
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,63}")  # a column Client.enqueue may name


@dataclass(frozen=True)
class Acted:
    """What an action did: the rows it applied to, the ids the table does not have, and the rows
    it left alone because of their state (`now`: paused, quarantined or dead; `pause`:
    quarantined; `resume`: not paused; `release`: not quarantined; `retry`: not dead). Rows as
    their keys are stored."""

    done: list
    missing: list
    skipped: list

    @property
    def ok(self) -> bool:
        return not self.missing


class Actions:
    def __init__(self, rows: Rows, store: Callable[[], Store]):
        """store: gives the workload's Store when an action needs Redis (opened lazily)."""
        self.rows = rows
        self.store = store

    def now(self, ids: Iterable) -> Acted:
        """Check these rows within a poll, even if due in an hour; a row in flight is checked
        again right after (the running check's write is fenced out); a done one-shot row is
        enqueued again. Paused, quarantined and dead rows are left alone."""
        found, missing = self._existing(ids)
        active = [key for key, s in found.items() if not (s.paused or s.quarantined or s.dead)]
        self.rows.mark_now(active)
        self._ask(active)
        return Acted(active, missing, left_alone(found, active))

    def enqueue(self, rows: Sequence[Mapping[str, Any]], key: str, delay: float = 0.0) -> list:
        """One-shot rows enqueued, unique by the column `key` (it needs a UNIQUE index, or is the
        primary key): a row no other holds is inserted; where one exists, it is enqueued again
        with these values: a done or dead row runs again, a pending one once (not once per
        enqueue: a queued entry is superseded), one running now once more (that next run may
        start before this one ends; this one's write is fenced out, and the next run reads the
        latest values), paused and quarantined ones stay so. delay:
        due that many seconds from now, and a pending row's due time pushed on to it (debounce:
        it runs once, `delay` after the last enqueue). Returns the rows' keys as stored."""
        if not lifecycle_of(self.rows.workload).one_shot:
            raise ValueError("enqueue is for one-shot workloads (once = true)")
        if delay < 0:
            raise ValueError(f"delay must be 0 or more seconds, not {delay!r}")
        if not rows:
            return []
        columns = list(rows[0])
        if key not in columns or any(list(row) != columns for row in rows):
            raise ValueError(f"every row must give the same columns, {key!r} among them")
        for column in columns:
            if not IDENTIFIER.fullmatch(column):
                raise ValueError(f"{column!r} is not a plain column name")
        keys: list = []
        for start in range(0, len(rows), BULK_CHUNK):
            chunk = [[row[column] for column in columns] for row in rows[start : start + BULK_CHUNK]]
            keys += self.rows.enqueue(columns, chunk, key, round(delay * 1_000_000))
        with contextlib.suppress(*REDIS_DOWN):  # the keyset cursor finds them anyway (fenced)
            store, encoded = self.store(), [self.rows.keys.encode(k) for k in keys]
            if delay:
                store.drop(encoded)  # a queued entry of the old due time never starts
            else:
                held = store.in_flight(encoded)  # queued or running
                if held:
                    store.ask(held)  # the new due time supersedes the queued or running one
        return keys

    def pause(self, ids: Iterable) -> Acted:
        """Never dispatched until resumed, and a row already queued is dropped by the take that
        reaches it: its check is not called. A check a worker has already taken or started runs
        on, its write fenced out. Costs nothing per poll and lives in MySQL (a parked due time),
        so it survives restarts and the loss of Redis (queued entries then run, fenced out).
        Quarantined rows stay so (release them)."""
        found, missing = self._existing(ids)
        pausable = [key for key, s in found.items() if not (s.quarantined or s.dead or s.done)]
        self.rows.pause(pausable)
        if pausable:  # after the pause: a dropped entry releases its id, and the row must not be due
            with contextlib.suppress(*REDIS_DOWN):
                self.store().drop([self.rows.keys.encode(key) for key in pausable])
        return Acted(pausable, missing, left_alone(found, pausable))

    def cancel(self, ids: Iterable) -> Acted:
        """Stop these rows: a queued one is never started (as `pause`), a per-row check running
        now is cancelled (its asyncio task; a plain function's thread runs on, its result
        dropped) within a fraction of a second, a batch check finishes its batch; whatever a
        check was doing, its write is fenced out. The rows become what on_cancel says: paused
        (the default: `resume` runs them again), done (one-shot rows) or deleted. Quarantined
        and dead rows are left alone, done ones too."""
        found, missing = self._existing(ids)
        stoppable = [key for key, s in found.items() if not (s.quarantined or s.dead or s.done)]
        self.rows.cancel(stoppable)
        if stoppable:  # after the rows changed: a check ending now is fenced out
            with contextlib.suppress(*REDIS_DOWN):
                store = self.store()
                held = store.drop([self.rows.keys.encode(key) for key in stoppable])  # queued: never started
                if held:
                    store.cancel(held)  # running: cancelled by the worker that runs it
        return Acted(stoppable, missing, left_alone(found, stoppable))

    def resume(self, ids: Iterable) -> Acted:
        """Paused rows due now."""
        found, missing = self._existing(ids)
        paused = [key for key, state in found.items() if state.paused]
        self.rows.resume(paused)
        self._ask(paused)
        return Acted(paused, missing, left_alone(found, paused))

    def release(self, ids: Iterable) -> Acted:
        """Quarantined rows back into rotation, due now (their reclaim counts start again)."""
        found, missing = self._existing(ids)
        quarantined = [key for key, state in found.items() if state.quarantined]
        self.rows.release(quarantined)
        if quarantined:
            with contextlib.suppress(*REDIS_DOWN):
                self.store().forget_reclaims([self.rows.keys.encode(key) for key in quarantined])
        self._ask(quarantined)
        return Acted(quarantined, missing, left_alone(found, quarantined))

    def retry(self, ids: Iterable) -> Acted:
        """Dead one-shot rows back in line, due now, with max_attempts more (their last error
        stays until the next attempt)."""
        found, missing = self._existing(ids)
        dead = [key for key, state in found.items() if state.dead]
        self.rows.retry(dead)
        self._ask(dead)
        return Acted(dead, missing, left_alone(found, dead))

    def retry_dead(
        self,
        error: str | None = None,
        older_than: float | None = None,
        progress: Callable[[int], object] | None = None,
    ) -> int:
        """Every dead row (whose last error contains `error`, last attempted more than `older_than`
        seconds ago) back in line, due now, in chunks of keys; how many. progress(count so far)."""
        return self._each_dead(self._retry_chunk, error, older_than, progress)

    def discard_dead(
        self,
        error: str | None = None,
        older_than: float | None = None,
        progress: Callable[[int], object] | None = None,
    ) -> int:
        """Every such dead row taken as done (kept, never dispatched, trimmed by keep_done)."""
        return self._each_dead(self.rows.discard, error, older_than, progress)

    def _retry_chunk(self, keys: list) -> int:
        count = self.rows.retry(keys)
        self._ask(keys)
        return count

    def _each_dead(self, act: Callable[[list], int], error, older_than, progress) -> int:
        """act(keys) on the dead rows matching, BULK_CHUNK keys at a time, each its own statement
        (short transactions, locking only those rows)."""
        after, count = None, 0
        before = None if older_than is None else self.rows.ago(older_than)  # one cutoff for the walk
        while True:
            keys = self.rows.dead_keys(after, BULK_CHUNK, error, before)
            if not keys:
                return count
            count += act(keys)
            after = keys[-1]
            if progress:
                progress(count)

    def key(self, row_id):
        """An id as the application holds it (int, str, bytes), or as text (a binary key in
        hex); ValueError for one the key column cannot hold."""
        return self.rows.keys.from_text(row_id) if isinstance(row_id, str) else row_id

    def _existing(self, ids: Iterable) -> tuple[dict, list]:
        """(key as stored -> (paused, quarantined), the ids the table does not have). Text ids
        are matched as the key column's collation matches them (MySQL answers)."""
        wanted = [self.key(row_id) for row_id in ids]
        found = self.rows.key_states(wanted)
        folded = {fold(key) for key in found}
        missing = [key for key in wanted if key not in found and fold(key) not in folded]
        return found, missing

    def _ask(self, keys: list) -> None:
        if keys:
            with contextlib.suppress(*REDIS_DOWN):  # the keyset cursor finds them anyway
                self.store().ask([self.rows.keys.encode(key) for key in keys])


def left_alone(found: dict, acted: list) -> list:
    """The rows found but not acted on, in the order found (a set: linear in the ids)."""
    done = set(acted)
    return [key for key in found if key not in done]


def fold(key):
    """A text key as a case-insensitive, pad-space collation compares it: a good enough guess to
    tell which ids were missing (the rows themselves are found by MySQL)."""
    return key.casefold().rstrip(" ") if isinstance(key, str) else key
