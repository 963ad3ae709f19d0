"""Load a package's queries.sql and render it for the configured table and columns.

shared/queries.sql holds every statement the product runs; bench/queries.sql the benchmark's
own (read through the same code, so they are rendered and quoted alike).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

from recheck.shared.config import Workload
from recheck.shared.core.keys import INT_KEYS, KeyKind
from recheck.shared.core.rowstates import SQL_LITERALS
from recheck.shared.mysql.rowtext import AS_IS, HEX, TEXT, RowText
from recheck.shared.policies.lifecycle import lifecycle_of, rhythm_of
from recheck.shared.policies.ordering import ordering_of

_NAME_LINE = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def raw_queries(package: str = "recheck.shared.mysql") -> dict[str, str]:
    """name -> statement template, comments dropped."""
    text = resources.files(package).joinpath("queries.sql").read_text()
    parts = _NAME_LINE.split(text)
    queries = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("--")]
        queries[name] = "\n".join(lines)
    return queries


def quote(identifier: str) -> str:
    # Identifiers were validated by Workload (letters, digits, underscore), so backticks suffice.
    return f"`{identifier}`"


# Statements that carry a batch of keys need the id column's own type (schema.describe_table):
# without it they fail loudly instead of converting every key.
UNKNOWN_KEYS = "KEY_KIND_NOT_READ_FROM_THE_TABLE"


def row_interval_us(workload: Workload, alias: str = "t.") -> str:
    """The SQL for a row's interval in microseconds: the workload's interval, or the row's own
    interval column (NULL: the workload's), kept within [min_interval, max_interval].

    The column is clamped in seconds BEFORE any arithmetic, against DOUBLE parameters (PyMySQL
    writes floats as DOUBLE literals), so no value it can hold (a BIGINT "never" of 2^63 - 1, a
    DOUBLE of 1e308, a negative, NULL) can overflow and fail the write-back (MySQL error 1690)."""
    if not workload.interval_column:
        return "%(interval_us)s"
    row = f"{alias}{quote(workload.interval_column)}"
    clamped = f"LEAST(GREATEST(COALESCE({row}, %(interval_s)s), %(min_interval_s)s), %(max_interval_s)s)"
    return f"ROUND({clamped} * 1000000)"


# A jittered interval is shortened by one of this many steps of `jitter` (0, 1/7, ... 7/7 of it),
# not by any: a write-back's rows of one interval then land in the due index as 8 runs of one due
# time each, which InnoDB fills like sequences, where a share per row scattered them over the
# index's newest part (docs/performance.md: a drain about 6 % faster than with a share per row).
# Rows that came due together still spread, over 8 due times a write-back (a grid of
# jitter * interval / 7), blurred by each write-back's own NOW(3); a row's step changes every cycle.
JITTER_RUNS = 8
JITTER_SHIFT = 32 - (JITTER_RUNS.bit_length() - 1)  # the top bits of a CRC32 pick the step
assert 1 << (32 - JITTER_SHIFT) == JITTER_RUNS, "JITTER_RUNS must be a power of two"


def jitter_share(crc: int) -> float:
    """The share of `jitter` a row's interval is shortened by, from the CRC32 of its seed."""
    return (crc >> JITTER_SHIFT) / (JITTER_RUNS - 1)


def jittered_us(interval_us: str, seed: str) -> str:
    """An interval up to %(jitter)s of itself shorter, by a hash of `seed` (the row's key and the
    due time being written: another share every cycle, the same on a retried write; CRC32 is the
    same on MySQL and MariaDB, and a replica computes what the primary did), and never shorter
    than min_interval: rows that came due together spread out again by themselves. The share is
    jitter_share()'s, in SQL."""
    share = f"((CRC32({seed}) >> {JITTER_SHIFT}) / {JITTER_RUNS - 1})"  # integers: as jitter_share()
    return f"GREATEST(%(min_interval_us)s, ROUND(({interval_us}) * (1 - %(jitter)s * {share})))"


def interval_params(workload: Workload) -> dict[str, float | int]:
    """The parameters row_interval_us() and jittered_us() refer to."""
    return {
        "interval_us": round(workload.interval * 1_000_000),
        "interval_s": float(workload.interval),
        "min_interval_s": float(workload.min_interval),
        "max_interval_s": float(workload.max_interval),
        "min_interval_us": round(workload.min_interval * 1_000_000),
        "jitter": float(workload.jitter),
    }


TICK = "TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.at_ms * 1000 MICROSECOND"  # a scheduled row's next tick


def due_expressions(workload: Workload) -> dict[str, str]:
    """The write-backs' next due times: {next_due} after a success (now + the check's
    Recheck(after=), already clamped, or the row's interval), {retry_due} after a failure (the
    row's checked time + its interval, or with `retry = "backoff"` retry_base doubling with each
    failure in a row, at most retry_max and never later than the row's interval); {retry_due_us}
    a one-shot row's backoff in microseconds. A scheduled row's interval ends at its next tick,
    which the worker computes and sends ({tick_success}, {tick_failure}: v.at_ms)."""
    seed = "CONCAT(v.row_key, ':', v.due_ms)"
    calendar = rhythm_of(workload).calendar
    after_success = f"COALESCE(v.after_us, {row_interval_us(workload)})"
    after_failure = row_interval_us(workload)
    if workload.jitter and not calendar:  # jitter = 0: not even the hash per row
        after_failure = jittered_us(after_failure, seed)
        if workload.interval_column:  # else the worker sends each success's jittered interval
            after_success = jittered_us(after_success, seed)  # (writeback.NextDue): cheaper there
    backoff = "LEAST(%(retry_max_ms)s, %(retry_base_ms)s << LEAST(GREATEST(t.{fails}, 1) - 1, 40)) * 1000"
    if lifecycle_of(workload).failure_backoff_only:  # a job has no rhythm to keep: backoff alone
        after_failure = backoff
    elif workload.retry == "backoff" and not calendar:
        after_failure = f"LEAST({backoff}, {after_failure})"
    expressions = {
        "next_due": f"NOW(3) + INTERVAL {after_success} MICROSECOND",
        "retry_due": f"t.{{checked}} + INTERVAL {after_failure} MICROSECOND",
        "retry_due_us": after_failure,
        "tick_success": "",
        "tick_failure": "",
    }
    if calendar:
        expressions["next_due"] = f"IF(v.after_us IS NULL, {TICK}, NOW(3) + INTERVAL v.after_us MICROSECOND)"
        expressions["retry_due"] = TICK
        if workload.retry == "backoff":
            expressions["retry_due"] = f"LEAST(t.{{checked}} + INTERVAL {backoff} MICROSECOND, {TICK})"
        expressions["tick_success"] = ",\n        at_ms BIGINT PATH '$[4]'"
        expressions["tick_failure"] = ",\n        at_ms BIGINT PATH '$[2]'"
    return expressions


def schedule_columns(workload: Workload) -> str:
    """A scheduled workload's schedule and time zone columns, each NULL where the workload's own
    setting serves every row (schedule_rows)."""
    columns = (workload.schedule_column, workload.time_zone_column)
    return ", ".join(f"CAST(t.{quote(column)} AS CHAR)" if column else "NULL" for column in columns)


def feed_owner(workload: Workload) -> str:
    """Who a change feed's table belongs to (its comment says it): the deployment's key prefix and
    the workload's name. Two deployments on one table would read and trim each other's changes."""
    return f"{workload.deployment.key_prefix}/{workload.name}"


def due_default(workload: Workload) -> str:
    """The due column's default: now, on recheck's clock (RECHECK_DB_TIME_ZONE), whatever the time
    zone of the session that inserts the row. CURRENT_TIMESTAMP follows the inserting session's
    zone: a producer in a +02:00 session would store rows due two hours from now. An expression
    default (MySQL 8.0.13+, MariaDB 10.2+) does not. With the server's own zone (an empty
    RECHECK_DB_TIME_ZONE) recheck cannot name it: CURRENT_TIMESTAMP, and docs/application-api.md
    says to insert in that zone."""
    zone = workload.deployment.db_time_zone
    if zone in ("+00:00", "-00:00", "UTC"):
        return "(UTC_TIMESTAMP(3))"
    if zone:  # validated against a strict pattern by the settings
        return f"(CONVERT_TZ(UTC_TIMESTAMP(3), '+00:00', '{zone}'))"
    return "CURRENT_TIMESTAMP(3)"


def class_filter(workload: Workload, priority: bool) -> str:
    """The due page's condition on a row's class (docs/priorities.md): each row is read by one
    pass only, the priority pass's (priority column = 1) or the rest's (any other value, NULL
    included); nothing without a priority column."""
    column_name = ordering_of(workload).priority_by
    if not column_name:
        return ""
    column = quote(column_name)
    return f"AND {column} = 1" if priority else f"AND NOT ({column} <=> 1)"


def group_out(workload: Workload) -> str:
    """What ends a queue entry of a grouped workload (queries.sql `{group_out}`): ":" and the row's
    group column in hex (its bytes, whatever the type: the number 42 is "3432"), "NULL" for NULL
    (never hex); nothing without a group column."""
    if not ordering_of(workload).group_by:
        return ""
    return f", ':', {group_hex(workload)}"


def group_hex(workload: Workload) -> str:
    """A row's group as the group lists name it (the hex of its bytes, "NULL" for NULL); NULL
    without a group column."""
    column = ordering_of(workload).group_by
    if not column:
        return "NULL"
    return f"COALESCE(HEX(CAST({quote(column)} AS BINARY)), 'NULL')"


def check_text(row_text: RowText | None) -> str:
    """check_rows_text's JSON object of a row, as text: column name -> value for the id column and
    `columns`, each value spelled as rowtext.py decodes it (NULL as null)."""
    if row_text is None:
        return "NULL"
    # Spelled out with JSON_QUOTE rather than by the JSON functions: MariaDB 10.11 spent 0.6-1.0 us
    # more per row on JSON_ARRAY(...) than on the row-by-row read, 0.1-0.2 us on this (4,000-row
    # takes, when the rows were arrays).
    spelled = {AS_IS: "t.{}", HEX: """CONCAT('"', HEX(t.{}), '"')""", TEXT: "JSON_QUOTE(CAST(t.{} AS CHAR))"}
    # NULL spelled `null` only when the column is NULL: a value the server cannot spell (HEX or
    # JSON_QUOTE past max_allowed_packet give NULL) makes its row's object NULL, which
    # GROUP_CONCAT leaves out, and the count of rows tells the reader (rowtext.py). The keys are
    # identifiers (config.py), so their JSON needs no escaping inside an SQL literal.
    parts = [
        f"'{json.dumps(name)}:', IF(t.{quote(name)} IS NULL, 'null', {spelled[how].format(quote(name))})"
        for name, how in zip(row_text.names, row_text.spellings, strict=True)
    ]
    return "CONCAT('{', " + ", ',', ".join(parts) + ", '}')"


JSON_TEXT_LIMIT = 1024  # the VARCHAR size JSON_TABLE reads results and errors as (queries.sql)
# ... unless the column is a TEXT type (TEXT, MEDIUMTEXT, LONGTEXT): then up to this many
# characters travel (read as MEDIUMTEXT), e.g. a Django task's JSON return value and traceback.
# A write-back carries a batch of them in one statement: keep batch x this under max_allowed_packet.
LONG_TEXT_LIMIT = 65535


def json_text_type(limit: int | None) -> str:
    """How JSON_TABLE reads a batch's result or error text for a column holding `limit` characters
    (schema.describe_table; None: not a text column, or not read yet)."""
    return "MEDIUMTEXT" if limit is not None and limit > JSON_TEXT_LIMIT else f"VARCHAR({JSON_TEXT_LIMIT})"


class Queries:
    """Every statement of a package, ready to execute: ``Queries(workload).due_page``.

    keys: the id column's kind (shared/core/keys.py), for the statements that carry keys;
    row_text: how `check_rows_text` spells the check's columns (rowtext.py); text_limits: the
    characters the result and error columns hold (schema.Table), for the write-backs."""

    def __init__(
        self,
        workload: Workload,
        package: str = "recheck.shared.mysql",
        keys: KeyKind | None = None,
        row_text: RowText | None = None,
        text_limits: tuple[int | None, int | None] = (None, None),
    ):
        names = {
            "table": workload.table,
            "id": workload.id_column,
            "due": workload.due_column,
            "checked": workload.checked_column,
            "result": workload.result_column,
            "count": workload.count_column,
            "fails": workload.fail_column,
            "error": workload.error_column,
            "due_index": "recheck_due",
            "changes": workload.changes_table,
            "group_limits": workload.group_limits_table or "recheck_group_limits",
            "database": workload.mysql.database,
        }
        quoted = {key: quote(value) for key, value in names.items()}
        quoted["key_column"] = keys.key_column if keys else UNKNOWN_KEYS
        quoted["key_alone"] = keys.key_alone if keys else UNKNOWN_KEYS
        quoted["key_match"] = keys.key_match if keys else UNKNOWN_KEYS
        quoted["key_out"] = (keys or INT_KEYS).key_out.format(id=quoted["id"])
        quoted["row_interval_us"] = row_interval_us(workload, alias="")
        quoted["due_default"] = due_default(workload)
        quoted.update(SQL_LITERALS)  # the parked states' due times (shared/core/rowstates.py)
        # A one-shot workload's done rows have no due time.
        quoted["due_null"] = "NULL" if lifecycle_of(workload).done_is_null else "NOT NULL"
        # The operator's own SQL condition naming a queue table's pending rows (init-db): a literal
        # % must reach MySQL as one.
        quoted["pending"] = workload.pending.replace("%", "%%") or "TRUE"
        # Inside a string literal of a statement sent without arguments (create_changes_table).
        quoted["feed_owner"] = feed_owner(workload).replace("\\", "\\\\").replace("'", "''")
        quoted["check_columns"] = ", ".join(f"t.{quote(c)}" for c in workload.read_columns) or "NULL"
        quoted["check_text"] = check_text(row_text)
        quoted["trace"] = f"t.{quote(workload.trace_column)}" if workload.trace_column else "NULL"
        for name, expression in due_expressions(workload).items():
            quoted[name] = expression.replace("{fails}", quoted["fails"]).replace(
                "{checked}", quoted["checked"]
            )
        quoted["schedule_columns"] = schedule_columns(workload)
        for marker in ("enqueue_columns", "enqueue_values", "enqueue_set", "enqueue_key"):
            quoted[marker] = f"/*{marker}*/"  # per call: Rows.enqueue fills them in
        quoted["class_filter"] = class_filter(workload, priority=False)
        quoted["group_out"] = group_out(workload)
        quoted["group_hex"] = group_hex(workload)
        quoted["unchanged_only"] = ""
        quoted["result_text"], quoted["error_text"] = (json_text_type(limit) for limit in text_limits)
        raw = raw_queries(package)
        self._rendered = {name: sql.format_map(quoted) for name, sql in raw.items()}
        if "write_success" in raw:  # the change feed's first write: the rows it has nothing to record of
            quoted["unchanged_only"] = (
                f"AND t.{quoted['fails']} = 0"
                f" AND CAST(CAST(t.{quoted['result']} AS CHAR) AS BINARY) <=> CAST(v.result AS BINARY)"
            )
            self._rendered["write_unchanged"] = raw["write_success"].format_map(quoted)
        if "due_page" in raw:  # the priority pass's page and sweep probe: the same, of the priority rows only
            quoted["class_filter"] = class_filter(workload, priority=True)
            self._rendered["due_page_priority"] = raw["due_page"].format_map(quoted)
            self._rendered["overdue_probe_priority"] = raw["overdue_probe"].format_map(quoted)

    def __getattr__(self, name: str) -> str:
        try:
            return self._rendered[name]
        except KeyError:
            raise AttributeError(f"no query named {name!r} in queries.sql") from None
