"""Partial failures a red-team review found (issue 12): each test failed on the code before its fix.

Application row locks, a read-only server, checks that misuse their arguments or return odd
values, rows the application changes while they are in flight, unusual keys and columns. All
against real MariaDB and Redis, through the worker's and dispatcher's own code paths.
"""

from __future__ import annotations

import threading
import time

import pymysql
import pytest
import redis

from recheck.dispatcher.reconciler import Sweeper
from recheck.shared.config import Settings, redact_url
from recheck.shared.mysql.db import Database
from recheck.shared.redis.keys import Keys
from recheck.workers.worker import Worker
from recheck.workers.writing.writeback import Written
from tests.support import checks
from tests.support.helpers import (
    dispatch_all,
    make_dispatcher,
    make_pusher,
    only_workload,
    query,
    recheck,
    run_in_thread,
    scalar,
    seed_rows,
)
from tests.support.servers import wait_for

ROW = "SELECT status, check_count, fail_count, last_error FROM user_block_status WHERE user_id = %s"


def drain(worker: Worker, rds, settings: Settings, rounds: int = 50) -> None:
    keys = Keys(settings.deployment.key_prefix)
    for _ in range(rounds):
        if not rds.llen(keys.queue) and not rds.llen(keys.suspects):
            return
        worker.lane(settings.name).poll()


# -- 1. application row locks and a read-only server ---------------------------------------------
def test_a_row_locked_by_the_application_is_deferred_and_the_rest_of_its_batch_written(
    make_worker, settings, sql, rds, mariadb
):
    seed_rows(settings, 50, due_now=True)
    dispatch_all(settings)
    app = mariadb.connect(settings.mysql.database)
    try:
        with app.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT * FROM user_block_status WHERE user_id = 7 FOR UPDATE")  # held by the app
        worker = make_worker(settings, checks.ok)
        started = time.monotonic()
        worker.lane(
            settings.name
        ).poll()  # must neither raise nor wait out the server's 50 s lock wait timeout
        took = time.monotonic() - started
    finally:
        app.close()  # the application's transaction ends (rolled back)
    written = scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 1")
    assert written == 49 and took < 5, (written, took)
    keys = Keys(settings.deployment.key_prefix)
    assert not rds.hexists(keys.inflight, "7")  # let go: the sweep brings it back once overdue
    assert rds.scard(keys.processing(worker.id)) == 0
    assert worker.lane(settings.name).counters.deferred == 1
    at_once = settings.deployment.model_copy(update={"sweep_grace": 0.0})  # below what a setting may be
    sweeper = Sweeper(settings.model_copy(update={"deployment": at_once}), make_pusher(settings))
    assert sweeper.run_once() == 1
    worker.lane(settings.name).poll()
    assert query(sql, ROW, (7,))[0][1] == 1  # checked once the lock was gone


def test_a_write_retried_after_a_lost_connection_waits_for_rows_still_locked(
    make_worker, settings, sql, mariadb
):
    """After a crash or a killed session, MySQL rolls the lost attempt's transaction back and
    holds its rows meanwhile: the worker's retry must wait for them, not defer them (a deferred
    row is checked a second time). Here another session holds the rows for 2.5 s across the
    retry, and the worker's connection is killed between the check and its write."""
    import threading

    seed_rows(settings, 50, due_now=True)
    dispatch_all(settings)
    app = mariadb.connect(settings.mysql.database)
    admin = mariadb.connect(settings.mysql.database)
    worker = make_worker(settings, checks.ok)
    victim = worker.lane(settings.name).db.scalar("SELECT CONNECTION_ID()")

    def lock_then_cut(ids):
        with app.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT user_id FROM user_block_status FOR UPDATE")
        threading.Timer(2.5, app.rollback).start()  # the "rollback" ends 2.5 s from now
        with admin.cursor() as cursor:
            cursor.execute(f"KILL {int(victim)}")  # the write that follows finds no connection
        return ["ok"] * len(ids)

    worker.lane(settings.name).batch.check = lock_then_cut
    try:
        worker.lane(settings.name).poll()
    finally:
        time.sleep(3)  # the timer has rolled back by now
        app.close()
        admin.close()
    written = scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 1")
    assert (written, worker.lane(settings.name).counters.deferred) == (50, 0)


