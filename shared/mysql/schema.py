"""What recheck needs of its table, read from information_schema: the roles' start-up check,
the write-back's column facts, and the plan `recheck init-db` (recheck/initdb.py) carries out.

recheck never takes over an application's column silently: a column named like one of recheck's
that recheck did not add (its comment says so) is refused unless adopted explicitly.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from recheck.shared.config import ConfigError, Workload
from recheck.shared.core.keys import MAX_KEY_BYTES, MAX_KEY_CHARS, BinaryKeys, IntKeys, KeyKind, TextKeys
from recheck.shared.core.rowstates import PARKED_AT, RowState, sql_text
from recheck.shared.errors import RecheckError
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rowtext import RowText, plan_row_text
from recheck.shared.mysql.sql import JSON_TEXT_LIMIT, LONG_TEXT_LIMIT, Queries, due_default, feed_owner, quote
from recheck.shared.policies.lifecycle import lifecycle_of
from recheck.shared.policies.ordering import ordering_of

INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
TEXT_KEY_TYPES = {"char", "varchar"}
BINARY_KEY_TYPES = {"binary", "varbinary"}
NUMBER_TYPES = INTEGER_TYPES | {"decimal", "numeric", "float", "double", "real"}
TIME_TYPES = {"datetime", "timestamp"}
CHARACTER_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
GROUP_TYPES = INTEGER_TYPES | TEXT_KEY_TYPES | BINARY_KEY_TYPES | {"enum"}  # a name, not a document
DUE_PRECISION = 3  # due times travel as milliseconds: a finer column could never match its fence
LONG_TEXT_TYPES = {"tinytext", "text", "mediumtext", "longtext"}
SCHEDULE_TYPES = (
    TEXT_KEY_TYPES | BINARY_KEY_TYPES | LONG_TEXT_TYPES | {"enum"}
)  # a cron expression, a zone name
# A one-shot workload adopting an existing table: its due column is added with this default, so
# that existing rows (and rows producers insert meanwhile) are neither due nor done until init-db
# has sorted them by `pending` and set the real default; an adoption cut short, or an ALTER
# applied by hand, runs no finished job (a parked state: shared/core/rowstates.py).
ADOPTING_DUE = sql_text(PARKED_AT[RowState.ADOPTING])
COLUMN_MARK = "recheck:"  # the comment of every column init-db adds
TABLE_MARK = "made by recheck init-db"  # the comment of a table init-db created


@dataclass(frozen=True)
class Column:
    data_type: str  # lower case: bigint, varchar, datetime, ...
    max_length: int | None
    nullable: bool
    column_type: str  # the full type, e.g. "bigint(20) unsigned"
    precision: int | None  # fractional seconds digits of a DATETIME or TIMESTAMP
    comment: str = ""
    charset: str | None = None  # of a text column
    collation: str | None = None
    default: str | None = None  # as information_schema spells it: 'current_timestamp(3)', 'utc_timestamp(3)'

    @property
    def made_by_recheck(self) -> bool:
        return self.comment.startswith(COLUMN_MARK)


@dataclass(frozen=True)
class Table:
    """What the write-back needs to know about the table, read once at start."""

    keys: KeyKind  # how the id column's keys travel (entries, JSON batches, SQL)
    result_limit: int | None  # characters the result column holds (None: not a text column)
    error_limit: int | None
    row_text: RowText | None = None  # how the check's `columns` are read as one string (None: row by row)


def read_columns(workload: Workload, db: Database) -> dict[str, Column]:
    """Column name (lower case) -> Column; empty if the table does not exist."""
    rows = db.query(Queries(workload).table_columns, {"table": workload.table})
    return {
        name.lower(): Column(data_type.lower(), int(length) if length else None, nullable == "YES",
                             column_type.lower(), None if precision is None else int(precision),
                             comment or "", charset, collation, default)
        for name, data_type, length, nullable, column_type, precision, comment, charset, collation, default
        in rows
    }  # fmt: skip


def describe_table(workload: Workload, db: Database) -> Table:
    columns = read_columns(workload, db)

    def text_limit(name: str) -> int | None:
        column = columns.get(name.lower())
        if column is None:
            return JSON_TEXT_LIMIT
        if column.data_type in CHARACTER_TYPES and column.max_length:
            most = LONG_TEXT_LIMIT if column.data_type in LONG_TEXT_TYPES else JSON_TEXT_LIMIT
            return min(column.max_length, most)
        return None  # not text: the column decides what it accepts (a refusal fails that row)

    return Table(
        keys=key_kind(columns.get(workload.id_column.lower())),
        result_limit=text_limit(workload.result_column),
        error_limit=text_limit(workload.error_column),
        row_text=plan_row_text(
            {name: (column.data_type, column.column_type) for name, column in columns.items()},
            (workload.id_column, *workload.read_columns),
        )
        if workload.columns
        else None,
    )


def key_kind(column: Column | None) -> KeyKind:
    """How keys of this id column travel; raises SchemaProblem for a type recheck cannot key on."""
    if column is None or column.data_type in INTEGER_TYPES:
        return IntKeys(unsigned=column is None or "unsigned" in column.column_type)
    if column.data_type in TEXT_KEY_TYPES and (column.max_length or 0) <= MAX_KEY_CHARS:
        charset, collation = column.charset or "utf8mb4", column.collation or "utf8mb4_bin"
        return TextKeys(charset, collation, column.max_length or 1)
    if column.data_type in BINARY_KEY_TYPES and (column.max_length or 0) <= MAX_KEY_BYTES:
        return BinaryKeys(column.max_length or 1)
    raise SchemaProblem(
        f"id column is {column.column_type}; recheck keys on an integer, a CHAR/VARCHAR of up to "
        f"{MAX_KEY_CHARS} characters or a BINARY/VARBINARY of up to {MAX_KEY_BYTES} bytes"
    )


class SchemaProblem(RecheckError):
    """The table cannot be used as configured; the message says what to do."""


@dataclass
class TablePlan:
    exists: bool
    fatal: list[str] = field(default_factory=list)  # problems recheck cannot fix by itself
    changes: list[str] = field(default_factory=list)  # ALTER TABLE clauses recheck cannot run without
    advised: list[str] = field(default_factory=list)  # ALTER TABLE clauses it runs without, but worse
    adds_due: bool = False  # the due column is among the changes: every row will get one due time
    # A one-shot workload's adoption of an existing table is not finished: rows (or the due
    # column's default) still at ADOPTING_DUE, to be sorted by `pending` (init-db --apply).
    adopting: bool = False

    @property
    def clauses(self) -> list[str]:
        return self.changes + self.advised

    def alter_statement(self, workload: Workload) -> str:
        return f"ALTER TABLE {quote(workload.table)}\n  " + ",\n  ".join(self.clauses)


ROLE_SETTINGS = {  # recheck's columns, each with the setting that names it
    "result_column": "the check's result",
    "checked_column": "when it was last checked",
    "due_column": "when it is next due",
    "count_column": "how many checks completed",
    "fail_column": "consecutive failures",
    "error_column": "the last error",
}


def column_definitions(workload: Workload, adopting: bool = False) -> dict[str, str]:
    """What init-db adds for each column recheck writes, if the table lacks it. adopting: to a
    one-shot workload's existing table, whose rows are neither due nor done until init-db has
    sorted them by `pending` (ADOPTING_DUE)."""
    nullable = "NULL" if lifecycle_of(workload).done_is_null else "NOT NULL"  # NULL: a done row's due time
    # Existing rows become due at once; rows the application inserts later too, whatever the
    # inserting session's time zone (due_default()). Adopted job tables: see ADOPTING_DUE.
    default = f"'{ADOPTING_DUE}'" if adopting else due_default(workload)
    return {
        workload.result_column: "VARCHAR(255) NULL",
        workload.checked_column: "DATETIME(3) NULL",
        workload.due_column: f"DATETIME(3) {nullable} DEFAULT {default}",
        workload.count_column: "INT UNSIGNED NOT NULL DEFAULT 0",
        workload.fail_column: "INT UNSIGNED NOT NULL DEFAULT 0",
        workload.error_column: "VARCHAR(255) NULL",
    }


SESSION_CLOCKS = ("current_timestamp", "now(", "localtime", "sysdate")  # defaults in the session's zone


def follows_session_zone(column: Column) -> bool:
    """A DATETIME whose default is the inserting session's local time (TIMESTAMP columns store
    the instant itself and are read back in recheck's zone: they are right in every zone)."""
    default = (column.default or "").lower()
    return column.data_type == "datetime" and default.startswith(SESSION_CLOCKS)


