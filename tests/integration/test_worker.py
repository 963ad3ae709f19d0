"""Workers against real MariaDB and Redis: write-back, failures, fencing, plug-in shapes."""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import pytest
import redis

from recheck.dispatcher.reconciler import Reclaimer
from recheck.shared.core.entries import make_entry, parse_entries
from recheck.shared.mysql.db import Database
from recheck.shared.redis.keys import Keys
from recheck.workers import loopbase
from recheck.workers.checks import Outcome
from recheck.workers.pool import DaemonPool
from recheck.workers.slicerun import SliceRun
from recheck.workers.writing.writeback import Written
from tests.support import checks
from tests.support.helpers import dispatch_all, make_store, query, run_in_thread, scalar, seed_rows
from tests.support.servers import free_port, wait_for


def rows(sql, where: str = "1=1") -> list[tuple]:
    return list(
        query(
            sql,
            "SELECT user_id, status, checked_at, next_check_at, check_count, fail_count, last_error, "
            "TIMESTAMPDIFF(MICROSECOND, checked_at, next_check_at) / 1e6 "
            f"FROM user_block_status WHERE {where} ORDER BY user_id",
        )
    )


def test_a_batch_is_written_back_and_acknowledged(make_worker, make_settings, sql, rds):
    settings = make_settings(worker_take_max=500)  # fixed takes: this test counts them
    seed_rows(settings, 1200, due_now=True)
    assert dispatch_all(settings) == 1200
    worker = make_worker(settings, checks.ok)
    while rds.llen(Keys(settings.deployment.key_prefix).queue):
        worker.lane(settings.name).poll()
    written = rows(sql)
    assert len(written) == 1200
    for _, status, checked_at, _, count, fails, error, gap in written:
        assert (status, count, fails, error) == ("ok", 1, 0, None)
        assert checked_at is not None
        # next due = checked + interval, up to `jitter` of it earlier
        assert settings.interval * (1 - settings.jitter) - 0.001 <= float(gap) <= settings.interval
    keys = Keys(settings.deployment.key_prefix)
    assert rds.hlen(keys.inflight) == 0
    assert rds.scard(keys.processing(worker.id)) == 0
    assert int(rds.hget(keys.stats, "checked")) == 1200
    assert worker.lane(settings.name).counters.batches == 3  # 500 + 500 + 200: batched, not per id


def test_takes_grow_past_the_check_batch_while_the_queue_is_deep(make_worker, make_settings, sql, rds):
    """RECHECK_WORKER_BATCH=100 (say, an API's limit): the check never sees more than 100 ids, but
    the worker takes up to RECHECK_WORKER_TAKE_MAX at once and writes each take in one statement."""
    settings = make_settings(worker_batch=100, worker_take_max=800)
    seed_rows(settings, 4000, due_now=True)
    assert dispatch_all(settings) == 4000
    calls = []

    def sized(ids):
        calls.append(len(ids))
        return ["ok"] * len(ids)

    worker = make_worker(settings, sized)
    while rds.llen(Keys(settings.deployment.key_prefix).queue):
        worker.lane(settings.name).poll()
    assert max(calls) == 100 and sum(calls) == 4000
    # 100, 200, 400, then 800 at a time: 9 write-backs instead of 40 (more if this machine is slow).
    assert worker.lane(settings.name).counters.batches <= 20, worker.lane(settings.name).counters.batches
    assert (
        scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 1 AND status = 'ok'") == 4000
    )


def test_with_retry_backoff_failures_are_retried_with_capped_backoff(make_worker, make_settings, sql):
    # same database as `sql`; no jitter: the delays are compared exactly
    settings = make_settings(retry="backoff", retry_base=1.0, retry_max=4.0, interval=10.0, jitter=0)
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (1, NOW(3)), (2, NOW(3))")
    delays = []
    for _ in range(4):
        query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) WHERE user_id = 1")
        dispatch_all(settings)
        worker = make_worker(settings, checks.odd_fails)
        worker.lane(settings.name).poll()
        (_, _, _, due, _, fails, error, _) = rows(sql, "user_id = 1")[0]
        delay = scalar(sql, "SELECT TIMESTAMPDIFF(MICROSECOND, NOW(3), %s) / 1e6", (due,))
        delays.append((fails, round(float(delay))))
        assert error == "ValueError: odd id 1"
    assert delays == [(1, 1), (2, 2), (3, 4), (4, 4)]  # 1 s, doubling, capped at 4 s
    even = rows(sql, "user_id = 2")[0]
    assert even[1] == "even" and even[5] == 0  # its batch-mate succeeded regardless


