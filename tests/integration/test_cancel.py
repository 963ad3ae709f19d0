"""Cancel (issue 48, item 3): `recheck cancel` / Client.cancel stops rows. A queued row is never
started, a per-row check already running is cancelled (its asyncio task) within a fraction of a
second, and the row becomes what on_cancel says (paused, done, deleted), never written as a
success. Real MariaDB, Redis and worker processes.
"""

from __future__ import annotations

import time

import pytest

from recheck import Client
from tests.support.helpers import dispatch_all, drain, query, recheck, scalar, seed_rows, workload
from tests.support.servers import wait_for

SLOW = {"RECHECK_CHECK": "tests.support.checks:sleeps_until_cancelled", "TEST_CHECK_SLEEP": "30"}


def events(record) -> list[tuple[float, str, str]]:
    out = []
    for path in record.glob("*.events"):
        for line in path.read_text().splitlines():
            at, what, row = line.split(" ")
            out.append((float(at), what, row))
    return sorted(out)


def test_a_running_per_row_check_is_cancelled_within_a_second_and_its_row_not_written(
    make_settings, procs, sql, tmp_path
):
    settings = make_settings(check_kind="row", concurrency=10)
    seed_rows(settings, 5, due_now=True)
    record = tmp_path / "events"
    record.mkdir()
    procs.start("dispatcher", settings)
    procs.start("worker", settings, env={**SLOW, "TEST_CHECK_RECORD": str(record)})
    wait_for(lambda: sum(what == "started" for _, what, _ in events(record)) == 5, 30, "every check started")
    client = Client(settings=settings)
    asked = time.time()
    acted = client.cancel([1, 2])
    assert acted.done == [1, 2]
    wait_for(lambda: sum(what == "cancelled" for _, what, _ in events(record)) == 2, 5, "the cancels")
    took = max(at for at, what, _ in events(record) if what == "cancelled") - asked
    print(f"cancel: two running checks cancelled {took:.3f} s after Client.cancel returned")
    assert took < 1.0, took
    cancelled = {row for _, what, row in events(record) if what == "cancelled"}
    assert cancelled == {"1", "2"}  # the other three run on
    read = "SELECT user_id, next_check_at, check_count, status FROM user_block_status"
    rows = {int(i): (due, count, status) for i, due, count, status in query(sql, read)}
    for row_id in (1, 2):
        due, count, status = rows[row_id]
        assert due.year == 9999 and count == 0 and status is None, rows[row_id]  # paused, never written
    assert client.state(1)["state"] == "paused"
    client.resume([1])  # back in rotation: started again
    wait_for(lambda: [row for _, what, row in events(record) if what == "started"].count("1") == 2, 10,
             "row 1 started again")  # fmt: skip
    client.close()


def test_a_queued_row_cancelled_is_never_started(settings, make_worker, sql):
    calls = []
    worker = make_worker(settings, lambda ids: calls.extend(ids) or ["ok"] * len(ids))
    seed_rows(settings, 10, due_now=True)
    dispatch_all(settings)  # all ten queued
    printed = recheck("cancel", "3", "4", "404", settings=settings)
    assert printed.returncode == 1 and "cancelled: 3, 4" in printed.stdout, printed.stdout + printed.stderr
    assert "no such row: 404" in printed.stderr
    drain(worker, settings)
    assert sorted(calls) == [1, 2, 5, 6, 7, 8, 9, 10]
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE next_check_at >= '9999-01-01'") == 2


@pytest.mark.parametrize("on_cancel", ["done", "delete"])
def test_a_cancelled_job_is_done_or_deleted_as_the_workload_says(settings, make_worker, sql, on_cancel):
    jobs = workload(settings, "jobs", table="cancel_jobs", once=True, on_cancel=on_cancel)
    assert recheck("init-db", "--create", "--apply", settings=jobs).returncode == 0
    seed_rows(jobs, 4, due_now=True)
    calls = []
    worker = make_worker(jobs, lambda ids: calls.extend(ids) or ["ok"] * len(ids))
    dispatch_all(jobs)
    client = Client(settings=jobs)
    assert client.cancel([2]).done == [2]
    drain(worker, jobs)
    assert sorted(calls) == [1, 3, 4]
    left = {int(i): (due, error) for i, due, error in
            query(sql, "SELECT user_id, next_check_at, last_error FROM cancel_jobs")}  # fmt: skip
    if on_cancel == "delete":
        assert 2 not in left
    else:
        assert left[2] == (None, "cancelled")  # done, never run, and why
    assert client.cancel([1]).skipped == [1]  # done: left alone
    client.close()
