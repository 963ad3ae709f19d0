"""One row's story, from MySQL and Redis together: `recheck inspect ID` and the dashboard's search.

"Why was user 4711 not checked?" The answer joins what MySQL says (due time and lateness on the
database clock, last check, result, counts, last error, quarantine) with where the id is right
now in Redis (queued at position N, held by worker W, set aside as a suspect, or not in flight:
waiting for its due time, or due and about to be dispatched) and how often it was reclaimed from
dead workers. Costs one primary-key read and a few Redis reads (a queue position is an LPOS):
for a person asking, never for a loop.
"""

from __future__ import annotations

from recheck.shared.config import DEFAULT_WORKLOAD, Workload
from recheck.shared.core.entries import ms_to_datetime
from recheck.shared.core.keys import KeyKind
from recheck.shared.core.rowstates import RowState
from recheck.shared.core.rowstates import state_of as due_state
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.redis.store import Store
from recheck.shared.views.status import shown_key


def row_story(workload: Workload, db: Database, store: Store, keys: KeyKind, key) -> dict | None:
    """Everything about one row; None if the table has no such row."""
    row = Rows(workload, db).one_row(key)
    if row is None:
        return None
    due, checked, result, count, fails, error, now, late_s, due_ms, key, group = row  # the key as stored
    where = store.whereabouts(keys.encode(key), group.encode() if isinstance(group, str) else group)
    state = due_state(due)
    done = state is RowState.DONE  # a one-shot row done: its due time cleared
    quarantined = state is RowState.QUARANTINED
    dead = state is RowState.DEAD
    paused = state in (RowState.PAUSED, RowState.ADOPTING)  # adopting: parked until init-db sorts it
    story = {
        "workload": workload.name,
        "table": f"{workload.mysql.database}.{workload.table}",
        "id": shown_key(key),
        "due": "done" if done else str(due),
        "late_s": None if state is not RowState.DUE else round(float(late_s), 3),  # negative: not due yet
        "checked": str(checked) if checked else None,  # the last attempt, successful or not
        "result": result,
        "check_count": int(count),
        "fail_count": int(fails),
        "last_error": error,
        "quarantined": quarantined,
        "paused": paused,
        "dead": dead,
        "done": done,
        "reclaims": where["reclaims"],
        "now": str(now),
    }
    story["state"], story["where"] = state_of(workload, story, where, int(due_ms or 0))
    named = f" --workload {workload.name}" if workload.name != DEFAULT_WORKLOAD else ""
    if quarantined:
        story["release"] = f"recheck release{named} {story['id']}"
    if paused:
        story["resume"] = f"recheck resume{named} {story['id']}"
    if dead:
        story["retry"] = f"recheck retry{named} {story['id']}"
    if done:
        story["enqueue"] = f"recheck now{named} {story['id']}"
    return story


def state_of(workload: Workload, story: dict, where: dict, due_ms: int) -> tuple[str, str]:
    """(state, one line saying where the row is and what happens next)."""
    if story["quarantined"]:
        reason = story["last_error"] or "no reason recorded"
        return "quarantined", reason if reason.startswith("quarantined") else f"quarantined: {reason}"
    if story["paused"]:
        return "paused", "paused: not checked until resumed (the application's pause, kept in MySQL)"
    if story["dead"]:
        failures = story["fail_count"]
        return (
            "dead",
            f"dead: failed {failures} time(s) in a row (max_attempts); kept, never run again until retried",
        )
    if story["done"]:
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
    late = story["late_s"]
    if late < 0:
        waiting = f"waiting for its due time, in {-late:.1f} s"
        if story["checked"] is None and -late > workload.interval:  # never checked, due far ahead
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


def render_story(story: dict) -> str:
    """The text `recheck inspect` prints."""
    late = story["late_s"]
    lateness = "" if late is None else (f" (due in {-late:.1f} s)" if late < 0 else f" ({late:.1f} s late)")
    lines = [
        f"{story['table']} id {story['id']!r}"
        + (f" (workload {story['workload']})" if story["workload"] != DEFAULT_WORKLOAD else ""),
        f"  now            {story['where']}",
        f"  next due       {story['due']}{lateness}",
        f"  last attempt   {story['checked'] or 'never'}"
        + (f" (failed, {story['fail_count']:,} in a row)" if story["fail_count"] else ""),
        f"  result         {story['result']!r}"
        + (" (of the last successful check)" if story["fail_count"] else ""),
        f"  checks         {story['check_count']:,} succeeded   failures in a row {story['fail_count']:,}",
        f"  last error     {story['last_error'] or '-'}",
        f"  reclaimed      {story['reclaims']} time(s) from dead workers",
    ]
    for action in ("release", "resume", "retry", "enqueue"):
        if story.get(action):
            lines.append(f"  to check it again: {story[action]}")
    return "\n".join(lines)
