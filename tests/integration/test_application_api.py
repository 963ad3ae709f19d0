"""The application's side (issue 24): check a row now, pause and resume it, the same in plain SQL
from the application's own transaction, and on the command line.

Real dispatcher and worker processes, real MariaDB and Redis. On the code before, none of this
existed: a due time of 9999-12-31 showed a paused monitor as quarantined, NOW(3) written from
the application's session time zone made a row due hours late, and a row made due while in
flight waited for the sweep.
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from recheck import Client
from recheck.shared.mysql.db import Database
from tests.support.helpers import (
    docs_text,
    fresh_status,
    make_dispatcher,
    make_store,
    prepare,
    query,
    recheck,
    scalar,
    seed_rows,
    workload,
)
from tests.support.servers import wait_for

MONITORS = "CREATE TABLE monitors (id BIGINT PRIMARY KEY, url VARCHAR(200) NOT NULL)"


def monitors(settings, **values):
    return workload(settings, "monitors", table="monitors", id_column="id", columns="url", **values)


def counts(sql, table: str = "user_block_status", key: str = "user_id") -> dict:
    return {int(k): int(n) for k, n in query(sql, f"SELECT `{key}`, check_count FROM `{table}`")}


def counts_of(sql, ids: list[int]) -> dict:
    """check_count of these rows only: a timed wait must not read the whole table at each poll."""
    listed = ", ".join(str(int(i)) for i in ids)
    found = query(sql, f"SELECT user_id, check_count FROM user_block_status WHERE user_id IN ({listed})")
    return {int(k): int(n) for k, n in found}


def state(client: Client, row_id) -> str:
    return client.state(row_id)["state"]


def start(procs, settings, check: str = "tests.support.checks:ok", **env) -> None:
    """A dispatcher and a worker, both started (their start is not part of a test's bounds)."""
    for process in (
        procs.start("dispatcher", settings),
        procs.start("worker", settings, env={"RECHECK_CHECK": check, **env}),
    ):
        procs.wait_started(process)


# -- now ----------------------------------------------------------------------------------------
def test_now_checks_a_row_due_in_an_hour_at_once_and_one_in_flight_right_after(make_settings, sql, procs):
    # The sweep waits 30 s: only `now` itself can explain a check within seconds.
    settings = make_settings(interval=3600, sweep_grace=30, check_kind="batch", worker_batch=1)
    seed_rows(settings, 20)
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) + INTERVAL 1 HOUR")
    start(procs, settings, check="tests.support.checks:slow", TEST_CHECK_SLEEP="1.5")
    client = Client(settings=settings)
    time.sleep(1.0)  # everything running, nothing due
    assert sum(counts(sql).values()) == 0

    # Bounds: far below the sweep's 30 s, loose enough for a loaded machine (CI ran this beside
    # three other test processes on two cores and once needed 3.0 s for a 1.5 s check).
    asked = time.monotonic()
    acted = client.now([5])
    assert acted.done == [5] and acted.ok
    wait_for(lambda: counts(sql)[5] == 1, 10, "row 5 checked (a 1.5 s check)")
    assert time.monotonic() - asked < 1.5 + 6, "checked within a poll, not after the sweep's 30 s"

    # A row in flight: the check running now was dispatched before the row was edited, so its
    # write is fenced out and the row is checked again the moment that check lets go.
    client.now([6])
    wait_for(lambda: state(client, 6) == "in_flight", 3, "row 6 in flight")
    again = time.monotonic()
    client.now([6])
    wait_for(lambda: counts(sql)[6] == 1, 15, "row 6 checked again right after")
    took = time.monotonic() - again
    checked_after = scalar(sql, "SELECT TIMESTAMPDIFF(MICROSECOND, NOW(3), checked_at) / 1e6 "
                                "FROM user_block_status WHERE user_id = 6")  # fmt: skip
    assert took < 2 * 1.5 + 6, took  # not the sweep (30 s) nor the interval (an hour)
    assert float(checked_after) > -took  # the write that counted came after the second `now`

    # Paused and quarantined rows are left alone by `now`; ids the table lacks are named.
    query(sql, "UPDATE user_block_status SET next_check_at = '9999-12-31' WHERE user_id = 8")
    client.pause([7])
    acted = client.now([7, 8, 404])
    assert acted.done == [] and sorted(acted.skipped) == [7, 8] and acted.missing == [404]
    client.close()