def test_success_after_failures_clears_the_failure_state(make_worker, settings, sql):
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at, fail_count, last_error) "
               "VALUES (1, NOW(3), 5, 'old error')")  # fmt: skip
    dispatch_all(settings)
    make_worker(settings, checks.ok).lane(settings.name).poll()
    _, status, _, _, count, fails, error, _ = rows(sql)[0]
    assert (status, count, fails, error) == ("ok", 1, 0, None)


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (checks.wrong_count, "CheckShapeError: check returned 2 results for 3 ids"),
        (checks.not_a_list, "CheckShapeError: check returned str"),
        (checks.always_raises, "RuntimeError: upstream is down"),
    ],
)
def test_a_misbehaving_check_fails_its_batch_not_the_worker(make_worker, settings, sql, check, message):
    seed_rows(settings, 3, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, check)
    worker.lane(settings.name).poll()
    for row in rows(sql):
        assert row[4:6] == (0, 1)
        assert row[6].startswith(message)
    assert not worker.stopping and worker.fatal is None


def test_results_longer_than_the_column_are_clipped_not_fatal(make_worker, settings, sql):
    seed_rows(settings, 2, due_now=True)
    dispatch_all(settings)
    make_worker(settings, checks.long_text).lane(settings.name).poll()
    assert [(len(r[1]), r[4]) for r in rows(sql)] == [(255, 1), (255, 1)]


def test_malformed_entries_are_dropped_and_counted(make_worker, settings, sql, rds):
    seed_rows(settings, 3, due_now=True)
    dispatch_all(settings)
    keys = Keys(settings.deployment.key_prefix)
    rds.rpush(keys.queue, b"garbage", b"12:", b"\xff\xfe", b"1:2:3")
    worker = make_worker(settings, checks.ok)
    while rds.llen(keys.queue):
        worker.lane(settings.name).poll()
    assert [r[4] for r in rows(sql)] == [1, 1, 1]
    assert int(rds.hget(keys.stats, "malformed")) == 4
    assert worker.lane(settings.name).counters.malformed == 4
    assert rds.scard(keys.processing(worker.id)) == 0


def test_a_late_write_for_an_already_rechecked_due_time_changes_nothing(make_worker, settings, sql, rds):
    """Fencing: a paused worker's result arrives after another worker rechecked the row."""
    seed_rows(settings, 1, due_now=True)
    dispatch_all(settings)
    keys = Keys(settings.deployment.key_prefix)
    stale_entry = rds.lindex(keys.queue, 0)
    make_worker(settings, checks.ok).lane(settings.name).poll()  # the row is checked, next due in 2 s
    before = rows(sql)[0]
    late = make_worker(settings, checks.odd_fails)  # a different result, for the old due time
    items, _ = parse_entries([stale_entry])
    written = late.lane(settings.name).completer.writeback.write(items, [Outcome(True, "late result")])
    assert (written.succeeded, written.stale) == (0, 1)
    assert rows(sql)[0] == before


def test_a_reclaimed_workers_late_acknowledgement_releases_nothing(make_worker, settings, sql, rds):
    """A worker paused past its heartbeat: its ids were given to another worker meanwhile."""
    seed_rows(settings, 10, due_now=True)
    dispatch_all(settings)
    keys = Keys(settings.deployment.key_prefix)
    paused = make_worker(settings, checks.ok)
    held = paused.lane(settings.name).intake.take(settings.worker_batch)
    assert len(held) == 10
    paused.close()  # SIGSTOP: no more heartbeats...
    rds.delete(keys.heartbeat(paused.id))  # ...so its key expires
    reclaimer = Reclaimer(settings, Database(settings), make_store(settings))
    assert reclaimer.run_once() == (10, 0)
    assert rds.llen(keys.suspects) == 8  # given back as 8 groups
    paused.lane(settings.name).completer.acknowledge(
        held, [], Written(10, 0, 0), 0
    )  # wakes up and acknowledges its old batch
    assert rds.hlen(keys.inflight) == 10  # nothing released: the entries are someone else's now
    rescuer = make_worker(settings, checks.ok)
    for _ in range(8):
        rescuer.lane(settings.name).poll()  # one group per batch
    assert rds.hlen(keys.inflight) == 0
    assert [r[4] for r in rows(sql)] == [1] * 10


@pytest.mark.parametrize("check", [checks.slow_row, checks.slow_row_sync], ids=["async", "thread-pool"])
def test_per_row_checks_run_concurrently_and_are_written_in_batches(
    make_worker, make_settings, sql, monkeypatch, check
):
    monkeypatch.setattr(checks, "SLEEP", 0.3)
    settings = make_settings(concurrency=100)
    seed_rows(settings, 300, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, check, start=False)
    assert worker.lane(settings.name).kind == "row"
    started = time.monotonic()
    thread = run_in_thread(worker)
    wait_for(lambda: scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 1") == 300, 15,
             "300 rows checked")  # fmt: skip
    elapsed = time.monotonic() - started
    worker.stop()
    thread.join(10)
    # 300 rows x 0.3 s one at a time would take 90 s; 100 at a time takes about 0.9 s.
    assert elapsed < 4, elapsed
    assert (
        worker.lane(settings.name).counters.batches < 60
    )  # written back in batches, not a statement per row
    statuses = {r[0]: r[1] for r in rows(sql)}
    prefix = "ok" if asyncio.iscoroutinefunction(check) else "sync"
    assert statuses[7] == f"{prefix} 7"


