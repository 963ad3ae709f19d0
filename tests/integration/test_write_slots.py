"""Write slots (workers/writing/writeslots.py) on a real Redis: no more write-backs of a workload at once
than RECHECK_WRITE_SLOTS, a dead holder's slot lapses, and a slot never holds a write up when
Redis is away or the worker is stopping."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from recheck.shared.core.records import WorkerBeat
from recheck.shared.process.presence import Presence
from recheck.shared.redis.keys import Keys
from recheck.shared.redis.store import Store
from recheck.workers.writing.writeslots import WriteSlots
from tests.support.checks import ok
from tests.support.helpers import make_store, scalar, seed_rows
from tests.support.servers import free_port, wait_for


def slots_for(store, holder: str, slots: int, lease_s: float = 5.0, stopping=lambda: False) -> WriteSlots:
    return WriteSlots(store, holder, slots, lease_s, stopping=stopping)


@pytest.mark.parametrize("partitions", [1, 4])
def test_no_more_write_backs_run_at_once_than_there_are_slots(make_settings, partitions):
    store = make_store(make_settings(partitions=partitions))
    inside, most, entered = 0, 0, 0
    lock = threading.Lock()
    waited: list[float] = []

    def writer(name: str) -> None:
        nonlocal inside, most, entered
        gate = WriteSlots(store, name, 2, 5.0, stopping=lambda: False, waited=waited.append)
        for _ in range(5):
            with gate.held() as taken:
                assert taken
                with lock:
                    inside += 1
                    entered += 1
                    most = max(most, inside)
                time.sleep(0.03)  # the write-back
                with lock:
                    inside -= 1

    threads = [threading.Thread(target=writer, args=(f"worker-{i}",)) for i in range(6)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    elapsed = time.monotonic() - started
    assert entered == 30
    assert most == 2, f"{most} write-backs at once with 2 slots"
    assert elapsed >= 30 * 0.03 / 2  # two at a time, never more
    assert max(waited) > 0.05  # some writers did wait for a slot
    assert not store.client.exists(store.keys.write_slot(1), store.keys.write_slot(2))  # all given back


def test_a_waiter_gets_a_given_back_slot_at_once(settings):
    store = make_store(settings)
    holder = slots_for(store, "holder", 1)
    got_at: list[float] = []

    def waiter() -> None:
        with slots_for(store, "waiter", 1).held() as taken:
            got_at.append(time.monotonic())
            assert taken

    with holder.held():
        thread = threading.Thread(target=waiter)
        thread.start()
        wait_for(lambda: any(c.get("cmd") == "blpop" for c in store.client.client_list()), 5,
                 "the waiter to block in Redis")  # fmt: skip
        assert not got_at
        given_at = time.monotonic()
    thread.join(5)
    assert got_at and got_at[0] - given_at < 0.05, "woken by the give-back, not by asking again later"


def test_a_dead_holders_slot_lapses_after_its_lease(settings):
    store = make_store(settings)
    assert store.take_write_slot("dead-worker", 1, 500)  # taken, never given back
    started = time.monotonic()
    with slots_for(store, "alive", 1, lease_s=5.0).held() as taken:
        waited = time.monotonic() - started
    assert taken
    print(f"a dead holder's slot (lease 0.5 s) taken after {waited:.2f} s")
    assert 0.4 <= waited < 1.0, f"waited {waited:.2f} s for a slot whose holder died, lease 0.5 s"


def test_a_stopping_worker_writes_without_waiting_for_a_slot(settings):
    store = make_store(settings)
    assert store.take_write_slot("other", 1, 60_000)
    started = time.monotonic()
    with slots_for(store, "stopping", 1, stopping=lambda: True).held() as taken:
        assert not taken
    assert time.monotonic() - started < 0.5
    assert store.client.get(store.keys.write_slot(1)) == b"other"  # its slot untouched


def test_with_redis_away_the_write_goes_ahead_without_a_slot(make_settings):
    store = make_store(make_settings(redis_url=f"redis://127.0.0.1:{free_port()}/0"))  # nobody there
    started = time.monotonic()
    with slots_for(store, "cut-off", 2).held() as taken:
        assert not taken
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(("slots", "workers"), [(0, 24), (2, 2)], ids=["no limit", "few workers"])
def test_redis_is_not_asked_when_nobody_could_be_kept_waiting(slots, workers):
    store = Store(redis.Redis(port=free_port()), Keys("none"))  # asking it would raise
    gate = WriteSlots(store, "w", slots, 5.0, stopping=lambda: False, writers=lambda: workers)
    with gate.held() as taken:
        assert not taken


def test_a_worker_waits_for_a_write_slot_before_writing_back(make_settings, sql, make_worker):
    from recheck.dispatcher.dispatcher import START
    from tests.support.helpers import make_pusher

    settings = make_settings(write_slots=1)
    seed_rows(settings, 100, due_now=True)
    assert make_pusher(settings).push_page(START, 1000).pushed == 100
    store = make_store(settings)
    # another worker of the workload
    Presence(store, "worker", "elsewhere", 60).publish(WorkerBeat(id="elsewhere"))
    taken = time.monotonic()
    assert store.take_write_slot("elsewhere", 1, 3000)  # holds the only slot: it lapses in 3 s
    worker = make_worker(settings, ok)  # however long this takes on a busy machine
    worker.lane(settings.name).poll()
    waited = time.monotonic() - taken
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 1") == 100
    assert waited >= 2.8, f"wrote {waited:.2f} s after another worker took the only slot for 3 s"
    assert not store.client.exists(store.keys.write_slot(1))  # given back after the write


def test_a_mysql_stall_keeps_the_limit_while_the_slots_holder_is_alive(make_settings, sql, mariadb, procs):
    """An application's LOCK TABLES ... READ holds every write-back up. The slot's holder is alive
    and renews its slot; nobody else's write lands either, so its write is not given back as stuck
    and the slot stays its own: one write-back waits in MySQL, not one per worker. (Before: the
    waiters took a slot older than one lease as abandoned and all went ahead.)"""
    settings = make_settings(write_slots=1, worker_batch=50, worker_take_max=50, interval=2.0)
    seed_rows(settings, 3000)
    procs.start("dispatcher", settings)
    workers = [procs.start("worker", settings) for _ in range(3)]
    store = make_store(settings)
    # Every worker writing, each knowing the others (a worker alone uses no slot: its first beat
    # sees only itself registered).
    wait_for(lambda: sum(w.checked > 0 for w in store.live_workers()) == 3, 20,
             "the three workers to be writing")  # fmt: skip
    time.sleep(2 * settings.deployment.heartbeat_interval)
    watcher = mariadb.connect()
    write_backs = (
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
        "WHERE INFO LIKE 'UPDATE JSON_TABLE%STRAIGHT_JOIN `user_block_status` AS t%'"
    )
    most, stall = (
        0,
        4 * settings.deployment.heartbeat_ttl,
    )  # four leases: long past the point where it gave way
    scalar(sql, "LOCK TABLES user_block_status READ")
    try:
        until = time.monotonic() + stall
        while time.monotonic() < until:
            most = max(most, scalar(watcher, write_backs))
            time.sleep(0.05)
    finally:
        scalar(sql, "UNLOCK TABLES")
    watcher.close()
    assert most == 1, f"{most} write-backs waited in MySQL at once with one write slot"
    wait_for(lambda: scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0") == 0, 20,
             "every row checked once the stall ended")  # fmt: skip
    assert all(worker.poll() is None for worker in workers)