def added_column(workload: Workload, name: str, adopting: bool = False) -> str:
    """The ADD COLUMN clause for one of recheck's columns, marked as recheck's by its comment."""
    role = next(r for r in ROLE_SETTINGS if getattr(workload, r) == name)
    comment = f"{COLUMN_MARK} {ROLE_SETTINGS[role]}".replace("'", "''")  # a fixed text, quoted for SQL
    return f"ADD COLUMN {quote(name)} {column_definitions(workload, adopting)[name]} COMMENT '{comment}'"


def adoption_default(workload: Workload) -> str:
    """The clause that ends an adoption: rows inserted from then on are due when inserted."""
    return f"ALTER COLUMN {quote(workload.due_column)} SET DEFAULT {due_default(workload)}"


def foreign_columns(workload: Workload, columns: dict[str, Column], adopt: tuple[str, ...]) -> list[str]:
    """Columns named like recheck's that recheck did not add and nobody adopted: refused.

    A table that already has every one of recheck's columns was prepared before (by an earlier
    recheck, which marked nothing, or by hand) and is taken as it is."""
    names = [getattr(workload, role) for role in ROLE_SETTINGS]
    present = [name for name in names if name.lower() in columns]
    if len(present) == len(names):
        return []
    adopted = {name.lower() for name in adopt}
    return [
        name for name in present
        if not columns[name.lower()].made_by_recheck and name.lower() not in adopted
    ]  # fmt: skip