def test_a_per_row_check_raising_fails_only_that_row(make_worker, settings, sql):
    seed_rows(settings, 20, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.raises_for_odd, start=False)
    thread = run_in_thread(worker)
    done = "SELECT COUNT(*) FROM user_block_status WHERE check_count + fail_count = 1"
    wait_for(lambda: scalar(sql, done) == 20, 10, "20 rows done")
    worker.stop()
    thread.join(10)
    for row_id, status, _, _, count, fails, error, _ in rows(sql):
        if row_id % 2:
            assert (count, fails, error) == (0, 1, f"ConnectionError: cannot reach {row_id}")
        else:
            assert (status, count, fails) == ("reachable", 1, 0)


def test_a_hanging_check_is_abandoned_after_the_timeout(make_worker, make_settings, sql):
    settings = make_settings(check_timeout=0.5)
    seed_rows(settings, 5, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.hangs)
    started = time.monotonic()
    worker.lane(settings.name).poll()
    assert time.monotonic() - started < 2
    assert {r[6] for r in rows(sql)} == {"TimeoutError: check did not finish within 0.5s"}
    assert worker.fatal is None


def test_a_take_of_several_slices_is_one_hand_off_and_a_hung_slice_fails_alone(
    make_worker, make_settings, sql, monkeypatch
):
    """Slices of 2 from a take of 6: the check's thread gets them at once, not one by one (a
    hand-off each cost about a tenth of a worker's CPU at moderate rates); the middle call hangs past
    the timeout, its rows fail, and the last slice still runs, in a fresh thread."""
    settings = make_settings(check_timeout=0.5, worker_batch=2, worker_take_max=6)
    seed_rows(settings, 6, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.hangs_with_3)
    handed: list[int] = []
    submit = DaemonPool.submit

    def counted(pool, fn, /, *args, **kwargs):
        handed.append(len(fn) if isinstance(fn, SliceRun) else 1)
        return submit(pool, fn, *args, **kwargs)

    monkeypatch.setattr(DaemonPool, "submit", counted)
    lane = worker.lane(settings.name)
    entries = lane.intake.take(6)
    assert len(entries) == 6
    started = time.monotonic()
    lane.batch.process(entries)
    assert time.monotonic() - started < 3
    assert handed == [3, 1]  # three slices at once; after the hung one, the last in a fresh thread
    timed_out = "TimeoutError: check did not finish within 0.5s"
    assert [(r[0], r[4], r[5], r[6]) for r in rows(sql)] == [
        (1, 1, 0, None), (2, 1, 0, None), (3, 0, 1, timed_out), (4, 0, 1, timed_out),
        (5, 1, 0, None), (6, 1, 0, None),
    ]  # fmt: skip
    assert lane.batch.abandoned == 1 and worker.fatal is None


def test_a_graceful_stop_during_a_takes_second_slice_gives_the_whole_take_back(
    make_worker, make_settings, sql, rds
):
    """The first slice was checked, the second hangs when the stop's deadline passes: nothing of
    the take is written, all of it goes back to the head of the queue for another worker."""
    settings = make_settings(check_timeout=30, worker_batch=2, worker_take_max=6, shutdown_timeout=0.5)
    seed_rows(settings, 6, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.hangs_with_3)
    lane = worker.lane(settings.name)
    entries = lane.intake.take(6)
    assert len(entries) == 6
    checks.HANGING_WITH_3.clear()
    stopper = threading.Thread(target=lambda: checks.HANGING_WITH_3.wait(10) and worker.stop())
    stopper.start()  # the stop comes while the second slice hangs
    started = time.monotonic()
    lane.batch.process(entries)
    stopper.join()
    assert time.monotonic() - started < 3
    assert [r[4] + r[5] for r in rows(sql)] == [0] * 6  # nothing written, not even the first slice
    keys = Keys(settings.deployment.key_prefix)
    head = parse_entries(rds.lrange(keys.queue, 0, -1))[0]
    assert sorted(item.id for item in head) == [1, 2, 3, 4, 5, 6]
    assert rds.scard(keys.processing(worker.id)) == 0