@pytest.mark.serial  # a latency target (2 s): measured alone, not beside three other test processes
def test_now_jumps_a_backlog_and_pause_drops_a_queued_row_before_its_check_is_called(
    make_settings, sql, procs, tmp_path
):
    """Issue 35: under a backlog `now` used to wait behind the row's own queued entry (23-58 s in
    a user's trial; here row 50,000 of a 60,000-entry queue drained at 5,000/s: about 10 s), and
    a paused row already queued was still checked when its entry came up."""
    settings = make_settings(interval=3600, high_water=60_000, rate_limit=5000, check_kind="batch")
    seed_rows(settings, 70_000)
    # Due one after another over the past hour, in id order: the queue holds them in id order.
    query(sql, "UPDATE user_block_status SET next_check_at = "
               "NOW(3) - INTERVAL 1 HOUR + INTERVAL user_id * 1000 MICROSECOND")  # fmt: skip
    store = make_store(settings)
    procs.start("dispatcher", settings)
    wait_for(lambda: store.queue_depth() >= 59_000, 20, "the queue filled to high water")
    procs.start("worker", settings, env={"RECHECK_CHECK": "tests.support.checks:ok",
                                         "TEST_CHECK_RECORD": str(tmp_path)})  # fmt: skip
    wait_for(lambda: scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count > 0") > 0,
             15, "the backlog draining")  # fmt: skip
    client = Client(settings=settings)
    behind, not_queued, paused = 50_000, 65_000, 10_000  # queued behind ~50,000; not queued at all
    assert state(client, behind) == "queued" and state(client, not_queued) == "overdue"

    asked = time.monotonic()
    assert client.pause([paused]).done == [paused]
    assert client.now([behind, not_queued]).done == [behind, not_queued]
    asked_rows = [behind, not_queued]
    wait_for(lambda: counts_of(sql, asked_rows) == dict.fromkeys(asked_rows, 1), 10, "asked rows checked")
    took = time.monotonic() - asked
    print(f"`now` behind a backlog of 50,000: both rows checked {took:.2f} s after the call")
    assert took < 2.0, f"checked {took:.1f} s after `now`, behind a backlog"
    assert store.queue_depth() <= 60_000 + 4_000  # high water plus the asked ids' slack

    # The backlog goes on past the paused row and the asked row's old entry: neither is called.
    wait_for(
        lambda: counts_of(sql, [behind + 500]) == {behind + 500: 1},
        45,
        "the backlog past the asked row's old entry",
    )
    calls = Counter(int(line) for path in tmp_path.glob("*.ids") for line in path.read_text().split())
    assert calls[paused] == 0 and state(client, paused) == "paused"
    assert calls[behind] == 1 and calls[not_queued] == 1, "the superseded entries were dropped"
    assert calls[paused - 1] == 1 and calls[paused + 1] == 1
    # Resumed (due now), it goes first too, even when the page dispatcher queued it at the tail
    # before the asked ids were read (it is moved to the head).
    resumed = time.monotonic()
    assert client.resume([paused]).done == [paused]
    wait_for(lambda: counts_of(sql, [paused]) == {paused: 1}, 10, "the resumed row checked")
    assert time.monotonic() - resumed < 2.0, "the resumed row waited behind the backlog"
    client.close()


