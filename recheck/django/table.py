"""The tasks table and what its columns mean: the one place for its SQL and its encodings.

One row per enqueued task. The producer's INSERT (backend.py) names the task, its JSON arguments,
priority, queue and backend; the due column's default makes it due at once (or `run_after` is
its due time), in the enqueuing transaction. recheck runs the table as a one-shot workload
(SHAPE, DEFAULTS): a success is done (due column NULL) with the task's outcome in `result`, a failure
keeps its traceback in `last_error` and is retried up to MAX_ATTEMPTS, then dead.

The SQL runs on MySQL 8.0.13+ (an expression default) and MariaDB 10.2+. Pure: no I/O.
"""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from recheck.shared.core.rowstates import RowState, state_of
from recheck.shared.mysql.sql import LONG_TEXT_LIMIT  # characters of an outcome a write-back carries

TABLE = "recheck_task"

CREATE_TABLE = f"""
CREATE TABLE {TABLE} (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  task_path VARCHAR(255) NOT NULL COMMENT 'the task: module.function',
  args_kwargs LONGTEXT NOT NULL COMMENT 'JSON: {{"args": [...], "kwargs": {{...}}}}',
  priority SMALLINT NOT NULL DEFAULT 0 COMMENT 'the task''s priority, -100 to 100',
  urgent TINYINT NOT NULL DEFAULT 0 COMMENT 'priority > 0: taken first (recheck''s priority column)',
  queue_name VARCHAR(32) NOT NULL DEFAULT 'default',
  backend_name VARCHAR(32) NOT NULL DEFAULT 'default',
  enqueued_at DATETIME(6) NOT NULL COMMENT 'UTC',
  run_after DATETIME(6) NULL COMMENT 'UTC; NULL: at once',
  result MEDIUMTEXT NULL COMMENT 'recheck: the check''s result',
  checked_at DATETIME(3) NULL COMMENT 'recheck: when it was last checked',
  next_check_at DATETIME(3) NULL DEFAULT (UTC_TIMESTAMP(3)) COMMENT 'recheck: when it is next due',
  check_count INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'recheck: how many checks completed',
  fail_count INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'recheck: consecutive failures',
  last_error MEDIUMTEXT NULL COMMENT 'recheck: the last error',
  PRIMARY KEY (id),
  KEY recheck_due (next_check_at, id),
  KEY recheck_priority (urgent, next_check_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Django tasks, run by recheck'
"""
DROP_TABLE = f"DROP TABLE IF EXISTS {TABLE}"
# The request's trace context, stored with each task by the backend's INSERT when OpenTelemetry
# is installed and a span is current: the task's run joins the request's trace (docs/tracing.md).
ADD_TRACEPARENT = (
    f"ALTER TABLE {TABLE} ADD COLUMN traceparent VARCHAR(55) NULL"
    " COMMENT 'the enqueuing request''s W3C trace context (recheck''s trace_column)'"
)
DROP_TRACEPARENT = f"ALTER TABLE {TABLE} DROP COLUMN traceparent"

