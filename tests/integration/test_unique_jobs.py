"""Unique and debounced jobs (issue 48, item 2): one-shot rows enqueued by a natural key, with
Client.enqueue or the documented SQL, on real MariaDB and Redis through the worker's and
dispatcher's own code. A pending job runs once however often it is enqueued, a done or dead one
runs again, a job enqueued while it runs runs once more after (its first write fenced out), a
debounce pushes the due time on.
"""

from __future__ import annotations

import collections
import multiprocessing
import threading
import time

import pytest

from recheck import Client
from recheck.shared.mysql.db import Database
from recheck.shared.redis.keys import Keys
from tests.support.helpers import dispatch_all, drain, make_pusher, query, recheck, scalar, workload
from tests.support.servers import wait_for

JOBS = ("CREATE TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_key VARCHAR(64) NOT NULL, "
        "payload VARCHAR(100) NULL, UNIQUE KEY (job_key))")  # fmt: skip
# docs/queue-tables.md, "Unique and debounced jobs": a producer's own SQL, pending kept.
KEEP_PENDING = """
INSERT INTO jobs (job_key, payload) VALUES (%s, %s)
ON DUPLICATE KEY UPDATE
  fail_count = IF(next_check_at IS NULL OR next_check_at = '9999-12-29 00:00:00', 0, fail_count),
  next_check_at = IF(next_check_at IS NULL OR next_check_at = '9999-12-29 00:00:00',
                     UTC_TIMESTAMP(3), next_check_at)
"""


@pytest.fixture
def unique(settings):
    settings = workload(settings, "jobs", table="jobs", id_column="id", once=True, check_kind="batch",
                        columns=["job_key", "payload"], result_column="recheck_result",
                        max_attempts=1)  # fmt: skip
    db = Database(settings)
    db.execute(JOBS)
    db.close()
    applied = recheck("init-db", "--apply", settings=settings)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    return settings