# -- pause and resume ------------------------------------------------------------------------------
def test_pause_survives_a_redis_flush_and_a_dispatcher_restart_and_shows_as_paused(
    make_settings, sql, procs, redis_server
):
    settings = make_settings(interval=1.0)
    seed_rows(settings, 30, due_now=True)
    dispatcher = procs.start("dispatcher", settings)
    procs.start("worker", settings, env={"RECHECK_CHECK": "tests.support.checks:ok"})
    wait_for(lambda: min(counts(sql).values()) >= 1, 10, "every row checked once")

    paused = recheck("pause", "1", "2", "3", "404", settings=settings)
    assert paused.returncode == 1, paused.stdout + paused.stderr
    assert "paused: 1, 2, 3" in paused.stdout and "no such row: 404" in paused.stderr
    before = counts(sql)

    redis_server.client().flushall()  # Redis loses everything...
    dispatcher.send_signal(signal.SIGKILL)  # ...and the dispatcher is killed and started again
    dispatcher.wait(10)
    procs.start("dispatcher", settings)
    # Three more rounds of the other rows: the paused ones would have been checked by then.
    wait_for(lambda: all(counts(sql)[i] >= before[i] + 3 for i in range(4, 31)), 20, "three more rounds",
             interval=0.2)  # fmt: skip
    after = counts(sql)
    assert all(after[i] == before[i] for i in (1, 2, 3)), (before, after)
    assert all(after[i] > before[i] for i in range(4, 31)), "the other rows went on"

    (status,) = fresh_status(settings, {})["workloads"].values()  # paused rows are not overdue
    assert status["paused"] == 3 and status["quarantined"] == 0 and status["overdue_waiting"] == 0
    assert "paused 3" in recheck("status", settings=settings).stdout
    story = recheck("inspect", "2", settings=settings).stdout
    assert "paused: not checked until resumed" in story and "quarantined" not in story
    assert "recheck resume 2" in story

    resumed = recheck("resume", "1", "2", "5", settings=settings)
    assert resumed.returncode == 0 and "resumed, due now: 1, 2" in resumed.stdout
    assert "left alone (not paused): 5" in resumed.stdout
    wait_for(lambda: all(counts(sql)[i] > before[i] for i in (1, 2)), 2.5, "resumed rows checked at once")
    assert counts(sql)[3] == before[3]


def test_a_row_paused_while_in_flight_gets_no_write_that_undoes_the_pause(make_settings, sql, procs):
    settings = make_settings(interval=1.0, check_kind="batch", worker_batch=1)
    seed_rows(settings, 3, due_now=True)
    start(procs, settings, check="tests.support.checks:slow", TEST_CHECK_SLEEP="1.0")
    client = Client(settings=settings)
    wait_for(lambda: state(client, 2) == "in_flight", 10, "row 2 in flight")
    checks = counts(sql)[2]
    client.pause([2])
    time.sleep(3.5)
    assert counts(sql)[2] <= checks + 1  # at most that one write (here: fenced out, none)
    assert state(client, 2) == "paused"
    due = scalar(sql, "SELECT next_check_at FROM user_block_status WHERE user_id = 2")
    assert str(due).startswith("9999-12-30"), due
    client.close()


def test_paused_rows_cost_nothing_per_poll(make_settings, sql):
    """The keyset reads due rows through the due index: 20,000 paused rows are never touched."""
    settings = make_settings(interval=3600)
    seed_rows(settings, 20_100)
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) + INTERVAL 1 HOUR")
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) - INTERVAL 1 SECOND WHERE user_id <= 100")

    def rows_read_by_a_full_pass() -> int:
        dispatcher = make_dispatcher(settings)
        db = dispatcher.pusher.rows.db
        status = "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_next', 'Handler_read_key')"
        before = sum(int(v) for _, v in db.query(status))
        while dispatcher.poll() == 0:
            pass
        read = sum(int(v) for _, v in db.query(status)) - before
        db.close()
        return read

    baseline = rows_read_by_a_full_pass()  # the 100 due rows, nothing paused
    make_store(settings).client.flushall()  # forget that pass's dedup: the same 100 are read again
    Client(settings=settings).pause(list(range(101, 20_101)))  # every row but the 100 due ones
    paused = rows_read_by_a_full_pass()
    assert paused <= baseline + 50, (baseline, paused)
    assert paused < 1_000  # a scan over the paused rows would read 20,000


# -- the same in plain SQL, from the application's own transaction ---------------------------------
def documented_statements() -> dict[str, str]:
    """The plain-SQL statements of docs/application-api.md, by their comment: what the application runs."""
    text = docs_text("application-api.md")
    block = text.split("<!-- application-sql -->")[1].split("```sql")[1].split("```")[0]
    found = {}
    for part in block.strip().split(";"):
        lines = [line for line in part.strip().splitlines() if line.strip()]
        if lines:
            name = lines[0].removeprefix("--").strip().split()[0].rstrip(":")
            found[name] = "\n".join(lines[1:])
    return found


