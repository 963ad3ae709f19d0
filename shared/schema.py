"""What recheck needs of its table, read from information_schema: the roles' start-up check,
the write-back's column facts, and the plan `recheck init-db` (recheck/initdb.py) carries out.

recheck never takes over an application's column silently: a column named like one of recheck's
that recheck did not add (its comment says so) is refused unless adopted explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.config import Settings
from shared.db import Database
from shared.keytypes import MAX_KEY_BYTES, MAX_KEY_CHARS, BinaryKeys, IntKeys, KeyKind, TextKeys
from shared.sql import Queries, quote

INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
TEXT_KEY_TYPES = {"char", "varchar"}
BINARY_KEY_TYPES = {"binary", "varbinary"}
NUMBER_TYPES = INTEGER_TYPES | {"decimal", "numeric", "float", "double", "real"}
TIME_TYPES = {"datetime", "timestamp"}
CHARACTER_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
DUE_PRECISION = 3  # due times travel as milliseconds: a finer column could never match its fence
JSON_TEXT_LIMIT = 1024  # the VARCHAR size JSON_TABLE reads results and errors as (queries.sql)
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

    @property
    def made_by_recheck(self) -> bool:
        return self.comment.startswith(COLUMN_MARK)


@dataclass(frozen=True)
class Table:
    """What the write-back needs to know about the table, read once at start."""

    keys: KeyKind  # how the id column's keys travel (entries, JSON batches, SQL)
    result_limit: int | None  # characters the result column holds (None: not a text column)
    error_limit: int | None


def read_columns(settings: Settings, db: Database) -> dict[str, Column]:
    """Column name (lower case) -> Column; empty if the table does not exist."""
    rows = db.query(Queries(settings).table_columns, {"table": settings.table})
    return {
        name.lower(): Column(data_type.lower(), int(length) if length else None, nullable == "YES",
                             column_type.lower(), None if precision is None else int(precision),
                             comment or "", charset, collation)
        for name, data_type, length, nullable, column_type, precision, comment, charset, collation in rows
    }  # fmt: skip


def describe_table(settings: Settings, db: Database) -> Table:
    columns = read_columns(settings, db)

    def text_limit(name: str) -> int | None:
        column = columns.get(name.lower())
        if column is None:
            return JSON_TEXT_LIMIT
        if column.data_type in CHARACTER_TYPES and column.max_length:
            return min(column.max_length, JSON_TEXT_LIMIT)
        return None  # not text: the column decides what it accepts (a refusal fails that row)

    return Table(
        keys=key_kind(columns.get(settings.id_column.lower())),
        result_limit=text_limit(settings.result_column),
        error_limit=text_limit(settings.error_column),
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


class SchemaProblem(Exception):
    """The table cannot be used as configured; the message says what to do."""


@dataclass
class TablePlan:
    exists: bool
    fatal: list[str] = field(default_factory=list)  # problems recheck cannot fix by itself
    changes: list[str] = field(default_factory=list)  # ALTER TABLE clauses
    adds_due: bool = False  # the due column is among the changes: every row will get one due time

    def alter_statement(self, settings: Settings) -> str:
        return f"ALTER TABLE {quote(settings.table)}\n  " + ",\n  ".join(self.changes)


ROLE_SETTINGS = {  # recheck's columns, each with the setting that names it
    "result_column": "the check's result",
    "checked_column": "when it was last checked",
    "due_column": "when it is next due",
    "count_column": "how many checks completed",
    "fail_column": "consecutive failures",
    "error_column": "the last error",
}


def column_definitions(settings: Settings) -> dict[str, str]:
    """What init-db adds for each column recheck writes, if the table lacks it."""
    return {
        settings.result_column: "VARCHAR(255) NULL",
        settings.checked_column: "DATETIME(3) NULL",
        # Existing rows become due at once; rows the application inserts later too.
        settings.due_column: "DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)",
        settings.count_column: "INT UNSIGNED NOT NULL DEFAULT 0",
        settings.fail_column: "INT UNSIGNED NOT NULL DEFAULT 0",
        settings.error_column: "VARCHAR(255) NULL",
    }


def added_column(settings: Settings, name: str) -> str:
    """The ADD COLUMN clause for one of recheck's columns, marked as recheck's by its comment."""
    role = next(r for r in ROLE_SETTINGS if getattr(settings, r) == name)
    comment = f"{COLUMN_MARK} {ROLE_SETTINGS[role]}".replace("'", "''")  # a fixed text, quoted for SQL
    return f"ADD COLUMN {quote(name)} {column_definitions(settings)[name]} COMMENT '{comment}'"


def foreign_columns(settings: Settings, columns: dict[str, Column], adopt: tuple[str, ...]) -> list[str]:
    """Columns named like recheck's that recheck did not add and nobody adopted: refused.

    A table that already has every one of recheck's columns was prepared before (by an earlier
    recheck, which marked nothing, or by hand) and is taken as it is."""
    names = [getattr(settings, role) for role in ROLE_SETTINGS]
    present = [name for name in names if name.lower() in columns]
    if len(present) == len(names):
        return []
    adopted = {name.lower() for name in adopt}
    return [
        name for name in present
        if not columns[name.lower()].made_by_recheck and name.lower() not in adopted
    ]  # fmt: skip


def inspect_table(settings: Settings, db: Database, adopt: tuple[str, ...] = ()) -> TablePlan:
    """What the table lacks (or has that recheck cannot use); adopt: existing columns the user
    allows recheck to write (`init-db --adopt`)."""
    queries = Queries(settings)
    columns = read_columns(settings, db)
    if not columns:
        return TablePlan(exists=False)
    plan = TablePlan(exists=True)
    for name in foreign_columns(settings, columns, adopt):
        role = next(r for r in ROLE_SETTINGS if getattr(settings, r) == name)
        plan.fatal.append(
            f"already has a column {name!r} that recheck did not add; recheck would overwrite it with "
            f"{ROLE_SETTINGS[role]}. Give recheck a column of its own (RECHECK_{role.upper()}="
            f"recheck_{name}), or, if {name!r} is meant for recheck, `recheck init-db --adopt {name}`"
        )
    id_column, due_column = settings.id_column.lower(), settings.due_column.lower()
    id_type = columns[id_column].data_type if id_column in columns else None
    if id_type is None:
        plan.fatal.append(f"has no id column {settings.id_column!r} (set RECHECK_ID_COLUMN)")
    else:
        try:
            key_kind(columns[id_column])
        except SchemaProblem as problem:
            plan.fatal.append(f"{settings.id_column!r}: {problem}")
    if settings.interval_column:
        interval = columns.get(settings.interval_column.lower())
        if interval is None:
            plan.fatal.append(f"has no interval column {settings.interval_column!r} (interval_column)")
        elif interval.data_type not in NUMBER_TYPES:
            plan.fatal.append(
                f"interval column {settings.interval_column!r} is {interval.column_type}; "
                "it must hold seconds as a number"
            )
    due = columns.get(due_column)
    if due is not None:
        plan.fatal += due_column_problems(settings, due)
    for column in column_definitions(settings):
        if column.lower() not in columns:
            plan.changes.append(added_column(settings, column))
            plan.adds_due = plan.adds_due or column == settings.due_column

    indexes: dict[str, tuple[bool, list[str]]] = {}
    for index_name, non_unique, _, column_name in db.query(queries.table_indexes, {"table": settings.table}):
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
            f"id column {settings.id_column!r} is not the primary key; set RECHECK_ID_COLUMN={primary[0]}"
        )
    # InnoDB appends the primary key to every secondary index, so (due) alone acts as (due, id)
    # when id is the primary key.
    has_due_index = any(
        names[:2] == [due_column, id_column] or (names == [due_column] and primary == [id_column])
        for _, names in indexes.values()
    )
    if not has_due_index:
        plan.changes.append(
            f"ADD KEY `recheck_due` ({quote(settings.due_column)}, {quote(settings.id_column)})"
        )
    return plan


def due_column_problems(settings: Settings, due: Column) -> list[str]:
    """A due column recheck cannot fence on exactly, or whose rows it would never see."""
    fix = (
        f"; fix it with ALTER TABLE {quote(settings.table)} MODIFY COLUMN {quote(settings.due_column)} "
        f"{column_definitions(settings)[settings.due_column]}"
    )
    if due.data_type not in TIME_TYPES:
        return [f"due column {settings.due_column!r} is {due.data_type}; it must be DATETIME(3){fix}"]
    problems = []
    if (due.precision or 0) > DUE_PRECISION:
        problems.append(
            f"due column {settings.due_column!r} is {due.column_type.upper()}: recheck fences write-backs "
            f"on millisecond due times, so a row with a finer due time would never be written{fix}"
        )
    if due.nullable:
        problems.append(
            f"due column {settings.due_column!r} allows NULL: a row with a NULL due time is never due{fix}"
        )
    return problems


def require_table(settings: Settings, db: Database) -> None:
    """Raise SchemaProblem unless the table is ready for dispatching and writing back."""
    plan = inspect_table(settings, db)
    where = f"{settings.mysql.database}.{settings.table}"
    if not plan.exists:
        raise SchemaProblem(
            f"table {where} does not exist; check RECHECK_TABLE and RECHECK_MYSQL_URL "
            "(`recheck init-db --create` makes a table of recheck's own)"
        )
    if plan.fatal:
        raise SchemaProblem(f"table {where} " + "; ".join(plan.fatal))
    if plan.changes:
        raise SchemaProblem(
            f"table {where} is missing what recheck needs; run `recheck init-db` to see the ALTER TABLE, "
            "`recheck init-db --apply` to apply it"
        )