class Recorder:
    """The check: each call's (job_key, payload) noted; a job whose payload says so fails."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []
        self.during: dict[str, object] = {}  # job_key -> what to do while it runs (once)

    def run(self, rows: list) -> list:
        out: list = []
        for row in rows:
            self.runs.append((row["job_key"], row["payload"]))
            action = self.during.pop(row["job_key"], None)
            if callable(action):
                action()
            out.append(RuntimeError("it failed") if row["payload"] == "fail" else "done")
        return out

    def count(self) -> collections.Counter:
        return collections.Counter(key for key, _ in self.runs)


def states(sql) -> dict[str, tuple]:
    rows = query(sql, "SELECT job_key, next_check_at IS NULL, fail_count, check_count, payload FROM jobs")
    return {key: (bool(done), int(fails), int(count), payload) for key, done, fails, count, payload in rows}


def test_a_pending_job_runs_once_however_often_it_is_enqueued_and_a_done_one_again(unique, make_worker, sql):
    client, check = Client(settings=unique), Recorder()
    worker = make_worker(unique, check.run)
    ids = client.enqueue([{"job_key": f"k{i}", "payload": "v1"} for i in range(5)], key="job_key")
    assert len(ids) == 5 and scalar(sql, "SELECT COUNT(*) FROM jobs") == 5
    client.enqueue([{"job_key": "k0", "payload": "v2"}, {"job_key": "k1", "payload": "v2"}], key="job_key")
    drain(worker, unique)
    assert check.count() == {f"k{i}": 1 for i in range(5)}  # once each, not once per enqueue
    assert ("k0", "v2") in check.runs  # with the values of the last enqueue
    client.enqueue([{"job_key": "k0", "payload": "v3"}], key="job_key")  # done: runs again
    drain(worker, unique)
    assert check.count()["k0"] == 2 and check.runs[-1] == ("k0", "v3")
    assert states(sql)["k0"][:1] == (True,)
    client.close()


def test_a_queued_job_enqueued_again_is_superseded_not_run_twice(unique, make_worker, sql):
    client, check = Client(settings=unique), Recorder()
    worker = make_worker(unique, check.run)
    client.enqueue([{"job_key": "a", "payload": "v1"}], key="job_key")
    assert dispatch_all(unique) == 1  # queued in Redis, no worker has it yet
    client.enqueue([{"job_key": "a", "payload": "v2"}], key="job_key")  # asked: a new due time
    # The dispatcher's "asked" job (every 50 ms, before a worker reaches a queued entry behind a
    # backlog): its head push supersedes the queued entry, which the take drops.
    assert make_pusher(unique).push_asked() == 1
    drain(worker, unique)
    drain(worker, unique)
    assert check.runs == [("a", "v2")]
    assert states(sql)["a"][0]
    client.close()


def test_a_job_enqueued_while_it_runs_runs_exactly_once_more_with_the_latest_values(unique, make_worker, sql):
    client, check = Client(settings=unique), Recorder()
    worker = make_worker(unique, check.run)
    client.enqueue([{"job_key": "a", "payload": "v1"}], key="job_key")
    # A producer enqueues it again while its check runs.
    check.during["a"] = lambda: client.enqueue([{"job_key": "a", "payload": "v2"}], key="job_key")
    for _ in range(3):
        drain(worker, unique)
    assert check.runs == [("a", "v1"), ("a", "v2")]  # the first run's write was fenced out
    done, _, count, payload = states(sql)["a"]
    assert done and count == 1 and payload == "v2"  # written once: by the second run
    client.close()


def test_a_dead_job_is_revived_and_a_paused_one_stays_paused(unique, make_worker, sql):
    client, check = Client(settings=unique), Recorder()
    worker = make_worker(unique, check.run)
    client.enqueue(
        [{"job_key": "dead", "payload": "fail"}, {"job_key": "held", "payload": "v1"}], key="job_key"
    )
    held = scalar(sql, "SELECT id FROM jobs WHERE job_key = 'held'")
    client.pause([held])
    drain(worker, unique)
    assert states(sql)["dead"][1] == 1  # max_attempts = 1: dead
    client.enqueue(
        [{"job_key": "dead", "payload": "v2"}, {"job_key": "held", "payload": "v2"}], key="job_key"
    )
    assert states(sql)["dead"][1] == 0  # its failures forgotten
    drain(worker, unique)
    assert check.count() == {"dead": 2}  # revived and run; the paused one never
    assert states(sql)["dead"][0] and states(sql)["held"][3] == "v2"
    client.close()


def test_a_debounce_pushes_the_due_time_on_and_a_queued_entry_never_starts(unique, make_worker, sql):
    client, check = Client(settings=unique), Recorder()
    worker = make_worker(unique, check.run)
    client.enqueue([{"job_key": "a", "payload": "v1"}], key="job_key")
    dispatch_all(unique)  # queued
    client.enqueue([{"job_key": "a", "payload": "v2"}], key="job_key", delay=600)
    ahead = scalar(sql, "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(3), next_check_at) FROM jobs")
    assert 590 <= ahead <= 600
    client.enqueue([{"job_key": "a", "payload": "v3"}], key="job_key", delay=900)  # pushed on again
    ahead = scalar(sql, "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(3), next_check_at) FROM jobs")
    assert 890 <= ahead <= 900
    drain(worker, unique)
    assert check.runs == []  # the queued entry of the old due time was dropped, not started
    keys = Keys(unique.deployment.key_prefix)
    assert worker.lane(unique.name).store.client.hlen(keys.inflight) == 0  # and its id let go
    query(sql, "UPDATE jobs SET next_check_at = UTC_TIMESTAMP(3)")  # the debounce's time comes
    drain(worker, unique)
    assert check.runs == [("a", "v3")]
    client.close()


def test_the_documented_sql_keeps_a_pending_job_and_revives_a_done_one(unique, make_worker, sql):
    check = Recorder()
    worker = make_worker(unique, check.run)
    with sql.cursor() as cursor:
        cursor.execute(KEEP_PENDING, ("a", "v1"))
        cursor.execute(KEEP_PENDING, ("a", "v1"))  # pending: kept as it is
        due = scalar(sql, "SELECT next_check_at FROM jobs")
        cursor.execute(KEEP_PENDING, ("a", "v1"))
        assert scalar(sql, "SELECT next_check_at FROM jobs") == due
    drain(worker, unique)
    assert check.count() == {"a": 1}
    with sql.cursor() as cursor:
        cursor.execute(KEEP_PENDING, ("a", "v1"))  # done: due again
    drain(worker, unique)
    assert check.count() == {"a": 2}


def test_bad_calls_are_refused_with_the_reason(unique, settings):
    client = Client(settings=unique)
    with pytest.raises(ValueError, match="same columns"):
        client.enqueue([{"job_key": "a"}, {"job_key": "b", "payload": "x"}], key="job_key")
    with pytest.raises(ValueError, match="same columns"):
        client.enqueue([{"payload": "x"}], key="job_key")
    with pytest.raises(ValueError, match="not a plain column name"):
        client.enqueue([{"job_key": "a", "payload`; DROP TABLE jobs; --": "x"}], key="job_key")
    with pytest.raises(ValueError, match="delay"):
        client.enqueue([{"job_key": "a"}], key="job_key", delay=-1)
    client.close()
    recurring = Client(settings=settings)
    with pytest.raises(ValueError, match="one-shot"):
        recurring.enqueue([{"user_id": 1}], key="user_id")
    recurring.close()


def test_eight_producers_enqueueing_the_same_keys_lose_none_while_workers_run(unique, make_worker, sql):
    """8 producers enqueue the same 200 keys 20 times each (in batches of 50, each with its own
    client) while a worker drains: every key ends done, its last run saw the last values any
    producer gave it, and no key ran more often than it was enqueued."""
    check = Recorder()
    worker = make_worker(unique, check.run)
    keys = [f"k{i}" for i in range(200)]
    enqueued = collections.Counter()
    lock = threading.Lock()

    def producer(n: int) -> None:
        client = Client(settings=unique)
        for round_ in range(20):
            for start in range(0, len(keys), 50):
                batch = keys[start : start + 50]
                client.enqueue([{"job_key": k, "payload": f"r{round_}"} for k in batch], key="job_key")
                with lock:
                    enqueued.update(batch)
        client.close()

    producers = [threading.Thread(target=producer, args=(n,)) for n in range(8)]
    for thread in producers:
        thread.start()
    while any(thread.is_alive() for thread in producers):
        drain(worker, unique, rounds=5)
    for _ in range(5):
        drain(worker, unique)
    final = states(sql)
    assert all(final[k][0] for k in keys), [k for k in keys if not final[k][0]]  # none left pending
    last_run = {key: payload for key, payload in check.runs}
    assert all(last_run[k] == "r19" for k in keys)  # the last run saw the last round's values
    runs = check.count()
    assert all(runs[k] <= enqueued[k] for k in keys) and sum(runs.values()) < sum(enqueued.values())


def enqueue_rounds(args: tuple) -> list[tuple[float, list[str]]]:
    """One producer process: 20 rounds over the keys, 50 a call; (time before the call, its keys)."""
    settings, keys = args
    client, stamps = Client(settings=settings), []
    for round_ in range(20):
        for start in range(0, len(keys), 50):
            batch = keys[start : start + 50]
            stamps.append((time.time(), batch))
            client.enqueue([{"job_key": k, "payload": f"r{round_}"} for k in batch], key="job_key")
    client.close()
    return stamps


@pytest.mark.serial  # 8 producer processes and 3 of recheck's: serial layer (make test)
def test_eight_producer_processes_and_1000_keys_lose_no_enqueue(unique, procs, sql, tmp_path):
    """The issue's scenario: 8 producer processes enqueue the same 1,000 keys 20 times each
    (160,000 enqueues) while a dispatcher and 2 worker processes run. None is lost: every key
    ends done, its last run saw the last round's values and started after the last enqueue of it
    began. Runs are fewer than enqueues (those of a pending key merge)."""
    keys = [f"k{i}" for i in range(1000)]
    record = tmp_path / "runs"
    record.mkdir()
    procs.start("dispatcher", unique)
    for _ in range(2):
        procs.start("worker", unique, env={"RECHECK_CHECK": "tests.support.checks:stamped_jobs",
                                           "TEST_CHECK_RECORD": str(record)})  # fmt: skip
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        produced = pool.map(enqueue_rounds, [(unique, keys)] * 8)
    wait_for(lambda: not scalar(sql, "SELECT COUNT(*) FROM jobs WHERE next_check_at IS NOT NULL"), 120,
             "every job done")  # fmt: skip
    procs.stop_all()
    runs: collections.Counter = collections.Counter()
    last_run: dict[str, tuple[float, str]] = {}  # key -> (start, values seen) of its last run
    for path in record.iterdir():
        for line in path.read_text().splitlines():
            at, key, payload = line.split(" ", 2)
            runs[key] += 1
            last_run[key] = max(last_run.get(key, (0.0, "")), (float(at), payload))
    last_enqueue: dict[str, float] = {}
    for stamps in produced:
        for at, batch in stamps:
            for key in batch:
                last_enqueue[key] = max(last_enqueue.get(key, 0.0), at)
    final = states(sql)
    print(f"unique jobs: 160,000 enqueues, {sum(runs.values()):,} runs, {min(runs.values())}-"
          f"{max(runs.values())} per key")  # fmt: skip
    assert all(final[k][0] for k in keys)  # none left pending
    assert [k for k in keys if last_run[k][1] != "r19"] == []  # the last values handled
    assert [k for k in keys if last_run[k][0] < last_enqueue[k]] == []  # after the last enqueue
    assert sum(runs.values()) < 160_000
