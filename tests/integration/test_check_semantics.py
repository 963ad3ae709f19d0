"""Check semantics for real recheck workloads (issue 23): row data in the check, failures on the
row's own rhythm, an honest freshness verdict (slow checks in flight are not late), jitter.

Each failed on the code before: a check got ids only (and had to open its own connection and
read its row), a failed 60 s monitor was probed 7 times in 2 minutes on the retry backoff,
`status` called slow checks in flight "workers are behind", and rows that came due together
stayed bunched.
"""

from __future__ import annotations

import contextlib
import time
import zlib
from types import MappingProxyType

import pytest

from recheck.commands.init_db import init_db
from recheck.shared.mysql.db import Database
from recheck.shared.views.status import gather
from tests.support import checks
from tests.support.helpers import (
    dispatch_all,
    drain,
    make_store,
    next_in,
    only_workload,
    prepare,
    query,
    recheck,
    run_in_thread,
    scalar,
    seed_rows,
    workload,
)
from tests.support.servers import wait_for

MONITORS = "CREATE TABLE monitors (id CHAR(36) PRIMARY KEY, url VARCHAR(200) NOT NULL, every_s INT NULL)"
ROWS = "('a', 'http://a.example/', 2), ('b', 'http://b.example/', 6), ('c', 'http://c.example/', NULL)"


def monitors(settings, **values):
    """An uptime monitor's table: CHAR(36) keys, its own url and per-monitor interval columns."""
    return workload(settings, "monitors", table="monitors", id_column="id", interval=60,
                    interval_column="every_s", **values)  # fmt: skip


def run_until(worker, sql, condition: str, count: int, timeout: float = 10) -> None:
    """Run a (per-row) worker in a thread until `condition` holds for `count` rows, then stop it."""
    thread = run_in_thread(worker)
    wait_for(
        lambda: scalar(sql, f"SELECT COUNT(*) FROM monitors WHERE {condition}") >= count, timeout, condition
    )
    worker.stop()
    thread.join(10)


# -- 1. the check gets what it needs in one read ----------------------------------------------
def test_a_per_row_check_gets_its_row_and_a_deleted_row_is_not_checked(settings, make_worker, sql):
    urls = monitors(settings, columns="url, every_s")
    prepare(urls, MONITORS, f"INSERT INTO monitors (id, url, every_s) VALUES {ROWS}")
    seen = []

    async def probe(row) -> str:
        seen.append(row)
        with contextlib.suppress(TypeError):  # read-only: it cannot change what anyone else reads
            row["url"] = "elsewhere"
        return f"{row['id']} {row['url']} {row['every_s']}"

    worker = make_worker(urls, probe, start=False)
    dispatch_all(urls)
    query(sql, "DELETE FROM monitors WHERE id = 'c'")  # deleted between its dispatch and the read
    run_until(worker, sql, "check_count = 1", 2)
    assert all(isinstance(row, MappingProxyType) and set(row) == {"id", "url", "every_s"} for row in seen)
    assert dict(query(sql, "SELECT id, status FROM monitors")) == {"a": "a http://a.example/ 2",
                                                                   "b": "b http://b.example/ 6"}  # fmt: skip
    counters = make_store(urls).overview().counters
    assert counters.get("gone") == 1, counters  # the deleted row: counted, never checked or written
    assert counters.get("checked") == 2 and make_store(urls).overview().in_flight == 0


def test_a_batch_check_gets_rows_in_one_statement_and_may_answer_by_id(settings, make_worker, sql):
    urls = monitors(settings, columns=["url"], check_kind="batch")
    prepare(urls, MONITORS, "INSERT INTO monitors (id, url) VALUES " + ", ".join(
        f"('m{i:03d}', 'http://m{i}.example/')" for i in range(300)))  # fmt: skip
    calls = []

    def probe(rows):
        calls.append(len(rows))
        rows.sort(key=lambda row: row["url"], reverse=True)  # its own copy: harmless
        return {row["id"]: row["url"].removeprefix("http://") for row in rows}

    worker = make_worker(urls, probe)
    reads = "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_SELECT'"
    worker.lane(urls.name).batch.reader.keys  # noqa: B018 (the id column's type, read once at the first take)
    reader = worker.lane(urls.name).batch.reader.db
    before = int(reader.scalar(reads))
    drain(worker, urls)
    assert int(reader.scalar(reads)) - before - 1 == 1  # one statement read every row of the take
    assert calls == [300]
    assert scalar(sql, "SELECT COUNT(*) FROM monitors WHERE status = CONCAT(SUBSTRING(url, 8))") == 300


