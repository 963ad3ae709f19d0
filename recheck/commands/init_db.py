"""`recheck init-db`: prepare a table (and `spread`'s evening out of its due times).

recheck never changes an application's table silently:
- a table or database that does not exist is created only with `--create`, or for the demo
  table (the default RECHECK_TABLE), so a typo in a name is reported, not turned into a new
  empty table;
- an existing table gets the exact ALTER TABLE printed, applied only with `--apply`, because
  adding columns and an index to a big production table is its owner's decision;
- an existing column named like one of recheck's is never taken over unless `--adopt` names it
  (shared/mysql/schema.py says which);
- without `--apply` (and with nothing to create) it only reads, so a user with no more than
  table privileges can run it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pymysql

from recheck.commands.base import TABLE, Command, ProgressLine, add_workload, column_list, workloads_of
from recheck.shared.config import Settings, Workload, WorkloadFields, redact_url
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.mysql.schema import (
    ADOPTING_DUE,
    ROLE_SETTINGS,
    TABLE_MARK,
    adoption_default,
    changes_table_missing,
    create_changes_table,
    create_database,
    create_group_limits_table,
    create_table,
    database_exists,
    feed_taken,
    grant_app_user,
    group_limits_table_missing,
    inspect_table,
    missing_table,
    read_columns,
    table_comment,
)
from recheck.shared.mysql.sql import Queries, quote
from recheck.shared.policies.lifecycle import lifecycle_of

DEMO_TABLE = WorkloadFields.model_fields["table"].default  # the one table init-db creates unasked


def init_db(
    workload: Workload,
    apply: bool,
    say: Callable[[str], object],
    *,
    create: bool = False,
    adopt: tuple[str, ...] = (),
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Create recheck's own table, or check (and with `apply`, alter) an existing one.
    Returns an exit code: 0 ready, 1 not ready (each reason said in one line)."""
    database = workload.mysql.database
    may_create = create or workload.table == DEMO_TABLE
    server = Database(workload, with_database=False)
    try:
        if not database_exists(workload, server):
            if not may_create:
                say(
                    f"database {database!r} does not exist on {redact_url(workload.mysql_url)}; check "
                    "RECHECK_MYSQL_URL, or make it and a table of recheck's own: `recheck init-db --create`"
                )
                return 1
            create_database(workload, server)
            say(f"created database {database}")
    finally:
        server.close()
    db = Database(workload)
    try:
        code = prepare_table(workload, db, apply, say, may_create, adopt, progress)
        if code == 0 and changes_table_missing(workload, db):
            if not (apply or may_create):
                feed = workload.changes_table
                say(f"workload {workload.name!r} records changes: it needs the table {feed} beside "
                    f"{workload.table}; run `recheck init-db --apply` to create it")  # fmt: skip
                return 1
            create_changes_table(workload, db)
            say(f"created table {database}.{workload.changes_table} (the change feed)")
        if code == 0 and group_limits_table_missing(workload, db):
            table = workload.group_limits_table
            if not (apply or may_create):
                say(f"workload {workload.name!r} reads limits per group from {table}: run `recheck init-db "
                    f"--apply` to create it:\n{Queries(workload).create_group_limits}")  # fmt: skip
                return 1
            create_group_limits_table(workload, db)
            say(f"created table {database}.{table} (limits per group: empty, every group has the workload's)")
        taken = feed_taken(workload, db) if code == 0 else None
        if taken:
            say(taken)
            return 1
        return code
    finally:
        db.close()


def prepare_table(
    workload: Workload,
    db: Database,
    apply: bool,
    say: Callable[[str], object],
    may_create: bool,
    adopt: tuple[str, ...],
    progress: Callable[[int, int], None] | None,
) -> int:
    """The workload's own table: created, checked, or altered (init_db says how it decides)."""
    where = f"{workload.mysql.database}.{workload.table}"
    plan = inspect_table(workload, db, adopt)
    if not plan.exists:
        if not may_create:
            say(missing_table(workload, db))
            return 1
        create_table(workload, db)
        say(f"created table {where}")
        return 0
    if plan.fatal:
        for problem in plan.fatal:
            say(f"table {where} {problem}")
        return 1
    if not plan.clauses and not plan.adopting:
        say(f"table {where} is ready")
        return 0
    statement = plan.alter_statement(workload) if plan.clauses else ""
    existing = Rows(workload, db).count() if plan.adopting else 0
    if existing and not workload.pending:
        say(f"table {where} is a one-shot workload's with {existing:,} rows already: say which of them are "
            f"still to do with {workload.setting_name('pending')} (an SQL condition, e.g. \"status = 0\"; "
            "\"true\" for every row); the others are taken as done. Nothing was changed.")  # fmt: skip
        return 1
    if not apply:
        if plan.adopting and not plan.adds_due:
            say(f"the adoption of table {where} is not finished: rows not sorted yet are neither due "
                "nor done (parked), and so are rows inserted meanwhile")  # fmt: skip
        if statement:
            say(f"table {where} needs this change:\n\n{statement};\n")
        if plan.adopting:
            which = (
                "every row is due at once"
                if workload.pending == "true"
                else (f"the rows where {workload.pending} are due at once, the others done")
                if workload.pending
                else "every row is due at once"  # an empty table: nothing to sort
            )
            say(f"(then, with --apply: {which}, and rows inserted later are due when inserted)")  # fmt: skip
            say(f"run `{init_db_command(adopt)} --apply` to apply it; applied by hand, the rows wait "
                "(neither due nor done) until that command has sorted them")  # fmt: skip
            return 1
        if plan.adds_due:
            say("(every existing row then gets one due time; --apply spreads them over one interval)")
        say(f"run `{init_db_command(adopt)} --apply` to apply it, or apply it yourself")
        return 1
    if plan.adopting and existing:  # before anything is altered: a typo changes nothing
        try:
            Rows(workload, db).check_pending()
        except pymysql.err.MySQLError as error:
            say(f"{workload.setting_name('pending')} ({workload.pending}) is not a condition MySQL accepts "
                f"on table {where}: {error.args[-1]}. Nothing was changed.")  # fmt: skip
            return 1
    if statement:
        db.execute(statement)
        say(f"altered table {where}:\n\n{statement};")
    if plan.adopting:
        finish_adoption(workload, db, existing, progress, say)
    elif plan.adds_due:
        rows = spread(workload, db, progress)
        say(f"spread the due times of {rows:,} rows over {workload.interval:g} s")
    return 0