def test_entries_are_taken_in_one_round_trip_per_batch(make_worker, settings, rds, monkeypatch):
    keys = Keys(settings.deployment.key_prefix)
    rds.rpush(keys.queue, *[make_entry(i, 1000) for i in range(1, 1001)])
    worker = make_worker(settings, checks.ok)
    # The commands this thread sends (not the worker's heartbeat threads', which beat meanwhile).
    sent: list[bytes] = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counted(connection, command, check_health=True):
        if threading.current_thread() is threading.main_thread():
            sent.append(b"".join(command) if isinstance(command, list) else command)
        return send(connection, command, check_health)

    intake = worker.lane(settings.name).intake
    assert len(intake.take(500)) == 500  # the first loads the script into a Redis that lacks it
    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    taken = intake.take(500)
    assert len(taken) == 500 and len(sent) == 1 and b"EVALSHA" in sent[0].upper(), [c[:80] for c in sent]


def test_entries_whose_delivery_was_cut_off_are_adopted_not_stranded(make_worker, settings, sql, rds):
    """The take script ran on the server, but the connection died before its reply reached the worker."""
    seed_rows(settings, 5, due_now=True)
    dispatch_all(settings)
    keys = Keys(settings.deployment.key_prefix)
    worker = make_worker(settings, checks.ok)
    real_take = worker.lane(settings.name).store.take

    def pop_then_lose_the_reply(*args, **kwargs):
        real_take(*args, **kwargs)  # really runs against Redis: the entries move into the processing set
        raise redis.exceptions.ConnectionError("Connection closed by server.")

    lane = worker.lane(settings.name)
    lane.store.take = pop_then_lose_the_reply
    with pytest.raises(redis.exceptions.ConnectionError):
        lane.intake.take(500)
    lane.store.take = real_take
    assert rds.scard(keys.processing(worker.id)) == 5  # held in Redis, unseen by the worker
    adopted = lane.intake.take(500)
    assert len(adopted) == 5
    lane.batch.process(adopted)
    assert [r[4] for r in rows(sql)] == [1] * 5
    assert rds.hlen(keys.inflight) == 0


def test_a_check_whose_library_logs_every_call_at_info_adds_nothing_to_the_workers_log(settings, sql, procs):
    seed_rows(settings, 40, due_now=True)
    procs.start("dispatcher", settings)
    worker = procs.start("worker", settings, env={"RECHECK_CHECK": "tests.support.checks:chatty"})
    wait_for(lambda: scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count > 0") == 40, 20,
             "every row checked")  # fmt: skip
    procs.stop_all()
    log = procs.log_of(worker)
    assert "started:" in log and "stopped: " in log  # recheck's own INFO lines stay
    assert "GET http://target/" not in log  # 40+ INFO lines of the check's library: none
    assert "chatty warning for row 1" in log  # its warnings still show


def test_a_stop_while_still_starting_is_a_clean_stop(make_settings, procs):
    """A dispatcher or worker stopped before it serves (here: still waiting for its Redis) holds
    nothing yet, so SIGTERM ends it at once with exit 0, not death by the signal (exit -15, 143 in
    a container: `docker compose stop` right after `up`)."""
    settings = make_settings(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    starting = [procs.start(role, settings) for role in ("dispatcher", "worker")]
    wait_for(lambda: all("unreachable" in procs.log_of(p) for p in starting), 20, "both waiting for Redis")
    for process in starting:
        process.send_signal(signal.SIGTERM)
    assert [process.wait(timeout=5) for process in starting] == [0, 0], procs.logs()
    assert "Traceback" not in procs.logs()


@pytest.mark.parametrize("check", [checks.slow_row, checks.row_cost], ids=["per-row", "batch"])
def test_an_idle_worker_keeps_telling_that_mysql_takes_its_writes(make_worker, settings, monkeypatch, check):
    """An idle worker probes MySQL every IDLE_PROBE_EVERY (loopbase.keep_in_touch), so its
    heartbeat's "wrote N s ago" stays true: a worker whose write-back is stuck gives its batch
    back only when another live worker's writes land (lane.others_can_write), and an idle
    per-row worker's figure only grew (it never reached its probe while blocked for work)."""
    monkeypatch.setattr(loopbase, "IDLE_PROBE_EVERY", 0.3)
    worker = make_worker(settings, check, start=False)
    thread = run_in_thread(worker)
    store = make_store(settings)
    wait_for(lambda: store.live_workers(), 15, "the worker's first heartbeat")
    idle_since = time.monotonic()
    bound = 0.3 + settings.deployment.heartbeat_interval + 0.5  # a probe period, a beat's age, scheduling

    def told_after_idling():
        """A beat after 1.5 s idle (several probe periods) saying MySQL wrote within the bound:
        never, while the idle worker does not probe (the figure grows from its start)."""
        beats = store.live_workers()
        return time.monotonic() - idle_since >= 1.5 and beats and beats[0].mysql_wrote_ago <= bound

    wait_for(told_after_idling, 10, f"a beat saying MySQL wrote within {bound:.2f} s after 1.5 s idle")
    worker.stop()
    thread.join(10)