# -- 2. a failure keeps the row's rhythm -------------------------------------------------------
@pytest.mark.parametrize("retry", ["interval", "backoff"])
def test_a_failed_row_is_due_again_within_its_own_interval(settings, make_worker, sql, retry):
    urls = monitors(settings, retry=retry, retry_base=0.5, retry_max=300, min_interval=1)
    prepare(urls, MONITORS, f"INSERT INTO monitors (id, url, every_s) VALUES {ROWS}")

    def down(rows):
        return [ConnectionError("refused")] * len(rows)

    drain(make_worker(urls, down), urls)
    gap = next_in(sql, "monitors", "id")  # from the attempt (checked_at is set on a failure too)
    every = {"a": 2.0, "b": 6.0, "c": 60.0}
    jitter = urls.jitter
    for key, seconds in gap.items():
        if retry == "interval":  # exactly its own interval, up to `jitter` of it earlier
            assert every[key] * (1 - jitter) - 0.01 <= seconds <= every[key], (key, seconds)
        else:  # retry_base first (0.5 s), never later than its interval
            assert 0.49 <= seconds <= 0.51, (key, seconds)
    assert scalar(sql, "SELECT COUNT(*) FROM monitors WHERE fail_count = 1 AND checked_at IS NOT NULL") == 3


def test_a_recovered_target_shows_up_within_its_interval(settings, make_worker, sql):
    urls = monitors(settings, jitter=0)
    prepare(urls, MONITORS, f"INSERT INTO monitors (id, url, every_s) VALUES {ROWS}")
    drain(make_worker(urls, lambda rows: [TimeoutError("no answer")] * len(rows)), urls)
    query(sql, "UPDATE monitors SET next_check_at = NOW(3) WHERE id = 'a'")  # its 2 s are up
    drain(make_worker(urls, lambda rows: ["up"] * len(rows)), urls)
    assert query(sql, "SELECT status, fail_count, last_error FROM monitors WHERE id = 'a'")[0] == (
        "up",
        0,
        None,
    )


# -- 3. an honest verdict ------------------------------------------------------------------------
@pytest.mark.serial  # timing: serial layer (make test)
def test_slow_checks_in_flight_are_being_checked_not_late(make_settings, sql, procs):
    """Rows whose check takes 3 s on a 1 s rhythm are past due while in flight: fresh, with the
    rows in flight said apart (before: NOT FRESH, "workers are behind", exit 3)."""
    settings = make_settings(interval=1.0, concurrency=50, check_timeout=10, jitter=0)
    seed_rows(settings, 20, due_now=True)
    env = {"RECHECK_CHECK": "tests.support.checks:slow_row", "TEST_CHECK_SLEEP": "3"}
    procs.start("dispatcher", settings)
    procs.start("worker", settings, env=env)
    wait_for(lambda: scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count >= 1") == 20, 15,
             "a first round of slow checks")  # fmt: skip
    # Up to 30 s of asking: each `recheck status` is a process start (about 1.5 s of CPU on the
    # slowest VM yet), and only part of each 4 s cycle has 5 rows past due in flight; 10 s of
    # asking beside another test ran out there (2026-12-01).
    facts = wait_for(lambda: (f := only_workload(recheck("status", "--json", settings=settings).stdout))
                     and f["overdue_in_flight"] >= 5 and f, 30, "rows past due in flight")  # fmt: skip
    assert facts["fresh"] and facts["overdue_waiting"] == 0, facts["overdue_waiting"]
    # The text view, at a moment with rows past due in flight (each 3 s check leaves about 1 s
    # with none): fresh every time it is asked, never "workers are behind".
    deadline = time.monotonic() + 30
    while True:
        text = recheck("status", settings=settings)
        assert text.returncode == 0 and "workers are behind" not in text.stdout, text.stdout
        if "being checked (slow checks, in flight)" in text.stdout:
            break
        assert time.monotonic() < deadline, text.stdout


