"""recheck on a real application's table, and honest when checks fail (issue 15).

Each trap test failed on the code before its fix: init-db adopting an application's `status`
column, seed truncating an application's table, "fresh" while every check failed, a typo in a
table or database name creating a new empty one.
"""

from __future__ import annotations

import time

import pytest

from recheck.dispatcher.monitor import Monitor
from recheck.shared.mysql.db import Database
from recheck.shared.process.metrics import dispatcher_metrics
from recheck.shared.views.status import FAILING_EVERY
from tests.support import checks
from tests.support.helpers import (
    dispatch_all,
    make_store,
    only_workload,
    query,
    recheck,
    run_in_thread,
    scalar,
    seed_rows,
)
from tests.support.servers import wait_for

ORDERS = (
    "CREATE TABLE orders (id BIGINT UNSIGNED PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
    "status ENUM('new', 'paid', 'shipped') NOT NULL DEFAULT 'new', total INT NOT NULL)"
)
ORDERS_ENV = {"RECHECK_TABLE": "orders", "RECHECK_ID_COLUMN": "id"}


@pytest.fixture
def orders(sql):
    query(sql, ORDERS)
    query(sql, "INSERT INTO orders (id, customer, status, total) VALUES "
               + ", ".join(f"({i}, 'c{i}', 'paid', {i * 10})" for i in range(1, 201)))  # fmt: skip
    return sql


# -- trap 1: an application's own column is never taken over silently -------------------------
def test_init_db_refuses_to_take_over_the_applications_status_column(settings, orders):
    result = recheck("init-db", "--apply", settings=settings, env=ORDERS_ENV)
    assert result.returncode == 1
    assert "already has a column 'status' that recheck did not add" in result.stdout
    assert "RECHECK_RESULT_COLUMN=recheck_status" in result.stdout and "--adopt status" in result.stdout
    columns = {row[0] for row in query(orders, "SHOW COLUMNS FROM orders")}
    assert columns == {"id", "customer", "status", "total"}  # nothing changed