def inspect_table(workload: Workload, db: Database, adopt: tuple[str, ...] = ()) -> TablePlan:
    """What the table lacks (or has that recheck cannot use); adopt: existing columns the user
    allows recheck to write (`init-db --adopt`)."""
    queries = Queries(workload)
    columns = read_columns(workload, db)
    if not columns:
        return TablePlan(exists=False)
    plan = TablePlan(exists=True)
    for name in foreign_columns(workload, columns, adopt):
        role = next(r for r in ROLE_SETTINGS if getattr(workload, r) == name)
        plan.fatal.append(
            f"already has a column {name!r} that recheck did not add; recheck would overwrite it with "
            f"{ROLE_SETTINGS[role]}. Give recheck a column of its own (RECHECK_{role.upper()}="
            f"recheck_{name}), or, if {name!r} is meant for recheck, `recheck init-db --adopt {name}`"
        )
    id_column, due_column = workload.id_column.lower(), workload.due_column.lower()
    id_type = columns[id_column].data_type if id_column in columns else None
    if id_type is None:
        plan.fatal.append(f"has no id column {workload.id_column!r} (set RECHECK_ID_COLUMN)")
    else:
        try:
            key_kind(columns[id_column])
        except SchemaProblem as problem:
            plan.fatal.append(f"{workload.id_column!r}: {problem}")
    plan.fatal += typed_column_problems(
        columns, "interval", workload.interval_column, NUMBER_TYPES, "it must hold seconds as a number"
    )
    for role, name in (
        ("schedule", workload.schedule_column),
        ("time_zone", workload.time_zone_column),
        ("trace", workload.trace_column),  # a W3C traceparent (docs/tracing.md)
    ):
        plan.fatal += typed_column_problems(
            columns, role, name, SCHEDULE_TYPES, "it must hold text (CHAR, VARCHAR)"
        )
    ordering, lifecycle = ordering_of(workload), lifecycle_of(workload)
    plan.fatal += typed_column_problems(
        columns, "priority", ordering.priority_by, INTEGER_TYPES,
        "it must be an integer (1 marks a priority row), e.g. BOOLEAN",
    )  # fmt: skip
    plan.fatal += typed_column_problems(
        columns, "group", ordering.group_by, GROUP_TYPES,
        "it must name a group: an integer or a short string (CHAR, VARCHAR, BINARY, ENUM)",
    )  # fmt: skip
    due = columns.get(due_column)
    if due is not None:
        plan.fatal += due_column_problems(workload, due)
        if lifecycle.adopts_rows and ADOPTING_DUE in (due.default or ""):  # added, never sorted
            plan.adopting = True
            plan.changes.append(adoption_default(workload))
        elif follows_session_zone(due) and due_default(workload) != "CURRENT_TIMESTAMP(3)":
            plan.advised.append(
                f"ALTER COLUMN {quote(workload.due_column)} SET DEFAULT {due_default(workload)}"
            )
    for column in column_definitions(workload):
        if column.lower() not in columns:
            plan.changes.append(added_column(workload, column, adopting=lifecycle.adopts_rows))
            plan.adds_due = plan.adds_due or column == workload.due_column
    plan.adopting = plan.adopting or (lifecycle.adopts_rows and plan.adds_due)

    indexes: dict[str, tuple[bool, list[str]]] = {}
    for index_name, non_unique, _, column_name in db.query(queries.table_indexes, {"table": workload.table}):
        indexes.setdefault(index_name, (not int(non_unique), []))[1].append(column_name.lower())
    primary = indexes.get("PRIMARY", (True, []))[1]
    if not primary:
        plan.fatal.append("has no primary key; recheck needs a single-column primary key to key its rows on")
    elif len(primary) > 1:
        plan.fatal.append(
            f"has a composite primary key ({', '.join(primary)}); recheck needs a single-column primary key"
        )
    elif id_type is not None and primary != [id_column]:
        plan.fatal.append(
            f"id column {workload.id_column!r} is not the primary key; set RECHECK_ID_COLUMN={primary[0]}"
        )
    # InnoDB appends the primary key to every secondary index, so (due) alone acts as (due, id)
    # when id is the primary key.
    has_due_index = any(
        names[:2] == [due_column, id_column] or (names == [due_column] and primary == [id_column])
        for _, names in indexes.values()
    )
    if has_due_index and due is not None and lifecycle.adopts_rows and not plan.adopting:
        # The default was set, but rows are still parked (an adoption cut short after that).
        plan.adopting = db.scalar(queries.adopting_any) is not None
    if not has_due_index:
        plan.changes.append(
            f"ADD KEY `recheck_due` ({quote(workload.due_column)}, {quote(workload.id_column)})"
        )
    if ordering.priority_by and not has_priority_index(workload, indexes, primary):
        plan.changes.append(
            f"ADD KEY `recheck_priority` ({quote(ordering.priority_by)}, "
            f"{quote(workload.due_column)}, {quote(workload.id_column)})"
        )
    return plan