def test_rows_just_taken_are_in_flight_for_status_before_the_next_full_heartbeat(make_settings, sql, procs):
    """Workers tell status which rows they hold in their heartbeats. A row taken just after a beat
    must not pass 1 s overdue unreported (counted as waiting: NOT FRESH): a lane that took rows
    beats again at once. Heartbeats 10 s apart here, so only that early beat can tell; each check
    takes 8 s, so the rows stay in flight and overdue for about 7 s: a `recheck status` slow to
    start on a loaded machine still lands in that window (with 4 s checks one CI run missed it)."""
    beats = {"heartbeat_interval": 10.0, "heartbeat_ttl": 30.0, "leader_ttl": 30.0}
    settings = make_settings(**beats, concurrency=50, interval=60)
    worker = procs.start("worker", settings, env={"RECHECK_CHECK": "tests.support.checks:slow_row",
                                                  "TEST_CHECK_SLEEP": "8"})  # fmt: skip
    wait_for(lambda: " started: " in procs.log_of(worker), 20, "the worker serving (its first beat sent)")
    # The dispatcher leading before the rows fall due: rows it has not pushed yet really wait (in
    # CI, a dispatcher still starting on a loaded machine let them pass 1 s overdue unpushed).
    dispatcher = procs.start("dispatcher", settings)
    wait_for(lambda: "is now the leader" in procs.log_of(dispatcher), 20, "the dispatcher leading")
    seed_rows(settings, 20, due_now=True)
    facts = wait_for(lambda: (f := only_workload(recheck("status", "--json", settings=settings).stdout))
                     and f["overdue_1s"] >= 20 and f, 20, "the rows past 1 s overdue, in flight")  # fmt: skip
    assert facts["overdue_waiting"] == 0 and facts["overdue_in_flight"] == 20, facts
    assert facts["fresh"]


def test_checks_running_past_their_timeout_are_told_apart(make_settings, sql, procs):
    """A plain (thread) check that outlives its timeout cannot be interrupted: its row fails and
    its thread runs on. status counts those apart from rows in flight, and stays fresh."""
    settings = make_settings(concurrency=10, check_timeout=1.0, interval=60, failing_threshold=0.5)
    seed_rows(settings, 12, due_now=True)
    env = {"RECHECK_CHECK": "tests.support.checks:first_two_hang_sync", "TEST_CHECK_SLEEP": "30"}
    procs.start("dispatcher", settings)
    procs.start("worker", settings, env=env)
    failed = "SELECT COUNT(*) FROM user_block_status WHERE last_error LIKE 'TimeoutError%'"
    wait_for(lambda: scalar(sql, failed) == 2, 15, "the two hung rows to fail")
    facts = wait_for(lambda: (f := only_workload(recheck("status", "--json", settings=settings).stdout))
                     and f["checks_past_timeout"] == 2 and f, 10, "the abandoned checks counted")  # fmt: skip
    assert facts["fresh"] and facts["overdue_waiting"] == 0
    text = recheck("status", settings=settings)
    assert text.returncode == 0, text.stdout
    assert "2 checks ran past their timeout and were abandoned" in text.stdout, text.stdout


def test_a_workload_says_which_share_of_failing_checks_is_normal(make_settings, make_worker):
    lenient = make_settings(failing_threshold=0.6)
    seed_rows(lenient, 40, due_now=True)
    dispatch_all(lenient)
    worker = make_worker(lenient, checks.odd_fails)  # half of the checks fail
    worker.lane(lenient.name).poll()
    worker.beat()
    facts = gather(lenient, Database(lenient), make_store(lenient))
    assert facts.recent_failed == 20 and not facts.checks_failing and facts.fresh
    strict = lenient.evolve(failing_threshold=0.1)
    assert gather(strict, Database(strict), make_store(strict)).checks_failing


