"""Calendar schedules per row (issue 48, item 1): after each check a row is due at its schedule's
next tick in its time zone, written by the worker's one fenced write-back; a row whose schedule
cannot be used is parked with the reason. Real MariaDB and Redis, the worker's own code path.
The ticks themselves (DST days, a simulated day of 100,000 rows) are tested without servers in
tests/unit/test_schedules.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from recheck import Recheck
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.schema import SchemaProblem, require_table
from tests.support.helpers import drain, prepare, query, recheck, workload

CREATE = ("CREATE TABLE reports (id BIGINT PRIMARY KEY, cron VARCHAR(100) NULL, tz VARCHAR(64) NULL, "
          "fails TINYINT NOT NULL DEFAULT 0)")  # fmt: skip
ROWS = {
    1: ("0 9 * * MON", "Europe/Paris"),
    2: ("30 2 * * *", "America/New_York"),
    3: ("*/15 * * * *", None),  # the workload's zone
    4: ("@weekly", "Australia/Sydney"),
    5: ("0 0 1 1 *", "Asia/Kolkata"),
    6: ("0 12 * * * *", "UTC"),  # six fields: seconds first
}
BAD = {
    7: ("61 * * * *", "UTC"),
    8: ("0 9 * * *", "Mars/Olympus"),
    9: (None, "UTC"),
}


def reports(settings, **values):
    return workload(settings, "reports", table="reports", id_column="id", schedule_column="cron",
                    time_zone_column="tz", time_zone="Asia/Tokyo", **values)  # fmt: skip


def sql_text(value) -> str:
    return "NULL" if value is None else f"'{value}'"


@pytest.fixture
def scheduled(settings):
    settings = reports(settings)
    values = ", ".join(f"({i}, {sql_text(c)}, {sql_text(z)})" for i, (c, z) in {**ROWS, **BAD}.items())
    prepare(settings, CREATE, f"INSERT INTO reports (id, cron, tz) VALUES {values}")
    return settings


def next_tick(cron: str, zone: str, after: datetime) -> datetime:
    """The tick cronsim itself gives (the test's own reading, not recheck's cache), as UTC."""
    cron = {"@weekly": "0 0 * * 0"}.get(cron, cron)
    return next(CronSim(cron, after.astimezone(ZoneInfo(zone)))).astimezone(UTC)


def stored(sql) -> dict[int, tuple]:
    rows = query(sql, "SELECT id, checked_at, next_check_at, status, last_error FROM reports")
    return {int(i): (checked, due, status, error) for i, checked, due, status, error in rows}


def test_each_row_is_due_at_its_next_tick_in_its_own_time_zone(scheduled, make_worker, sql):
    worker = make_worker(scheduled, lambda ids: ["sent"] * len(ids))
    drain(worker, scheduled)
    rows = stored(sql)
    for row_id, (cron, zone) in ROWS.items():
        checked, due, status, _ = rows[row_id]
        assert status == "sent", (row_id, rows[row_id])
        expected = next_tick(cron, zone or "Asia/Tokyo", checked.replace(tzinfo=UTC))
        # The due column holds UTC (RECHECK_DB_TIME_ZONE=+00:00), to the millisecond.
        assert due.replace(tzinfo=UTC) == expected, (row_id, cron, zone, checked, due, expected)


def test_a_row_whose_schedule_cannot_be_used_is_parked_with_the_reason(scheduled, make_worker, sql):
    worker = make_worker(scheduled, lambda ids: ["sent"] * len(ids))
    drain(worker, scheduled)
    rows = stored(sql)
    assert "Bad minute" in rows[7][3] and "quarantined: its schedule cannot be used" in rows[7][3]
    assert "Mars/Olympus" in rows[8][3] and "not an IANA time zone" in rows[8][3]
    assert "schedule column is empty" in rows[9][3]
    for row_id in BAD:
        assert rows[row_id][1].year == 9999 and rows[row_id][2] is None, rows[row_id]  # parked, not written
    status = recheck("status", settings=scheduled, env={"RECHECK_CONFIG": ""})
    assert "quarantined id 7:" in status.stdout and "Bad minute" in status.stdout, status.stdout
    assert "each row's schedule (cron) in each row's time zone (tz, else Asia/Tokyo)" in status.stdout
    inspect = recheck("inspect", "8", settings=scheduled, env={"RECHECK_CONFIG": ""})
    assert "Mars/Olympus" in inspect.stdout, inspect.stdout

    # Fixed by the application, released by the operator: due now, then at its ticks.
    query(sql, "UPDATE reports SET cron = '0 9 * * *' WHERE id = 7")
    released = recheck("release", "7", settings=scheduled, env={"RECHECK_CONFIG": ""})
    assert released.returncode == 0, released.stdout + released.stderr
    drain(worker, scheduled)
    checked, due, status, error = stored(sql)[7]
    assert status == "sent" and error is None
    assert due.replace(tzinfo=UTC) == next_tick("0 9 * * *", "UTC", checked.replace(tzinfo=UTC))


def test_a_failure_waits_for_the_next_tick_or_its_backoff_if_sooner(settings, make_worker, sql):
    hourly = reports(settings, retry="backoff", retry_base=30, retry_max=60)
    prepare(hourly, CREATE, "INSERT INTO reports (id, cron, tz) VALUES (1, '0 * * * *', 'UTC'), "
                            "(2, '0 0 1 1 *', 'UTC')")  # fmt: skip
    worker = make_worker(hourly, lambda ids: [RuntimeError("the report failed")] * len(ids))
    drain(worker, hourly)
    rows = stored(sql)
    for row_id, cron in ((1, "0 * * * *"), (2, "0 0 1 1 *")):
        checked, due, _, error = rows[row_id]
        tick = next_tick(cron, "UTC", checked.replace(tzinfo=UTC)).replace(tzinfo=None)
        assert "the report failed" in error
        assert due == min(tick, checked + timedelta(seconds=30)), (row_id, checked, due, tick)

    plain = hourly.evolve(retry="interval")  # the default: a failure waits for its tick
    query(sql, "UPDATE reports SET next_check_at = NOW(3) - INTERVAL 1 SECOND")
    worker = make_worker(plain, lambda ids: [RuntimeError("the report failed")] * len(ids))
    drain(worker, plain)
    checked, due, _, _ = stored(sql)[1]
    assert due == next_tick("0 * * * *", "UTC", checked.replace(tzinfo=UTC)).replace(tzinfo=None)


def test_a_row_checked_hours_late_runs_once_then_at_the_next_tick_and_recheck_after_wins(
    settings, make_worker, sql
):
    hourly = reports(settings)
    prepare(hourly, CREATE, "INSERT INTO reports (id, cron, tz) VALUES (1, '*/10 * * * *', 'UTC'), "
                            "(2, '0 9 * * *', 'UTC')")  # fmt: skip
    query(sql, "UPDATE reports SET next_check_at = NOW(3) - INTERVAL 3 HOUR")  # 18 ticks missed
    asked = {2: Recheck("again soon", after=120)}
    worker = make_worker(hourly, lambda ids: [asked.get(int(i), "sent") for i in ids])
    drain(worker, hourly)
    rows = stored(sql)
    checked, due, _, _ = rows[1]
    assert due == next_tick("*/10 * * * *", "UTC", checked.replace(tzinfo=UTC)).replace(tzinfo=None)
    assert int(query(sql, "SELECT check_count FROM reports WHERE id = 1")[0][0]) == 1  # once, not 18 times
    checked, due, _, _ = rows[2]
    assert due == checked + timedelta(seconds=120)  # the check's Recheck(after=) over its tick


def test_the_schedule_columns_must_exist_and_hold_text(settings, sql):
    bad = reports(settings)
    query(sql, "CREATE TABLE reports (id BIGINT PRIMARY KEY, cron INT NULL)")
    db = Database(bad)
    try:
        with pytest.raises(SchemaProblem) as refused:
            require_table(bad, db)
    finally:
        db.close()
    assert "schedule column 'cron' is int" in str(refused.value), refused.value
    assert "has no time_zone column 'tz'" in str(refused.value), refused.value


def test_with_columns_the_schedule_comes_with_the_checks_row_and_no_read_of_its_own(
    settings, make_worker, sql
):
    """With `columns`, the take's read of the check's rows brings each row's schedule and zone
    too (the check sees them), and the write-back uses those: it has no read of its own. Shown
    by a schedule changed while the check runs: the tick is the schedule's the take read."""
    hourly = reports(settings, columns=["cron"])
    prepare(hourly, CREATE, "INSERT INTO reports (id, cron, tz) VALUES (1, '0 * * * *', 'UTC')")
    seen = []

    def check(rows: list) -> list:
        seen.extend(dict(row) for row in rows)
        query(sql, "UPDATE reports SET cron = '30 * * * *' WHERE id = 1")  # changed while it runs
        return ["sent"] * len(rows)

    worker = make_worker(hourly, check)
    drain(worker, hourly)
    assert seen == [{"id": 1, "cron": "0 * * * *", "tz": "UTC"}]
    checked, due, status, _ = stored(sql)[1]
    assert status == "sent"
    assert due.replace(tzinfo=UTC) == next_tick("0 * * * *", "UTC", checked.replace(tzinfo=UTC))

    plain = reports(settings)  # no columns: the write-back reads the schedule, the latest one
    query(sql, "UPDATE reports SET next_check_at = NOW(3) - INTERVAL 1 SECOND")
    worker = make_worker(plain, lambda ids: query(sql, "UPDATE reports SET cron = '45 * * * *'") or ["sent"])
    drain(worker, plain)
    checked, due, _, _ = stored(sql)[1]
    assert due.replace(tzinfo=UTC) == next_tick("45 * * * *", "UTC", checked.replace(tzinfo=UTC))
