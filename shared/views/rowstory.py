"""One row's story, from MySQL and Redis together: `recheck inspect ID` and the dashboard's search.

"Why was user 4711 not checked?" The answer joins what MySQL says (due time and lateness on the
database clock, last check, result, counts, last error, quarantine) with where the id is right
now in Redis (queued at position N, held by worker W, set aside as a suspect, or not in flight:
waiting for its due time, or due and about to be dispatched) and how often it was reclaimed from
dead workers. Costs one primary-key read and a few Redis reads (a queue position is an LPOS):
for a person asking, never for a loop.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from recheck.shared.config import DEFAULT_WORKLOAD, Workload
from recheck.shared.core.entries import ms_to_datetime
from recheck.shared.core.keys import KeyKind
from recheck.shared.core.rowstates import RowState
from recheck.shared.core.rowstates import state_of as due_state
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.redis.store import Store
from recheck.shared.views.status import shown_key

# The command that checks a row again, by its state: (the story's field, the command).
AGAIN = {"quarantined": ("release", "release"), "paused": ("resume", "resume"), "dead": ("retry", "retry"),
         "done": ("enqueue", "now")}  # fmt: skip
ACTIONS = tuple(field for field, _ in AGAIN.values())


@dataclass(frozen=True)
class RowStory:
    """One row's story. Its JSON (`as_json()`: `recheck inspect --json`, the dashboard's search)
    has these fields in this order, the actions only when they apply. `story["state"]` still
    reads a field, as when Client.state returned a dict (before 2026-11-28)."""

    workload: str
    table: str  # database.table
    id: int | str  # the key as `recheck inspect` takes it (binary keys in hex)
    due: str  # the due time on the database clock, or "done"
    late_s: float | None  # seconds past due (negative: not due yet); None unless due
    checked: str | None  # the last attempt, successful or not
    result: Any
    check_count: int
    fail_count: int  # failures in a row
    last_error: str | None
    quarantined: bool
    paused: bool
    dead: bool
    done: bool
    reclaims: int  # times reclaimed from dead workers
    now: str  # the database's clock when read
    state: str = ""  # quarantined, paused, dead, done, quarantine, queued, suspect, in_flight, ...
    where: str = ""  # one line: where the row is and what happens next
    release: str | None = None  # the command that checks it again, if its state needs one
    resume: str | None = None
    retry: str | None = None
    enqueue: str | None = None

    def as_json(self) -> dict[str, Any]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {name: value for name, value in fields.items() if name not in ACTIONS or value is not None}

    def __getitem__(self, name: str) -> Any:
        if name not in self.as_json():
            raise KeyError(name)
        return getattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self.as_json()

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self.as_json() else default


def row_story(workload: Workload, db: Database, store: Store, keys: KeyKind, key) -> RowStory | None:
    """Everything about one row; None if the table has no such row."""
    row = Rows(workload, db).one_row(key)
    if row is None:
        return None
    due, checked, result, count, fails, error, now, late_s, due_ms, key, group = row  # the key as stored
    where = store.whereabouts(keys.encode(key), group.encode() if isinstance(group, str) else group)
    state = due_state(due)
    done = state is RowState.DONE  # a one-shot row done: its due time cleared
    paused = state in (RowState.PAUSED, RowState.ADOPTING)  # adopting: parked until init-db sorts it
    story = RowStory(
        workload=workload.name,
        table=f"{workload.mysql.database}.{workload.table}",
        id=shown_key(key),
        due="done" if done else str(due),
        late_s=None if state is not RowState.DUE else round(float(late_s), 3),
        checked=str(checked) if checked else None,
        result=result,
        check_count=int(count),
        fail_count=int(fails),
        last_error=error,
        quarantined=state is RowState.QUARANTINED,
        paused=paused,
        dead=state is RowState.DEAD,
        done=done,
        reclaims=where["reclaims"],
        now=str(now),
    )
    told, line = state_of(workload, story, where, int(due_ms or 0))
    named = f" --workload {workload.name}" if workload.name != DEFAULT_WORKLOAD else ""
    field, command = AGAIN.get(told, ("", ""))
    actions: dict[str, Any] = {field: f"recheck {command}{named} {story.id}"} if field else {}
    return dataclasses.replace(story, state=told, where=line, **actions)


def state_of(workload: Workload, story: RowStory, where: dict, due_ms: int) -> tuple[str, str]:
    """(state, one line saying where the row is and what happens next)."""
    if story.quarantined:
        reason = story.last_error or "no reason recorded"
        return "quarantined", reason if reason.startswith("quarantined") else f"quarantined: {reason}"
    if story.paused:
        return "paused", "paused: not checked until resumed (the application's pause, kept in MySQL)"
    if story.dead:
        failures = story.fail_count
        return (
            "dead",
            f"dead: failed {failures} time(s) in a row (max_attempts); kept, never run again until retried",
        )
    if story.done:
        return "done", "done: handled once, never dispatched again (`recheck now` enqueues it again)"
    in_flight = where["in_flight_due_ms"]
    if in_flight is not None:
        dispatched = f"dispatched for its due time {ms_to_datetime(in_flight)}"
        if in_flight != due_ms:
            dispatched += " (the row's due time has moved since: that write will be fenced out)"
        if where["set_aside_for_quarantine"]:
            return "quarantine", f"set aside for quarantine after killing workers; {dispatched}"
        if where["queue_position"] is not None:
            of = f"of {where['queue_depth']:,}"
            if where.get("priority_queue"):
                of = "in the priority list, taken first"
            return "queued", f"queued at position {where['queue_position']:,} {of}; {dispatched}"
        if where.get("group_position") is not None:
            first = ", a priority row: its group's taken first" if where.get("priority_queue") else ""
            return "queued", (
                f"queued in group {where['group']} at position {where['group_position']:,} of its "
                f"{where['group_depth']:,} ({where['group_state']}{first}); {dispatched}"
            )
        if where["suspect_group"]:
            return (
                "suspect",
                f"reclaimed from a dead worker, waiting to be checked in a small group; {dispatched}",
            )
        worker = where["worker"]
        if worker is not None:
            alive = "alive" if worker["alive"] else "heartbeat expired: the reclaimer gives it back"
            return "in_flight", f"in flight with worker {worker['id']} ({alive}); {dispatched}"
        return "in_flight", (
            f"in flight, but no queue or worker holds it (a lost delivery): released within "
            f"RECHECK_ORPHAN_AFTER ({workload.deployment.orphan_after:g} s) and swept; {dispatched}"
        )
    late = story.late_s or 0.0  # set: a row in any other state was answered above
    if late < 0:
        waiting = f"waiting for its due time, in {-late:.1f} s"
        if story.checked is None and -late > workload.interval:  # never checked, due far ahead
            waiting += (
                f", though it was never checked and its interval is {workload.interval:g} s: rows are due "
                "when inserted, so was it inserted from a session in another time zone? (`recheck config`)"
            )
        return "waiting", waiting
    if late <= workload.deployment.sweep_grace:
        return "due", f"due {late:.1f} s ago, about to be dispatched"
    return "overdue", (
        f"overdue by {late:.1f} s and not in flight: the sweep dispatches it within "
        f"{workload.deployment.sweep_interval:g} s (if this lasts, is a dispatcher leading this workload?)"
    )


def render_story(story: RowStory) -> str:
    """The text `recheck inspect` prints."""
    late = story.late_s
    lateness = "" if late is None else (f" (due in {-late:.1f} s)" if late < 0 else f" ({late:.1f} s late)")
    failed = story.fail_count
    lines = [
        f"{story.table} id {story.id!r}"
        + (f" (workload {story.workload})" if story.workload != DEFAULT_WORKLOAD else ""),
        f"  now            {story.where}",
        f"  next due       {story.due}{lateness}",
        f"  last attempt   {story.checked or 'never'}"
        + (f" (failed, {failed:,} in a row)" if failed else ""),
        f"  result         {story.result!r}" + (" (of the last successful check)" if failed else ""),
        f"  checks         {story.check_count:,} succeeded   failures in a row {failed:,}",
        f"  last error     {story.last_error or '-'}",
        f"  reclaimed      {story.reclaims} time(s) from dead workers",
    ]
    lines += [f"  to check it again: {getattr(story, field)}" for field in ACTIONS if getattr(story, field)]
    return "\n".join(lines)
