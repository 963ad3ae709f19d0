"""Servers away at start, or restarted mid-run: processes wait, log once, resume, lose nothing.

Each test runs its own MariaDB and Redis so it can stop and kill them.
"""

from __future__ import annotations

import time

import pytest

from recheck.commands.init_db import init_db
from recheck.shared.config import Settings
from recheck.shared.outage import MAX_BACKOFF
from tests.support.helpers import audit_violations, install_audit, scalar, seed_rows
from tests.support.processes import TEST_TIMINGS
from tests.support.servers import MariaDBServer, RedisServer, wait_for

NEVER_CHECKED = "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0"
OVERDUE_1S = "SELECT COUNT(*) FROM user_block_status WHERE next_check_at < NOW(3) - INTERVAL 1 SECOND"


@pytest.fixture
def private(tmp_path):
    """A MariaDB and a Redis of this test's own (Redis not started: the test decides)."""
    mysql = MariaDBServer(tmp_path / "mysql")
    mysql.start()
    cache = RedisServer(tmp_path / "redis")
    env = Settings(_env_file=None, mysql_url=mysql.url("recheck"), redis_url=cache.url(), **TEST_TIMINGS)
    settings = env.default_workload()
    assert init_db(settings, apply=False, say=lambda _: None) == 0
    yield mysql, cache, settings
    cache.kill()
    mysql.kill()


def lines(log: str, text: str) -> int:
    return sum(text in line for line in log.splitlines())


def not_checked_since(conn, moment) -> int:
    return scalar(conn, "SELECT COUNT(*) FROM user_block_status WHERE checked_at < %s", (moment,))


def seconds_until_all_checked_again(conn, timeout: float) -> float:
    """From now (a server just came back) until every row was checked after this moment."""
    back = scalar(conn, "SELECT NOW(3)")
    started = time.monotonic()
    wait_for(lambda: not_checked_since(conn, back) == 0, timeout, "every row checked again")
    return time.monotonic() - started


@pytest.mark.parametrize("away", ["redis", "mysql"])
def test_a_server_away_at_start_then_up(private, procs, away):
    mysql, cache, settings = private
    cache.start()
    seed_rows(settings, 2000, due_now=True)
    server = {"redis": cache, "mysql": mysql}[away]
    server.stop()
    dispatcher = procs.start("dispatcher", settings)
    worker = procs.start("worker", settings)
    for process in (dispatcher, worker):  # both are retrying against a port nobody listens on
        wait_for(lambda p=process: f"{away} unreachable" in procs.log_of(p), 20, f"{away} outage logged")
    assert dispatcher.poll() is None and worker.poll() is None
    server.start()
    conn = mysql.connect("recheck")
    wait_for(lambda: scalar(conn, NEVER_CHECKED) == 0, 20, f"every row checked once {away} is up")
    for process in (dispatcher, worker):
        log = procs.log_of(process)
        assert lines(log, f"{away} unreachable") == 1, log
        assert lines(log, f"{away} back after") == 1, log


def running_pipeline(mysql, settings, procs):
    """Audit installed, 5,000 rows, dispatcher and two workers, first cycle done."""
    conn = mysql.connect("recheck")
    install_audit(conn, settings)
    seed_rows(settings, 5000)
    procs.start("dispatcher", settings)
    for _ in range(2):
        procs.start("worker", settings)
    wait_for(lambda: scalar(conn, NEVER_CHECKED) == 0, 20, "the first cycle")
    return conn


def assert_recovered(conn, settings, procs, what: str) -> None:
    """Every row checked again within the bound in docs/guarantees.md, then a clean stop and a clean audit."""
    # Bound (docs/guarantees.md): reconnect backoff + one interval + sweep grace + sweep period.
    bound = (
        MAX_BACKOFF + settings.interval + settings.deployment.sweep_grace + settings.deployment.sweep_interval
    )
    recovered = seconds_until_all_checked_again(conn, bound + 10)
    print(f"{what}: all rows checked again {recovered:.2f} s after the server was back (bound {bound:.1f} s)")
    assert recovered < bound
    wait_for(lambda: scalar(conn, OVERDUE_1S) == 0, 5, "no row overdue by more than 1 s")
    codes = procs.stop_all()
    assert set(codes.values()) == {0}, procs.logs()
    violations = audit_violations(conn)
    assert violations["premature"] == 0 and violations["double"] == 0, violations


def test_redis_restarted_with_all_data_lost_mid_run(private, procs):
    mysql, cache, settings = private
    cache.start()
    conn = running_pipeline(mysql, settings, procs)
    cache.kill()  # everything in flight is gone with it
    time.sleep(3)  # long enough for rows to fall overdue
    assert scalar(conn, OVERDUE_1S) > 0
    cache.start()
    assert_recovered(conn, settings, procs, "redis data loss")


def test_mysql_restarted_mid_run(private, procs):
    mysql, cache, settings = private
    cache.start()
    running_pipeline(mysql, settings, procs).close()
    mysql.stop()
    time.sleep(2)
    mysql.start()
    assert_recovered(mysql.connect("recheck"), settings, procs, "mysql restart")
    assert "mysql unreachable" in procs.logs() and "mysql back after" in procs.logs()
