"""`recheck init-db`: create the default table, or check a team's existing table.

For an existing table recheck never changes anything silently: it prints the exact ALTER TABLE
it needs and applies it only when asked (--apply), because adding an index to a big production
table is a decision for its owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.config import Settings
from shared.db import Database
from shared.sql import Queries, quote

INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
TIME_TYPES = {"datetime", "timestamp"}


class SchemaProblem(Exception):
    """The table cannot be used as configured; the message says what to do."""


@dataclass
class TablePlan:
    exists: bool
    fatal: list[str] = field(default_factory=list)  # problems recheck cannot fix by itself
    changes: list[str] = field(default_factory=list)  # ALTER TABLE clauses

    def alter_statement(self, settings: Settings) -> str:
        return f"ALTER TABLE {quote(settings.table)}\n  " + ",\n  ".join(self.changes)


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


def inspect_table(settings: Settings, db: Database) -> TablePlan:
    queries = Queries(settings)
    columns = {
        name.lower(): data_type.lower()
        for name, data_type, _, _ in db.query(queries.table_columns, {"table": settings.table})
    }
    if not columns:
        return TablePlan(exists=False)
    plan = TablePlan(exists=True)
    id_column, due_column = settings.id_column.lower(), settings.due_column.lower()
    id_type = columns.get(id_column)
    if id_type is None:
        plan.fatal.append(f"has no id column {settings.id_column!r} (set RECHECK_ID_COLUMN)")
    elif id_type not in INTEGER_TYPES:
        plan.fatal.append(f"id column {settings.id_column!r} is {id_type}; recheck needs an integer id")
    due_type = columns.get(due_column)
    if due_type is not None and due_type not in TIME_TYPES:
        plan.fatal.append(f"due column {settings.due_column!r} is {due_type}; it must be DATETIME(3)")
    for column, definition in column_definitions(settings).items():
        if column.lower() not in columns:
            plan.changes.append(f"ADD COLUMN {quote(column)} {definition}")

    indexes: dict[str, tuple[bool, list[str]]] = {}
    for index_name, non_unique, _, column_name in db.query(queries.table_indexes, {"table": settings.table}):
        indexes.setdefault(index_name, (not int(non_unique), []))[1].append(column_name.lower())
    unique_on_id = any(unique and names == [id_column] for unique, names in indexes.values())
    if id_type is not None and not unique_on_id:
        plan.fatal.append(f"id column {settings.id_column!r} must be the primary key (or unique on its own)")
    primary = indexes.get("PRIMARY", (True, []))[1]
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


def require_table(settings: Settings, db: Database) -> None:
    """Raise SchemaProblem unless the table is ready for dispatching and writing back."""
    plan = inspect_table(settings, db)
    where = f"{settings.mysql.database}.{settings.table}"
    if not plan.exists:
        raise SchemaProblem(f"table {where} does not exist; run `recheck init-db`")
    if plan.fatal:
        raise SchemaProblem(f"table {where} " + "; ".join(plan.fatal))
    if plan.changes:
        raise SchemaProblem(
            f"table {where} is missing what recheck needs; run `recheck init-db` to see the ALTER TABLE, "
            "`recheck init-db --apply` to apply it"
        )


def init_db(settings: Settings, apply: bool, say) -> int:
    """Create the database and table, or check an existing table. Returns an exit code."""
    queries = Queries(settings)
    server = Database(settings, with_database=False)
    try:
        server.execute(queries.create_database)
    finally:
        server.close()
    db = Database(settings)
    try:
        plan = inspect_table(settings, db)
        where = f"{settings.mysql.database}.{settings.table}"
        if not plan.exists:
            db.execute(queries.create_table)
            say(f"created table {where}")
            return 0
        if plan.fatal:
            for problem in plan.fatal:
                say(f"table {where} {problem}")
            return 1
        if not plan.changes:
            say(f"table {where} is ready")
            return 0
        statement = plan.alter_statement(settings)
        if not apply:
            say(f"table {where} needs this change:\n\n{statement};\n")
            say("run `recheck init-db --apply` to apply it, or apply it yourself")
            return 1
        db.execute(statement)
        say(f"altered table {where}:\n\n{statement};")
        return 0
    finally:
        db.close()


def create_app_user(settings: Settings, say) -> None:
    """Create or update RECHECK_APP_USER with SELECT and UPDATE on the table, nothing more."""
    queries = Queries(settings)
    params = {"user": settings.app_user, "password": settings.app_password.get_secret_value()}
    db = Database(settings)
    try:
        db.execute(queries.create_app_user, params)
        db.execute(queries.set_app_password, params)
        db.execute(queries.grant_app_user, {"user": settings.app_user})
    finally:
        db.close()
    say(f"user '{settings.app_user}'@'%' may SELECT and UPDATE {settings.mysql.database}.{settings.table}")