@pytest.fixture
def app_user(settings, mariadb):
    """A MySQL user without SUPER (read_only does not apply to root) that recheck runs as."""
    with mariadb.connect() as admin, admin.cursor() as cursor:
        cursor.execute("CREATE USER IF NOT EXISTS 'rw'@'%' IDENTIFIED BY 'rw-pass'")
        cursor.execute(f"GRANT SELECT, UPDATE ON `{settings.mysql.database}`.* TO 'rw'@'%'")
    url = settings.mysql_url.replace("root@", "rw:rw-pass@")
    yield settings.evolve(**{"mysql_url": url})
    with mariadb.connect() as admin, admin.cursor() as cursor:
        cursor.execute("SET GLOBAL read_only = 0")
        cursor.execute("DROP USER IF EXISTS 'rw'@'%'")


def test_a_read_only_server_is_an_outage_not_a_crash_and_the_batch_is_written_after(
    make_worker, settings, app_user, sql, rds, mariadb, caplog
):
    seed_rows(settings, 30, due_now=True)
    dispatch_all(settings)
    worker = make_worker(app_user, checks.ok, start=False)  # recheck's own user: no SUPER
    with mariadb.connect() as admin, admin.cursor() as cursor:
        cursor.execute("SET GLOBAL read_only = 1")  # a failover in progress
        thread = run_in_thread(worker)
        wait_for(lambda: "refuses writes" in caplog.text, 15, "the outage to be logged")
        assert thread.is_alive() and worker.fatal is None
        time.sleep(1)  # a while read-only: the worker must keep waiting, not exit
        assert thread.is_alive()
        cursor.execute("SET GLOBAL read_only = 0")
    done = "SELECT COUNT(*) FROM user_block_status WHERE check_count = 1"
    wait_for(lambda: scalar(sql, done) == 30, 20, "every row written once the server takes writes")
    worker.stop()
    thread.join(15)
    assert not thread.is_alive()
    assert caplog.text.count("mysql refuses writes") == 1, caplog.text
    keys = Keys(settings.deployment.key_prefix)
    assert rds.hlen(keys.reclaims) == 0  # nobody died: nothing counted toward quarantine


# -- 2. a batch check that mutates its list ------------------------------------------------------
def sorts_its_ids_descending_and_answers_by_id(ids: list[int]) -> dict:
    ids.sort(reverse=True)
    return {i: f"result for {i}" for i in ids}


def sorts_its_ids_and_answers_in_that_order(ids: list[int]) -> list:
    ids.sort(reverse=True)
    return [f"result for {i}" for i in ids]


@pytest.mark.parametrize(
    "check", [sorts_its_ids_descending_and_answers_by_id, sorts_its_ids_and_answers_in_that_order]
)
def test_a_check_that_reorders_its_ids_still_writes_each_result_to_its_own_row(
    make_worker, settings, sql, check
):
    seed_rows(settings, 20, due_now=True)
    dispatch_all(settings)
    make_worker(settings, check).lane(settings.name).poll()
    for row_id, status in query(sql, "SELECT user_id, status FROM user_block_status"):
        assert status == f"result for {row_id}"


def test_a_check_that_changes_the_length_of_its_list_fails_its_batch_clearly(make_worker, settings, sql):
    def drops_one(ids):
        ids.pop()
        return ["ok"] * len(ids)

    seed_rows(settings, 5, due_now=True)
    dispatch_all(settings)
    make_worker(settings, drops_one).lane(settings.name).poll()
    errors = {row[0] for row in query(sql, "SELECT last_error FROM user_block_status")}
    assert len(errors) == 1 and "changed the ids list it was given" in errors.pop()