# -- 4. rhythm after a stop --------------------------------------------------------------------
def test_jitter_spreads_rows_that_came_due_together(make_settings, make_worker, sql):
    settings = make_settings(interval=10.0)
    seed_rows(settings, 1000, due_now=True)  # a bunch: every row due at once
    drain(make_worker(settings, checks.ok), settings)
    gap = "TIMESTAMPDIFF(MICROSECOND, checked_at, next_check_at) / 1e6"
    gaps = [float(g) for (g,) in query(sql, f"SELECT {gap} FROM user_block_status")]
    assert min(gaps) >= 9.5 - 0.01 and max(gaps) <= 10.0  # never later than the interval
    assert max(gaps) - min(gaps) > 0.4  # spread over most of the 5 % (0.5 s)


@pytest.mark.parametrize("ok", [True, False], ids=["success", "failure"])
def test_a_row_gets_the_same_jitter_from_the_worker_or_the_sql(make_settings, make_worker, sql, ok):
    """A success's jitter is computed by the worker (cheaper than a hash per row in MySQL), a
    failure's by the SQL: one rule, one of 8 steps (0, 1/7 ... 1) by CRC32("key:due_ms") in both."""
    settings = make_settings(interval=10.0, jitter=0.5)  # a wide jitter: any difference shows
    seed_rows(settings, 50, due_now=True)
    dispatched = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', next_check_at) DIV 1000"
    due_ms = {key: int(ms) for key, ms in query(sql, f"SELECT user_id, {dispatched} FROM user_block_status")}
    drain(make_worker(settings, checks.ok if ok else checks.always_raises), settings)
    gap = "TIMESTAMPDIFF(MICROSECOND, checked_at, next_check_at)"
    for key, got in query(sql, f"SELECT user_id, {gap} FROM user_block_status"):
        share = (zlib.crc32(f"{key}:{due_ms[key]}".encode()) >> 29) / 7  # one of 8 steps (JITTER_RUNS)
        assert abs(got - 10_000_000 * (1 - 0.5 * share)) <= 1000, (key, got)  # NOW(3): ms precision


def test_init_db_spreads_each_row_over_its_own_interval(settings, sql):
    urls = monitors(settings)
    rows = ", ".join(f"('m{i}', 4)" for i in range(200))
    prepare(urls, "CREATE TABLE monitors (id CHAR(36) PRIMARY KEY, every_s INT NULL)",
            f"INSERT INTO monitors (id, every_s) VALUES {rows}")  # fmt: skip
    query(sql, "ALTER TABLE monitors DROP INDEX recheck_due, DROP COLUMN next_check_at")  # as before init-db
    assert init_db(urls, apply=True, say=lambda _: None) == 0
    due_in = "TIMESTAMPDIFF(MICROSECOND, NOW(3), next_check_at) / 1e6"
    spread = [float(s) for (s,) in query(sql, f"SELECT {due_in} FROM monitors")]
    assert max(spread) <= 4.0 and max(spread) > 3.0  # over its own 4 s, not the workload's 60 s


# -- the check's own settings -----------------------------------------------------------------
def test_a_checks_own_settings_in_dotenv_reach_it(settings, sql, tmp_path):
    (tmp_path / ".env").write_text("PROBE_TOKEN=from-dotenv\n")
    seed_rows(settings, 20, due_now=True)
    env = {"RECHECK_CHECK": "tests.support.checks:token"}
    # --duration counts from when both processes are up: a loaded CI run took over 8 s to start them
    result = recheck("run", "--workers", "1", "--duration", "8", settings=settings, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert {row[0] for row in query(sql, "SELECT DISTINCT status FROM user_block_status")} == {"from-dotenv"}