def has_priority_index(
    workload: Workload, indexes: dict[str, tuple[bool, list[str]]], primary: list[str]
) -> bool:
    """An index the priority pass walks in (due, id) order among the rows whose priority column
    is 1: (priority, due, id), or (priority, due) with id the primary key (InnoDB appends it)."""
    priority, due, id_column = (
        ordering_of(workload).priority_by.lower(), workload.due_column.lower(), workload.id_column.lower()
    )  # fmt: skip
    return any(
        names[:3] == [priority, due, id_column] or (names == [priority, due] and primary == [id_column])
        for _, names in indexes.values()
    )


def typed_column_problems(
    columns: dict[str, Column], role: str, name: str, types: set[str], rule: str
) -> list[str]:
    """What is wrong with an optional column of the application's that recheck reads (the
    `interval_column`, the `priority_column`, the `group_column`): missing, or of a type it cannot
    use."""
    if not name:
        return []
    column = columns.get(name.lower())
    if column is None:
        return [f"has no {role} column {name!r} ({role}_column)"]
    if column.data_type not in types:
        return [f"{role} column {name!r} is {column.column_type}; {rule}"]
    return []


def due_column_problems(workload: Workload, due: Column) -> list[str]:
    """A due column recheck cannot fence on exactly, or whose rows it would never see."""
    fix = (
        f"; fix it with ALTER TABLE {quote(workload.table)} MODIFY COLUMN {quote(workload.due_column)} "
        f"{column_definitions(workload)[workload.due_column]}"
    )
    if due.data_type not in TIME_TYPES:
        return [f"due column {workload.due_column!r} is {due.data_type}; it must be DATETIME(3){fix}"]
    problems = []
    if (due.precision or 0) > DUE_PRECISION:
        problems.append(
            f"due column {workload.due_column!r} is {due.column_type.upper()}: recheck fences write-backs "
            f"on millisecond due times, so a row with a finer due time would never be written{fix}"
        )
    done_is_null = lifecycle_of(workload).done_is_null
    if due.nullable and not done_is_null:
        problems.append(
            f"due column {workload.due_column!r} allows NULL: a row with a NULL due time is never due{fix}"
        )
    if done_is_null and not due.nullable:
        problems.append(
            f"due column {workload.due_column!r} is NOT NULL, but a one-shot workload (once = true) "
            f"marks a done row by clearing it{fix}"
        )
    return problems


