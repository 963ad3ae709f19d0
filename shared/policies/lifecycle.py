"""A row's lifecycle: recurring (checked again every interval) or one-shot (a job or outbox row,
handled once: done, or dead after max_attempts failures; docs/queue-tables.md).

Each decision the lifecycle makes for the rest of recheck is one named field, so the SQL, the
dispatcher, the write-back and the views ask it instead of testing `workload.once`.
"""

from __future__ import annotations

from dataclasses import dataclass

from recheck.shared.config import Workload


@dataclass(frozen=True)
class Lifecycle:
    one_shot: bool  # for what is reported as such (the recheck_one_shot metric)
    # A done row's due time is NULL: the due column is nullable and the due index skips done rows
    # (a recurring row is never done: its due column is NOT NULL).
    done_is_null: bool
    # A success is done, unless its check asked for a later run (Recheck(after=)); else it is due
    # again one interval (the row's own, or the workload's) after it was checked.
    success_done: bool
    # A failure waits its backoff alone (retry_base * 2^(failures - 1), at most retry_max) and is
    # dead after max_attempts; else it is due again at its interval (or sooner: retry = "backoff"),
    # never dead. The `retry` setting is read only when this is False.
    failure_backoff_only: bool
    # A dispatcher that has caught up looks back over the sweep's grace for rows committed late
    # (a producer's transaction that began before the page was read and inserted due rows behind
    # the cursor); recurring rows are found by the sweep at their next due time.
    looks_back: bool
    # Rows arrive as producers commit them: after a page that read some, the next poll comes
    # after busy_poll_interval, not poll_interval (more are likely on their way, and each waits
    # for that poll). Recurring rows come due on their schedule: poll_interval.
    follows_arrivals: bool
    # Freshness (rows not attempted within an interval) is what the summary judges; a one-shot
    # workload reports its pending and dead rows instead.
    has_rhythm: bool
    # init-db adopting an existing table sorts its rows into due and done by the workload's
    # `pending` condition (parked at ADOPTING_DUE until then); a recurring table's rows are all due.
    adopts_rows: bool

    def rhythm(self, interval_s: float) -> str:
        """How a start line says the rows' rhythm."""
        return f"interval {interval_s:g}s" if self.has_rhythm else "one-shot rows"


RECURRING = Lifecycle(
    one_shot=False,
    done_is_null=False,
    success_done=False,
    failure_backoff_only=False,
    looks_back=False,
    follows_arrivals=False,
    has_rhythm=True,
    adopts_rows=False,
)
ONE_SHOT = Lifecycle(
    one_shot=True,
    done_is_null=True,
    success_done=True,
    failure_backoff_only=True,
    looks_back=True,
    follows_arrivals=True,
    has_rhythm=False,
    adopts_rows=True,
)


def lifecycle_of(workload: Workload) -> Lifecycle:
    """The workload's lifecycle, as its settings chose it (`once`)."""
    return ONE_SHOT if workload.once else RECURRING


@dataclass(frozen=True)
class Rhythm:
    """How a row's next due time is set: an interval (the workload's or the row's own), one-shot,
    or a calendar schedule (docs/schedules.md)."""

    # The next due time is the schedule's next tick, which the worker computes and sends: no
    # jitter, and a failure waits for the tick (or its backoff if sooner, with retry = "backoff").
    calendar: bool
    # The schedule or time zone is a column of the row's, read with it.
    per_row: bool
    says: str  # as a start line, `status` and the dashboard say it


def rhythm_of(workload: Workload) -> Rhythm:
    """The workload's rhythm, as its settings chose it."""
    per_row = bool(workload.schedule_column or workload.time_zone_column)
    zone = f"time zone {workload.time_zone}"
    if workload.time_zone_column:
        zone = f"each row's time zone ({workload.time_zone_column}, else {workload.time_zone})"
    if workload.schedule:
        return Rhythm(True, per_row, f"schedule {workload.schedule!r} in {zone}")
    if workload.schedule_column:
        return Rhythm(True, per_row, f"each row's schedule ({workload.schedule_column}) in {zone}")
    return Rhythm(False, False, lifecycle_of(workload).rhythm(workload.interval))