# -- 5. a recheck the application forces while the row is in flight ------------------------------
def test_a_row_forced_due_while_in_flight_is_checked_within_the_sweep_bound(make_worker, settings, sql, rds):
    query(
        sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (1, NOW(3) - INTERVAL 5 SECOND)"
    )
    dispatcher = make_dispatcher(settings)
    dispatcher.poll()
    worker = make_worker(settings, checks.ok)
    held = worker.lane(settings.name).intake.take(10)
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) - INTERVAL 4 SECOND WHERE user_id = 1")
    dispatcher.poll()  # reads the forced row while it is in flight: skipped, the cursor rests on it
    worker.lane(settings.name).batch.process(held)  # its write is fenced out (the due time moved): stale
    assert worker.lane(settings.name).counters.stale == 1
    sweeper = Sweeper(settings, make_pusher(settings), dispatcher_cursor=lambda: dispatcher.cursor)
    assert sweeper.run_once() == 1  # the forced cycle is found again
    worker.lane(settings.name).poll()
    assert query(sql, ROW, (1,))[0][1] == 1


# -- 6. a lost connection between the write-back and the lateness clock -------------------------
def test_a_connection_lost_after_the_write_still_acknowledges_the_batch(make_worker, settings, sql, rds):
    seed_rows(settings, 10, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.ok)
    writeback = worker.lane(settings.name).completer.writeback
    real_write = writeback.write

    def write_then_lose_the_connection(*args, **kwargs):
        written = real_write(*args, **kwargs)
        writeback.clock_read_at = -1e9  # the clock is due for a reading...
        with sql.cursor() as cursor:  # ...and the worker's connection is killed right now
            cursor.execute("KILL %s", (writeback.db.conn.thread_id(),))
        return written

    writeback.write = write_then_lose_the_connection
    worker.lane(settings.name).poll()
    keys = Keys(settings.deployment.key_prefix)
    assert rds.hlen(keys.inflight) == 0 and rds.scard(keys.processing(worker.id)) == 0
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 1") == 10


# -- 6b. two threads on one connection ----------------------------------------------------------
INSERT_ROW = "INSERT INTO user_block_status (user_id, status) VALUES (%s, %s)"


def test_a_statement_from_another_thread_waits_for_a_transaction_and_never_joins_it(settings, sql):
    """A per-row worker writes back in a thread while its loop, after an outage, probes MySQL in
    another, on the same connection. Sharing it at once, the probe ran inside the write-back's
    transaction and each read the other's replies: the change feed lost a row's transitions (1 run
    in 10 of test_change_feed's kill -9 test). A statement waits while another thread's
    transaction runs, so the one commits or rolls back without the other."""
    db = Database(settings)
    inside, other_done = threading.Event(), threading.Event()

    def other_thread() -> None:
        inside.wait(5)
        db.execute(INSERT_ROW, (2, "autocommit"))  # one statement of its own: never rolled back
        other_done.set()

    def write_back(cursor) -> None:
        cursor.execute(INSERT_ROW, (1, "rolled back"))
        inside.set()
        other_done.wait(0.5)  # a shared connection runs the other statement now, inside this transaction
        cursor.execute("SELECT * FROM no_such_table")  # the write-back fails: all of it rolls back

    thread = threading.Thread(target=other_thread)
    thread.start()
    try:
        with pytest.raises(pymysql.err.ProgrammingError):
            db.run_in_transaction(write_back)
        thread.join(5)
        assert other_done.is_set()
        assert query(sql, "SELECT user_id, status FROM user_block_status WHERE user_id IN (1, 2)") == (
            (2, "autocommit"),
        )
    finally:
        db.close()


def test_an_exception_inside_a_transaction_leaves_nothing_open_for_the_next_statement(settings, sql):
    """A Python error between two statements of a transaction (a bug in the work, an interrupt)
    used to leave it open on the connection: the next autocommit statement joined it and was
    never committed."""
    db = Database(settings)

    def work(cursor) -> None:
        cursor.execute(INSERT_ROW, (1, "never"))
        raise ValueError("a bug between two statements")

    try:
        with pytest.raises(ValueError):
            db.run_in_transaction(work)
        db.execute(INSERT_ROW, (2, "next"))
        assert query(sql, "SELECT user_id FROM user_block_status WHERE user_id IN (1, 2)") == ((2,),)
    finally:
        db.close()