def changes_table_missing(workload: Workload, db: Database) -> bool:
    """A workload with `changes = true` whose database lacks its change feed's table."""
    if not workload.changes:
        return False
    return not int(db.scalar(Queries(workload).table_exists, {"table": workload.changes_table}))


def group_limits_table_missing(workload: Workload, db: Database) -> bool:
    """A workload with a group_limits_table that its database lacks."""
    if not workload.group_limits_table:
        return False
    return not int(db.scalar(Queries(workload).table_exists, {"table": workload.group_limits_table}))


def create_group_limits_table(workload: Workload, db: Database) -> None:
    db.execute(Queries(workload).create_group_limits)


def feed_taken(workload: Workload, db: Database) -> str | None:
    """Why this workload cannot use its change feed's table: another deployment made it (its key
    prefix or workload differs), so the two would deliver and trim each other's changes. None if
    it is this one's, does not exist, or was made before feeds named their deployment."""
    if not workload.changes:
        return None
    comment = db.scalar(Queries(workload).table_comment, {"table": workload.changes_table}) or ""
    found = re.search(r"\(deployment (.*)\)$", comment)
    if found is None or found.group(1) == feed_owner(workload):
        return None
    return (
        f"the change feed {workload.mysql.database}.{workload.changes_table} belongs to another recheck "
        f"deployment on the same table (key prefix/workload {found.group(1)!r}; this one is "
        f"{feed_owner(workload)!r}): it would deliver that deployment's changes as its own and trim "
        "them. One table, one deployment: use the same key prefix and workload name, or run only one"
    )


def missing_table(workload: Workload, db: Database) -> str:
    """What to say of a table that does not exist: the closest existing name first (a typo is the
    likely cause), then where the name came from, and only then how to make a new table."""
    names = [row[0] for row in db.query(Queries(workload).table_names)]
    close = difflib.get_close_matches(workload.table, names, n=1, cutoff=0.6)
    close = close or [n for n in names if n.lower() == workload.table.lower()]
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"table {workload.mysql.database}.{workload.table} does not exist; {hint}check "
        f"{workload.setting_name('table')} and {workload.setting_name('mysql_url')} "
        "(`recheck init-db --create` makes a new table of recheck's own)"
    )


