"""Rows an application inserts are due at once, whatever its session's time zone (issue 32).

recheck's sessions run in UTC (RECHECK_DB_TIME_ZONE). A DATETIME due column whose default is
CURRENT_TIMESTAMP(3) takes the INSERTING session's local time: a producer in a +02:00 session
stored rows due two hours from now, and status said "every row fresh". init-db now gives the due
column an expression default on recheck's clock, proposes it for a column made before, and
status and inspect point at rows never checked that are due further ahead than their interval.
Both expression defaults (`DEFAULT (UTC_TIMESTAMP(3))`) are accepted by MySQL 8.0.13+ and
MariaDB 10.2+; these tests run on MariaDB.
"""

from __future__ import annotations

import pytest

from recheck.shared.mysql.db import Database
from tests.support.helpers import query, recheck, scalar

ZONES = ("+02:00", "-07:00")


def insert_from_zone(settings, zone: str, ids: range) -> None:
    """An application inserting rows in a session of another time zone, leaving the due column to
    its default (as the docs say it may)."""
    db = Database(settings.evolve(db_time_zone=zone))
    values = ", ".join(f"({i})" for i in ids)
    db.execute(f"INSERT INTO `{settings.table}` (`{settings.id_column}`) VALUES {values}")
    db.close()


def seconds_from_now(sql, settings) -> list[float]:
    """Each row's due time relative to the database's UTC now."""
    rows = query(sql, f"SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), `{settings.due_column}`) / 1e6 "
                      f"FROM `{settings.table}`")  # fmt: skip
    return [float(row[0]) for row in rows]


@pytest.mark.parametrize("zone", ZONES)
def test_rows_inserted_from_another_zone_are_due_at_once(settings, sql, zone):
    """The demo table init-db creates, and an application's table it prepares: both defaults are
    UTC now."""
    apps = settings.evolve(table="accounts", id_column="id")
    query(sql, "CREATE TABLE accounts (id BIGINT PRIMARY KEY, name VARCHAR(20) NULL)")
    assert recheck("init-db", "--apply", settings=apps).returncode == 0
    for workload in (settings, apps):
        insert_from_zone(workload, zone, range(1, 11))
        late = seconds_from_now(
            sql, workload
        )  # read at once: a busy machine's seconds are not the bug's hours
        assert len(late) == 10 and all(-5 < s <= 0.5 for s in late), (zone, late)


def test_a_due_column_made_before_is_fixed_by_init_db_and_flagged_until_then(settings, sql):
    """A table whose due column still has the old CURRENT_TIMESTAMP(3) default: `config` says so,
    `init-db` prints the one clause that fixes it and `--apply` runs it; meanwhile rows inserted
    from a +02:00 session are flagged by `status` and `inspect`."""
    due = f"`{settings.table}` ALTER COLUMN `{settings.due_column}`"
    query(sql, f"ALTER TABLE {due} SET DEFAULT CURRENT_TIMESTAMP(3)")
    insert_from_zone(settings, "+02:00", range(1, 6))
    assert min(seconds_from_now(sql, settings)) > 7000  # two hours late: the bug, reproduced

    preflight = recheck("config", settings=settings)
    assert preflight.returncode == 1 and "inserting session's local time" in preflight.stdout
    status = recheck("status", settings=settings)
    assert "5 rows never checked are due more than their interval ahead" in status.stdout, status.stdout
    inspect = recheck("inspect", "3", settings=settings)
    assert "inserted from a session in another time zone" in inspect.stdout, inspect.stdout

    shown = recheck("init-db", settings=settings)
    assert shown.returncode == 1
    assert f"ALTER COLUMN `{settings.due_column}` SET DEFAULT (UTC_TIMESTAMP(3))" in shown.stdout, (
        shown.stdout
    )
    assert recheck("init-db", "--apply", settings=settings).returncode == 0
    query(sql, f"DELETE FROM `{settings.table}`")
    insert_from_zone(settings, "+02:00", range(1, 6))
    assert all(-5 < s <= 0.5 for s in seconds_from_now(sql, settings))
    assert recheck("config", settings=settings).returncode == 0
    assert scalar(sql, f"SELECT COUNT(*) FROM `{settings.table}`") == 5