def finish_adoption(workload: Workload, db: Database, existing: int, progress, say) -> None:
    """Sort an adopted one-shot table's rows by `pending` (due now, or done), set the due
    column's real default, then sort the rows producers inserted in between. Cut short anywhere,
    running it again goes on: only rows not sorted yet are touched."""
    table = Rows(workload, db)
    table.adopt_pending(progress)
    if ADOPTING_DUE in (read_columns(workload, db)[workload.due_column.lower()].default or ""):
        db.execute(f"ALTER TABLE {quote(workload.table)} {adoption_default(workload)}")
    table.adopt_pending()  # inserted before the default changed
    pending = table.count_pending(existing + 1)
    if workload.pending in ("true", ""):
        say(f"all {pending:,} rows are due now")
    else:
        say(f"{pending:,} of {existing:,} rows are due now (where {workload.pending}), the others done")


def init_db_command(adopt: tuple[str, ...]) -> str:
    """The command line that applies a plan made with these --adopt names (refused without them)."""
    return "recheck init-db" + "".join(f" --adopt {name}" for name in adopt)


def spread(workload: Workload, db: Database, progress: Callable[[int, int], None] | None = None) -> int:
    """Spread every row's due time over one interval from now, in short primary-key chunks.
    Returns how many rows were updated."""
    return Rows(workload, db).spread(progress)


def is_recheck_table(workload: Workload, db: Database) -> bool:
    """Whether init-db created this table (its comment), or it holds nothing but recheck's own
    columns (a table an earlier recheck created): the only tables `seed` writes to."""
    comment = table_comment(workload, db)
    if comment.startswith(TABLE_MARK):
        return True
    ours = {workload.id_column.lower()} | {getattr(workload, role).lower() for role in ROLE_SETTINGS}
    columns = set(read_columns(workload, db))
    return bool(columns) and columns <= ours


def create_app_user(workload: Workload, say) -> None:
    """Create or update RECHECK_APP_USER with SELECT and UPDATE on the table, nothing more."""
    db = Database(workload)
    try:
        grant_app_user(workload, db)
    finally:
        db.close()
    where = f"{workload.mysql.database}.{workload.table}"
    say(f"user '{workload.deployment.app_user}'@'%' may SELECT and UPDATE {where}")
    if workload.changes:
        feed = f"{workload.mysql.database}.{workload.changes_table}"
        say(f"  and SELECT, INSERT and DELETE {feed} (the change feed)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    codes = []
    for workload in workloads_of(settings, args):
        progress = ProgressLine(
            "marking rows due or done:" if lifecycle_of(workload).adopts_rows else "spreading due times:"
        )
        code = init_db(workload, args.apply, print, create=args.create, adopt=args.adopt, progress=progress)
        if code == 0 and workload.deployment.app_user:
            create_app_user(workload, print)
        codes.append(code)
    return max(codes)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--apply", action="store_true", help="apply the ALTER TABLE it needs (then spread due times)"
    )
    parser.add_argument(
        "--create", action="store_true", help="create a missing database and table (the demo table: always)"
    )
    add_workload(parser, "check or prepare only this workload's table (default: every workload's)")
    parser.add_argument(
        "--adopt",
        type=column_list,
        default=(),
        metavar="COLUMN[,COLUMN]",
        help="let recheck write these existing columns (e.g. your own status column for results)",
    )


COMMANDS = [
    Command(
        "init-db",
        "check a table and print what it needs, or create recheck's own table",
        f"{TABLE}, RECHECK_INTERVAL, RECHECK_APP_USER and RECHECK_APP_PASSWORD",
        run,
        arguments,
    )
]