def require_table(workload: Workload, db: Database) -> None:
    """Raise SchemaProblem unless the table is ready for dispatching and writing back."""
    plan = inspect_table(workload, db)
    where = f"{workload.mysql.database}.{workload.table}"
    if not plan.exists:
        raise SchemaProblem(missing_table(workload, db))
    if plan.fatal:
        raise SchemaProblem(f"table {where} " + "; ".join(plan.fatal))
    if plan.adopting and not plan.adds_due:
        raise SchemaProblem(
            f"table {where}: the adoption of this one-shot table is not finished (rows or the due "
            f"column's default still at {ADOPTING_DUE}, neither due nor done): "
            "`recheck init-db --apply` sorts them by the pending condition and finishes it"
        )
    if plan.changes:
        raise SchemaProblem(
            f"table {where} is missing what recheck needs; run `recheck init-db` to see the ALTER TABLE, "
            "`recheck init-db --apply` to apply it"
        )
    if changes_table_missing(workload, db):
        raise SchemaProblem(
            f"workload {workload.name!r} records changes (changes = true) but {workload.mysql.database} has "
            f"no table {workload.changes_table}; `recheck init-db --apply` creates it"
        )
    if group_limits_table_missing(workload, db):
        raise SchemaProblem(
            f"workload {workload.name!r} reads limits per group from {workload.group_limits_table} "
            f"(group_limits_table), which {workload.mysql.database} lacks; "
            "`recheck init-db --apply` creates it"
        )
    taken = feed_taken(workload, db)
    if taken:
        raise SchemaProblem(taken)


def server_identity(workload: Workload, db: Database) -> tuple[tuple[str, str], ...]:
    """The server a connection reached, as the server itself describes it (not the URL)."""
    rows = db.query(Queries(workload).server_identity)
    return tuple(sorted((str(name), str(value)) for name, value in rows))


def table_identity(workload: Workload, db: Database) -> tuple[object, ...]:
    """(server, database, table) of a workload's table, however its URL spells the server."""
    server = server_identity(workload, db)
    folded = dict(server).get("lower_case_table_names", "0") != "0"  # names are case-insensitive there
    names = (workload.mysql.database, workload.table)
    return (server, *(name.lower() for name in names)) if folded else (server, *names)


def require_distinct_tables(workloads: list[tuple[Workload, Database]]) -> None:
    """Raise ConfigError if two workloads keep one table (their rows would all be checked twice
    per due time), also when their URLs name its server differently."""
    if len(workloads) < 2:
        return
    seen: dict[tuple[object, ...], str] = {}
    lines = []
    for workload, db in workloads:
        target = table_identity(workload, db)
        if target in seen:
            lines.append(
                f"workload {workload.name!r} keeps the same table as workload {seen[target]!r} "
                f"({workload.mysql.database}.{workload.table} on one server, reached by two URLs)"
            )
        seen.setdefault(target, workload.name)
    if lines:
        raise ConfigError("\n".join(lines))


# -- DDL and privileges: `recheck init-db` ------------------------------------------------------
def database_exists(workload: Workload, server: Database) -> bool:
    """server: a connection without a database (the one named may not exist yet)."""
    return bool(server.scalar(Queries(workload).database_exists, {"database": workload.mysql.database}))


def create_database(workload: Workload, server: Database) -> None:
    server.execute(Queries(workload).create_database)


def create_table(workload: Workload, db: Database) -> None:
    """recheck's own table (the demo's, or one `init-db --create` was asked for)."""
    db.execute(Queries(workload).create_table)


def create_changes_table(workload: Workload, db: Database) -> None:
    db.execute(Queries(workload).create_changes_table)


def table_comment(workload: Workload, db: Database) -> str:
    return db.scalar(Queries(workload).table_comment, {"table": workload.table}) or ""


def grant_app_user(workload: Workload, db: Database) -> None:
    """Create or update RECHECK_APP_USER with SELECT and UPDATE on the table, nothing more."""
    queries = Queries(workload)
    params = {
        "user": workload.deployment.app_user,
        "password": workload.deployment.app_password.get_secret_value(),
    }
    db.execute(queries.create_app_user, params)
    db.execute(queries.set_app_password, params)
    db.execute(queries.grant_app_user, {"user": workload.deployment.app_user})
    if workload.changes:
        db.execute(queries.grant_changes, {"user": workload.deployment.app_user})
