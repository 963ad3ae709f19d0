"""`recheck init-db` and `recheck spread`: prepare a table, and even out its due times.

recheck never changes an application's table silently:
- a table or database that does not exist is created only with `--create`, or for the demo
  table (the default RECHECK_TABLE), so a typo in a name is reported, not turned into a new
  empty table;
- an existing table gets the exact ALTER TABLE printed, applied only with `--apply`, because
  adding columns and an index to a big production table is its owner's decision;
- an existing column named like one of recheck's is never taken over unless `--adopt` names it
  (shared/schema.py says which);
- without `--apply` (and with nothing to create) it only reads, so a user with no more than
  table privileges can run it.
"""

from __future__ import annotations

from collections.abc import Callable

from shared.config import Settings, redact_url
from shared.db import Database
from shared.schema import ROLE_SETTINGS, TABLE_MARK, inspect_table, read_columns
from shared.sql import Queries

DEMO_TABLE = Settings.model_fields["table"].default  # the one table init-db creates unasked
SPREAD_CHUNK = 5_000  # rows per UPDATE: short transactions on a live table


def init_db(
    settings: Settings,
    apply: bool,
    say: Callable[[str], object],
    *,
    create: bool = False,
    adopt: tuple[str, ...] = (),
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Create recheck's own table, or check (and with `apply`, alter) an existing one.
    Returns an exit code: 0 ready, 1 not ready (each reason said in one line)."""
    queries = Queries(settings)
    database, where = settings.mysql.database, f"{settings.mysql.database}.{settings.table}"
    may_create = create or settings.table == DEMO_TABLE
    server = Database(settings, with_database=False)
    try:
        if not server.scalar(queries.database_exists, {"database": database}):
            if not may_create:
                say(
                    f"database {database!r} does not exist on {redact_url(settings.mysql_url)}; check "
                    "RECHECK_MYSQL_URL, or make it and a table of recheck's own: `recheck init-db --create`"
                )
                return 1
            server.execute(queries.create_database)
            say(f"created database {database}")
    finally:
        server.close()
    db = Database(settings)
    try:
        plan = inspect_table(settings, db, adopt)
        if not plan.exists:
            if not may_create:
                say(
                    f"table {where} does not exist; check RECHECK_TABLE, or create a table of "
                    "recheck's own with `recheck init-db --create`"
                )
                return 1
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
            if plan.adds_due:
                say("(every existing row then gets one due time; --apply spreads them over one interval)")
            say("run `recheck init-db --apply` to apply it, or apply it yourself")
            return 1
        db.execute(statement)
        say(f"altered table {where}:\n\n{statement};")
        if plan.adds_due:
            rows = spread(settings, db, progress)
            say(f"spread the due times of {rows:,} rows over {settings.interval:g} s")
        return 0
    finally:
        db.close()


def spread(settings: Settings, db: Database, progress: Callable[[int, int], None] | None = None) -> int:
    """Spread every row's due time over one interval from now, in short primary-key chunks.
    Returns how many rows were updated."""
    queries = Queries(settings)
    total = int(db.scalar(queries.count_rows))
    after, done = None, 0
    interval_us = round(settings.interval * 1_000_000)
    while True:
        last = db.scalar(queries.spread_chunk_end, {"after": after, "limit": SPREAD_CHUNK})
        if last is None:
            break
        done += db.execute(queries.spread_due, {"after": after, "last": last, "interval_us": interval_us})
        after = last
        if progress and total:
            progress(min(done, total), total)
    return done


def is_recheck_table(settings: Settings, db: Database) -> bool:
    """Whether init-db created this table (its comment), or it holds nothing but recheck's own
    columns (a table an earlier recheck created): the only tables `seed` writes to."""
    queries = Queries(settings)
    comment = db.scalar(queries.table_comment, {"table": settings.table}) or ""
    if comment.startswith(TABLE_MARK):
        return True
    ours = {settings.id_column.lower()} | {getattr(settings, role).lower() for role in ROLE_SETTINGS}
    columns = set(read_columns(settings, db))
    return bool(columns) and columns <= ours


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