# -- 7. per-row sync checks that hang ----------------------------------------------------------
def test_hanging_per_row_checks_do_not_starve_the_other_rows(make_worker, make_settings, sql, monkeypatch):
    monkeypatch.setattr(checks, "SLEEP", 60)
    settings = make_settings(concurrency=2, worker_batch=2, check_timeout=0.5)
    seed_rows(settings, 12, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.first_two_hang_sync, start=False)
    thread = run_in_thread(worker)
    done = "SELECT COUNT(*) FROM user_block_status WHERE check_count = 1"
    wait_for(lambda: scalar(sql, done) == 10, 15, "the ten other rows to be checked")
    hung = query(sql, "SELECT last_error FROM user_block_status WHERE user_id IN (1, 2)")
    assert all("TimeoutError" in error for (error,) in hung)
    worker.stop()
    thread.join(10)


# -- 8. per-row acknowledgements after a pause past the heartbeat ------------------------------
def test_a_per_row_acknowledgement_releases_only_what_it_still_holds(make_worker, settings, rds):
    seed_rows(settings, 6, due_now=True)
    dispatch_all(settings)
    keys = Keys(settings.deployment.key_prefix)
    worker = make_worker(settings, checks.slow_row)  # an async check: the per-row loop
    held = worker.lane(settings.name).intake.take(
        3
    )  # in progress when the worker is paused past its heartbeat
    rds.delete(keys.processing(worker.id))  # reclaimed meanwhile: given to someone else
    newer = worker.lane(settings.name).intake.take(
        3
    )  # on waking it takes three more: its set holds only these
    worker.lane(settings.name).completer.acknowledge(
        held, [], Written(3, 0, 0), 0
    )  # then finishes the old three
    assert rds.scard(keys.processing(worker.id)) == 3  # the newer entries are still held
    assert all(rds.hexists(keys.inflight, e.split(b":")[0]) for e in held + newer)  # nothing released


# -- 9, 10. unusual columns and keys -----------------------------------------------------------
def test_a_due_column_finer_than_milliseconds_is_refused_with_the_fix(settings, sql):
    query(
        sql, "CREATE TABLE precise (id BIGINT UNSIGNED PRIMARY KEY, due DATETIME(6) NOT NULL, KEY (due, id))"
    )
    env = {"RECHECK_TABLE": "precise", "RECHECK_ID_COLUMN": "id", "RECHECK_DUE_COLUMN": "due"}
    result = recheck("init-db", "--apply", settings=settings, env=env)
    assert result.returncode == 1
    assert "DATETIME(6)" in result.stdout and "MODIFY COLUMN `due` DATETIME(3) NOT NULL" in result.stdout


def test_negative_ids_of_a_signed_key_are_checked(make_worker, settings, sql, rds):
    query(sql, "ALTER TABLE user_block_status MODIFY user_id BIGINT NOT NULL")
    ids = (-(2**63), -5, 0, 2**63 - 1)  # the whole signed range
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES " + ", ".join(
        f"({i}, NOW(3))" for i in ids))  # fmt: skip
    assert dispatch_all(settings) == 4
    worker = make_worker(settings, checks.ok)
    drain(worker, rds, settings)
    assert worker.lane(settings.name).counters.malformed == 0
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 1") == 4
    assert rds.hlen(Keys(settings.deployment.key_prefix).inflight) == 0


# -- 11. any value a check returns ends as a result or as that row's failure --------------------
def odd_values(ids: list[int]) -> list:
    huge = 10**5000  # str() refuses integers of more than 4,300 digits
    values = {1: "lone \ud800 surrogate", 2: huge, 3: "fine", 4: "ok 🎉", 5: "x\x00y"}
    return [values[i] for i in ids]