# The producer's INSERT: due at once (the column's default) or at run_after.
INSERT = (
    f"INSERT INTO {TABLE} (task_path, args_kwargs, priority, urgent, queue_name, backend_name, enqueued_at,"
    " traceparent) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
INSERT_DEFERRED = (
    f"INSERT INTO {TABLE} (task_path, args_kwargs, priority, urgent, queue_name, backend_name, enqueued_at,"
    " traceparent, run_after, next_check_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
SELECT_ONE = (
    "SELECT task_path, args_kwargs, priority, queue_name, backend_name, enqueued_at, run_after,"
    f" result, checked_at, next_check_at, fail_count, last_error FROM {TABLE} WHERE id = %s"
)

# What the worker reads with each task (RECHECK_COLUMNS): one statement per take.
COLUMNS = ("task_path", "args_kwargs", "priority", "queue_name", "backend_name", "enqueued_at", "run_after",
           "fail_count")  # fmt: skip

# The workload recheck runs the table as (RECHECK_* names). Its shape: fixed, whatever the
# environment or OPTIONS say.
SHAPE = {
    "TABLE": TABLE,
    "ID_COLUMN": "id",
    "RESULT_COLUMN": "result",
    "ONCE": "true",
    "CHECK": "recheck.django.worker:run",
    "CHECK_KIND": "row",
    "COLUMNS": ",".join(COLUMNS),
    "PRIORITY_COLUMN": "urgent",
    "TRACE_COLUMN": "traceparent",
}
# Its defaults: OPTIONS and RECHECK_* variables of the environment may change these.
DEFAULTS = {
    "WORKLOAD": "tasks",
    "MAX_ATTEMPTS": "1",  # Django's meaning: a task that raises is FAILED (OPTIONS MAX_ATTEMPTS retries)
    "WORKER_BATCH": "100",  # a take's outcomes, up to 64 KB each, in one statement under max_allowed_packet
    "CHECK_TIMEOUT": "600",
}


def urgent(priority: int) -> int:
    """recheck's two classes: tasks of a priority above the default (0) are taken first."""
    return 1 if priority > 0 else 0


def utc_naive(moment: datetime | None) -> datetime | None:
    """A time as the table stores it: UTC without a zone, milliseconds (the due column's precision)."""
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def aware(moment: datetime | None) -> datetime | None:
    """A stored UTC time as an aware datetime."""
    return None if moment is None else moment.replace(tzinfo=UTC)


def success_text(return_value: Any, started_at: datetime, worker_id: str, attempt: int) -> str:
    """A done task's outcome, as the result column keeps it (JSON). ValueError when it is longer
    than a write-back carries: the task fails saying so, never a clipped JSON."""
    text = json.dumps(
        {
            "return_value": return_value,
            "started_at": started_at.isoformat(),
            "worker_id": worker_id,
            "attempt": attempt,
        },
        separators=(",", ":"),
    )
    if len(text) > LONG_TEXT_LIMIT:
        raise ValueError(
            f"the task's return value is {len(text):,} characters as JSON; at most "
            f"{LONG_TEXT_LIMIT - 100:,} are kept: return less, or store it yourself"
        )
    return text


def error_text(class_path: str, message: str, traceback: str) -> str:
    """A failed attempt's error, as last_error keeps it: a first line "module.Class: message"
    (what `recheck status` and the dashboard show), then the traceback, its end kept if long."""
    head = f"{class_path}: {message}".split("\n", 1)[0] if message else class_path
    text = f"{head}\n{traceback}"
    if len(text) > LONG_TEXT_LIMIT:
        room = LONG_TEXT_LIMIT - len(head) - 6
        text = f"{head}\n...\n{traceback[-room:]}"
    return text


def parse_error(text: str) -> tuple[str, str]:
    """(exception class path, traceback) of a stored error; recheck's own errors ("TimeoutError:
    check did not finish within 600s", a quarantine reason) have a bare name and no traceback."""
    head, _, traceback = text.partition("\n")
    name = head.split(": ", 1)[0].strip() or "Exception"
    if "." not in name:
        known = isinstance(getattr(builtins, name, None), type)
        name = f"builtins.{name}" if known else "builtins.Exception"
    return name, traceback or head


@dataclass(frozen=True)
class Outcome:
    """What a row says of its task, in Django's terms (backend.get_result makes the TaskResult)."""

    status: str  # a TaskResultStatus value
    return_value: Any
    started_at: datetime | None
    finished_at: datetime | None
    last_attempted_at: datetime | None
    error: tuple[str, str] | None  # the last failure: (class path, traceback)
    worker_ids: list[str]  # one per attempt; only a success's is known


def outcome(result: str | None, checked_at: datetime | None, due: datetime | None, fail_count: int,
            last_error: str | None) -> Outcome:  # fmt: skip
    """A row's task in Django's terms. Done (due NULL): SUCCESSFUL; dead or quarantined: FAILED;
    any other state (due, in flight, paused, retrying after a failure): READY, since recheck
    claims nothing in MySQL (a running task reads READY until its write-back)."""
    state = state_of(due)
    error = parse_error(last_error) if last_error else None
    attempted = aware(checked_at)
    if state is RowState.DONE and result is not None and fail_count == 0:
        stored = json.loads(result)
        started = datetime.fromisoformat(stored["started_at"])
        attempts = int(stored.get("attempt", 1))
        workers = ["unknown"] * (attempts - 1) + [str(stored.get("worker_id", "unknown"))]
        return Outcome("SUCCESSFUL", stored.get("return_value"), started, attempted, attempted, None, workers)
    if state is RowState.DONE:  # taken as done by `recheck discard` (or by hand): it did not succeed
        return Outcome("FAILED", None, attempted, attempted, attempted, error, ["unknown"] * fail_count)
    finished = state in (RowState.DEAD, RowState.QUARANTINED)
    status = "FAILED" if finished else "READY"
    return Outcome(status, None, attempted, attempted if finished else None, attempted, error,
                   ["unknown"] * fail_count)  # fmt: skip