def test_the_documented_plain_sql_works_from_another_time_zone_inside_a_transaction(
    make_settings, sql, procs
):
    statements = documented_statements()
    assert set(statements) == {"now", "pause", "resume"}, statements
    settings = monitors(make_settings(interval=3600, sweep_grace=30))
    prepare(settings, MONITORS, "INSERT INTO monitors (id, url) VALUES (42, 'http://up.example/'), "
                                "(43, 'http://up.example/'), (44, 'http://up.example/')")  # fmt: skip
    query(sql, "UPDATE monitors SET next_check_at = NOW(3) + INTERVAL 1 HOUR")
    start(procs, settings, check="tests.support.checks:url_state")
    checked = lambda: counts(sql, "monitors", "id")  # noqa: E731

    app = Database(settings)  # the application's connection, in a time zone of its own

    def in_transaction(statement: str) -> None:
        def work(cursor):
            cursor.execute("SET time_zone = '+05:00'")
            cursor.execute("UPDATE monitors SET url = 'http://up.example/edited' WHERE id = 42")
            cursor.execute(statement)

        app.run_in_transaction(work)

    time.sleep(1.0)
    in_transaction(statements["now"])
    wait_for(lambda: checked()[42] == 1 and checked()[43] == 1, 2.5, "42 and 43 checked now")
    in_transaction(statements["pause"])
    assert Client(settings=settings).state(43)["state"] == "paused"
    query(sql, "UPDATE monitors SET next_check_at = NOW(3) WHERE id = 44")  # recheck's zone: due now
    wait_for(lambda: checked()[44] == 1, 2.5, "44 checked")
    time.sleep(1.0)
    assert checked()[42] == 1 and checked()[43] == 1  # paused: not checked
    in_transaction(statements["resume"])
    wait_for(lambda: checked()[42] == 2 and checked()[43] == 2, 2.5, "resumed rows checked at once")
    app.close()


# -- the command line ------------------------------------------------------------------------------
def test_now_on_100_000_ids_takes_seconds_and_keeps_the_queue_under_high_water(make_settings, sql, procs):
    """Actions are linear in the ids (before issue 32: a list lookup per id, 40,000 ids took
    9-19 s and 100,000 did not finish in 110 s), and the asked ids enter the queue only as far as
    HIGH_WATER and a tenth allow (before: all 100,000 at once)."""
    settings = make_settings(interval=3600, high_water=20_000)
    seed_rows(settings, 100_000)
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) + INTERVAL 1 HOUR")
    procs.start("dispatcher", settings)  # no worker: what is queued stays queued
    client = Client(settings=settings)
    store = make_store(settings)
    wait_for(lambda: store.client.get(store.keys.leader), 15, "the dispatcher to lead")
    started = time.monotonic()
    acted = client.now(range(1, 100_001))
    took = time.monotonic() - started
    # Linear: 4.3 s alone on the slowest VM yet, 10.7 s there beside three other tests
    # (2026-12-01); with a lookup per id it took more than 110 s.
    assert len(acted.done) == 100_000 and not acted.missing and took < 30, took
    depths = []
    for _ in range(30):
        depths.append(store.queue_depth())
        time.sleep(0.1)
    print(f"now on 100,000 ids: {took:.1f} s; queue depth over 3 s: max {max(depths):,}")
    assert 15_000 <= max(depths) <= 22_000, depths  # up to high water and the asked ids' slack
    paused = client.pause(range(1, 100_001))
    assert len(paused.done) == 100_000 and time.monotonic() - started < 60
    client.close()


def test_commands_exit_1_naming_missing_ids_and_2_for_ids_the_column_cannot_hold(settings):
    seed_rows(settings, 3)
    missing = recheck("now", "1", "77", "78", settings=settings)
    assert missing.returncode == 1 and "no such row: 77, 78" in missing.stderr
    assert "due now: 1" in missing.stdout
    bad = recheck("pause", "abc", settings=settings)
    assert bad.returncode == 2 and "abc" in bad.stderr
    assert recheck("now", settings=settings).returncode == 2  # an id is required
    assert re.search(r"now .*check these rows now", recheck("--help").stdout)


def test_the_client_names_the_workload_when_there_are_several(settings, tmp_path, monkeypatch):
    from recheck.shared.config import ConfigError, Settings

    file = Path(tmp_path / "workloads.toml")
    file.write_text("[workloads.a]\ntable = 'user_block_status'\n[workloads.b]\ntable = 'other'\n")
    monkeypatch.chdir(tmp_path)
    env = {**settings.env_overrides(), "RECHECK_CONFIG": str(file)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=re.escape("Client(workload=NAME)")):
        Client(settings=Settings())
    assert Client("a", settings=Settings()).workload.name == "a"