def test_with_a_column_of_its_own_recheck_never_touches_the_applications_values(settings, orders):
    env = {**ORDERS_ENV, "RECHECK_RESULT_COLUMN": "recheck_status"}
    applied = recheck("init-db", "--apply", settings=settings, env=env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    comments = dict(query(orders, "SELECT COLUMN_NAME, COLUMN_COMMENT FROM information_schema.COLUMNS "
                                  "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'orders'"))  # fmt: skip
    assert comments["recheck_status"].startswith("recheck:") and comments["status"] == ""
    run = recheck("run", "--workers", "1", "--duration", "4", settings=settings, env=env, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert scalar(orders, "SELECT COUNT(*) FROM orders WHERE check_count >= 1") == 200
    assert scalar(orders, "SELECT COUNT(*) FROM orders WHERE status = 'paid'") == 200  # untouched


def test_adopting_a_column_is_explicit(settings, sql):
    query(sql, "CREATE TABLE devices (device_id INT UNSIGNED PRIMARY KEY, status VARCHAR(20))")
    env = {"RECHECK_TABLE": "devices", "RECHECK_ID_COLUMN": "device_id"}
    applied = recheck("init-db", "--apply", "--adopt", "status", settings=settings, env=env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "ADD COLUMN `status`" not in applied.stdout
    assert "is ready" in recheck("init-db", settings=settings, env=env).stdout


# -- trap 2: seed and truncate touch only recheck's own table ---------------------------------
def test_seed_refuses_an_applications_table(settings, orders):
    env = {**ORDERS_ENV, "RECHECK_RESULT_COLUMN": "recheck_status"}
    assert recheck("init-db", "--apply", settings=settings, env=env).returncode == 0
    result = recheck("seed", "--rows", "10", "--truncate", settings=settings, env=env)
    assert result.returncode == 1
    assert "was not created by `recheck init-db`" in result.stderr
    assert scalar(orders, "SELECT COUNT(*) FROM orders") == 200


def test_seed_still_fills_recheck_own_table_and_one_an_earlier_recheck_made(settings, sql):
    assert recheck("seed", "--rows", "10", "--truncate", settings=settings).returncode == 0
    query(sql, "ALTER TABLE user_block_status COMMENT = ''")  # as an earlier recheck created it
    assert recheck("seed", "--rows", "10", "--truncate", settings=settings).returncode == 0
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status") == 10


# -- trap 3: when every check fails, nothing says fresh ----------------------------------------
def test_every_check_failing_is_not_fresh_anywhere(make_settings, make_worker, sql, caplog):
    # A failed row is due again one interval after its attempt. At 5 s, one CI run's status call
    # came over 6 s after the failures (a busy runner) and found all 300 overdue: 60 s keeps
    # them not due for the whole test, so overdue stays 0 and failing checks alone say NOT FRESH.
    settings = make_settings(interval=60.0)
    recheck("seed", "--rows", "300", "--due-now", settings=settings)
    worker = make_worker(settings, checks.always_raises, start=False)
    thread = run_in_thread(worker)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "checks failing" not in caplog.text:
        dispatch_all(settings)
        time.sleep(0.2)
    assert "checks failing: 100% of the" in caplog.text, caplog.text[-2000:]
    status = recheck("status", "--json", settings=settings)
    facts = only_workload(status.stdout)
    assert status.returncode == 3
    assert facts["checks_failing"] and not facts["fresh"] and facts["overdue_1s"] == 0
    assert facts["failing_rows"] == 300 and "upstream is down" in facts["last_error"]
    text = recheck("status", settings=settings).stdout
    assert text.count("NOT FRESH:") == 1 and "checks failing: 100%" in text, text
    worker.stop()
    thread.join(10)


# -- trap 4: a typo is reported, not created ---------------------------------------------------
def test_a_typo_in_the_table_name_is_reported_not_created(settings, orders):
    result = recheck("init-db", "--apply", settings=settings, env={**ORDERS_ENV, "RECHECK_TABLE": "order"})
    assert result.returncode == 1
    assert (
        "table" in result.stdout and "order does not exist" in result.stdout and "--create" in result.stdout
    )
    assert scalar(orders, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME = 'order'") == 0
    created = recheck("init-db", "--create", settings=settings, env={**ORDERS_ENV, "RECHECK_TABLE": "order"})
    assert created.returncode == 0 and "created table" in created.stdout


def test_a_typo_in_the_database_name_is_reported_not_created(settings, mariadb, sql):
    url = settings.mysql_url.rsplit("/", 1)[0] + "/eco"
    result = recheck("init-db", settings=settings, env={"RECHECK_MYSQL_URL": url, **ORDERS_ENV})
    assert result.returncode == 1 and "database 'eco' does not exist" in result.stdout
    assert scalar(sql, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'eco'") == 0


def test_a_dry_run_only_reads(settings, mariadb, sql):
    """A user with nothing but SELECT on a ready table can ask init-db (no CREATE DATABASE)."""
    database = settings.mysql.database
    with mariadb.connect() as admin, admin.cursor() as cursor:
        cursor.execute("CREATE USER IF NOT EXISTS 'reader'@'%' IDENTIFIED BY 'reader-pass'")
        cursor.execute(f"GRANT SELECT ON `{database}`.`user_block_status` TO 'reader'@'%'")
    try:
        url = settings.mysql_url.replace("root@", "reader:reader-pass@")
        result = recheck("init-db", settings=settings, env={"RECHECK_MYSQL_URL": url})
        assert result.returncode == 0, result.stdout + result.stderr
        assert "is ready" in result.stdout
    finally:
        with mariadb.connect() as admin, admin.cursor() as cursor:
            cursor.execute("DROP USER IF EXISTS 'reader'@'%'")


# -- smaller ones ------------------------------------------------------------------------------
def test_adding_the_columns_spreads_existing_rows_over_one_interval(make_settings, orders):
    settings = make_settings(interval=10)
    env = {**ORDERS_ENV, "RECHECK_RESULT_COLUMN": "recheck_status"}
    applied = recheck("init-db", "--apply", settings=settings, env=env)
    assert applied.returncode == 0 and "spread the due times of 200 rows over 10 s" in applied.stdout
    distinct, span = query(orders, "SELECT COUNT(DISTINCT next_check_at), "
                                   "TIMESTAMPDIFF(MICROSECOND, MIN(next_check_at), MAX(next_check_at)) / 1e6 "
                                   "FROM orders")[0]  # fmt: skip
    assert distinct > 150 and 5 < float(span) <= 10, (distinct, span)
    query(orders, "UPDATE orders SET next_check_at = NOW(3)")  # a bulk import: one due time again
    again = recheck("spread", settings=settings, env=env)
    assert again.returncode == 0 and "spread the due times of 200 rows" in again.stdout
    assert scalar(orders, "SELECT COUNT(DISTINCT next_check_at) FROM orders") > 150


def test_status_exits_3_when_rows_are_overdue_and_nobody_works(settings, sql):
    recheck("seed", "--rows", "50", "--due-now", settings=settings)
    time.sleep(1.2)
    result = recheck("status", settings=settings)
    assert result.returncode == 3 and "NOT FRESH: 50 rows overdue" in result.stdout
    assert "failing rows      0" in result.stdout


def test_run_stops_when_a_child_cannot_start_and_says_why(settings):
    env = {"RECHECK_CHECK": "no_such_package.mod:check"}
    started = time.monotonic()
    result = recheck("run", "--workers", "1", "--duration", "30", settings=settings, env=env, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert time.monotonic() - started < 20
    assert "No module named 'no_such_package'" in result.stderr
    assert "a restart would fail the same way" in result.stdout
    assert "restarting" not in result.stderr


def test_under_run_every_process_has_its_own_health_file(settings, tmp_path, procs):
    health = tmp_path / "recheck.health"
    env = {"RECHECK_HEALTH_FILE": str(health)}
    run = procs.start("recheck", settings, "run", "--workers", "2", env=env)
    files = [tmp_path / f"recheck.health.{name}" for name in ("dispatcher-0", "worker-0", "worker-1")]
    wait_for(lambda: all(f.exists() for f in files), 20, "three health files")
    result = recheck("health", settings=settings, env=env)
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("healthy: ") == 3 and "unhealthy" not in result.stdout
    run.terminate()
    assert run.wait(timeout=30) == 0


def test_unknown_variables_are_named_with_the_closest_known_one(settings):
    result = recheck("status", "--json", settings=settings, env={"RECHECK_INTERVALL": "5"})
    assert "unknown variable RECHECK_INTERVALL is ignored; did you mean RECHECK_INTERVAL?" in result.stderr


def test_failures_show_in_the_dashboards_facts_within_seconds(make_settings, make_worker, rds):
    """The dispatcher's sampler refreshes failing rows every 5 s while checks fail (was 30 s)."""
    settings = make_settings()
    monitor = Monitor(settings, Database(settings), make_store(settings), dispatcher_metrics())
    assert monitor.sample().failing_rows == 0
    seed_rows(settings, 40, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.always_raises)
    worker.lane(settings.name).poll()
    worker.beat()
    time.sleep(FAILING_EVERY + 0.1)
    facts = monitor.sample()
    assert facts.failing_rows == 40 and len(facts.failing) == 20