def test_odd_results_are_stored_or_fail_their_own_row_never_the_worker(make_worker, settings, sql):
    seed_rows(settings, 5, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, odd_values)
    worker.lane(settings.name).poll()
    rows = {r[0]: r[1:] for r in query(sql, "SELECT user_id, status, check_count, fail_count, last_error "
                                            "FROM user_block_status")}  # fmt: skip
    assert rows[1][1] == 1 and "surrogate" in rows[1][0]  # stored, the lone surrogate replaced
    assert rows[2][1:3] == (0, 1) and "could not be stored as text" in rows[2][3]
    assert rows[3][:2] == ("fine", 1)
    assert rows[4][:2] == ("ok 🎉", 1)
    assert rows[5][1] == 1
    assert worker.fatal is None


def test_a_result_its_column_refuses_fails_that_row_and_the_rest_are_written(make_worker, settings, sql):
    query(sql, "ALTER TABLE user_block_status MODIFY status ENUM('ok', 'blocked') NULL")
    seed_rows(settings, 6, due_now=True)
    dispatch_all(settings)

    def mostly_ok(ids):
        return ["surprise" if i == 4 else "ok" for i in ids]

    make_worker(settings, mostly_ok).lane(settings.name).poll()
    rows = {r[0]: r[1:] for r in query(sql, "SELECT user_id, status, check_count, fail_count, last_error "
                                            "FROM user_block_status")}  # fmt: skip
    assert all(rows[i][:2] == ("ok", 1) for i in (1, 2, 3, 5, 6)), rows
    assert rows[4][1:3] == (0, 1) and "1265" in rows[4][3], rows[4]


# -- 12, 13. secrets in URLs, and the character set of a created table ---------------------------
@pytest.mark.parametrize(
    "url",
    [
        "redis://cache:6379/0?password=hunter2",
        "redis://user@cache:6379/0?password=hunter2&ssl_ca_certs=/ca.pem",
        "rediss://:hunter2@cache:6380/0",
        "unix:///run/redis.sock?db=0&password=hunter2",
    ],
)
def test_no_secret_survives_redaction_wherever_it_is_in_the_url(url):
    shown = redact_url(url)
    assert "hunter2" not in shown and "***" in shown


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter#2@cache:6379/0",  # '#', '/', '?' or '@' unencoded: the rest shifts
        "mysql://app:hun/ter2@db:3306/app",
        "mysql://app:hun?ter2@db:3306/app",
        "rediss://user:hunter2#@cache:6380/0",
    ],
)
def test_a_url_that_cannot_be_split_for_sure_is_redacted_whole(url):
    shown = redact_url(url)
    assert "hun" not in shown and "ter2" not in shown and "***" in shown


def test_status_json_never_shows_a_password_given_as_a_query_parameter(settings, redis_server):
    redis_server.client().config_set("requirepass", "hunter2")
    try:
        url = f"redis://127.0.0.1:{redis_server.port}/0?password=hunter2"
        result = recheck("status", "--json", settings=settings, env={"RECHECK_REDIS_URL": url})
        assert result.returncode == 0, result.stderr
        assert "hunter2" not in result.stdout and "hunter2" not in result.stderr
        assert only_workload(result.stdout)["redis"].endswith("password=***")
    finally:
        redis.Redis(host="127.0.0.1", port=redis_server.port, password="hunter2").config_set(
            "requirepass", ""
        )


def test_a_created_table_stores_emoji(make_settings, sql):
    query(sql, "DROP TABLE user_block_status")  # the test server's own default is latin1
    settings = make_settings()  # init-db creates it again
    charset = scalar(
        sql,
        "SELECT C.CHARACTER_SET_NAME FROM information_schema.TABLES T JOIN "
        "information_schema.COLLATION_CHARACTER_SET_APPLICABILITY C ON C.COLLATION_NAME = T.TABLE_COLLATION "
        "WHERE T.TABLE_SCHEMA = DATABASE() AND T.TABLE_NAME = 'user_block_status'",
    )
    assert charset == "utf8mb4"
    db = Database(settings)
    db.execute("INSERT INTO user_block_status (user_id, status) VALUES (1, '🎉')")
    assert db.scalar("SELECT status FROM user_block_status WHERE user_id = 1") == "🎉"
    db.close()
