"""Idle workers block on wake tokens, one woken per token (issue 50, item 2): a page wakes one
worker, which wakes the next only if its take leaves entries. Before, every idle worker blocked
on the queue itself and each page woke all of them, each for a sliver of it. Every path that
leaves entries for a take must leave a token too: a missing one makes an idle worker wait for
its next look (workers/intake.py LOOK_EVERY, 5 s)."""

from __future__ import annotations

import threading
import time

import pytest

from recheck.shared.redis.store import STOPPING_TTL_MS, Counts
from recheck.workers.intake import IDLE_WAIT
from tests.scripts.conftest import OWNER, Clock
from tests.support.servers import wait_for


def blocked(store) -> int:
    """Clients blocked in a BLPOP right now (flag b), not idle ones whose last command was one."""
    return sum(client["cmd"] == "blpop" and "b" in client["flags"] for client in store.client.client_list())


def tokens(store) -> int:
    return store.client.llen(store.keys.wake)


def page(n: int, start: int = 1) -> list[bytes]:
    return [f"{i}:1000".encode() for i in range(start, start + n)]


def test_a_page_wakes_one_worker_and_a_take_that_leaves_entries_wakes_the_next(make_store):
    store = make_store(Clock())
    store.push(OWNER, page(10))
    assert tokens(store) == 1  # one, whatever the page's size
    store.push(OWNER, page(10, start=11))
    assert tokens(store) == 1  # at most one waits: the woken worker takes what is there
    assert store.wait_for_work("w1", 0.1)
    assert tokens(store) == 0
    assert len(store.take("w1", 15).entries) == 15
    assert tokens(store) == 1  # five left: the next idle worker
    assert store.wait_for_work("w2", 0.1)
    assert len(store.take("w2", 15).entries) == 5
    assert tokens(store) == 0  # nothing left: nobody else is woken
    assert not store.wait_for_work("w3", 0.05)


def test_entries_given_back_and_reclaimed_wake_a_worker(make_store):
    store = make_store(Clock())
    store.push(OWNER, page(4))
    store.client.delete(store.keys.wake)
    held = store.take("w1", 2).entries
    store.client.delete(store.keys.wake)
    store.acknowledge("w1", [], held, Counts(), whole=True)  # given back untouched (a stop)
    assert tokens(store) == 1
    store.client.delete(store.keys.wake)
    store.take("dead", 4)  # a worker that never beats
    store.client.delete(store.keys.wake)
    assert store.reclaim(0, "dead", max_reclaims=5, groups=2) == (4, 0)
    assert tokens(store) == 1


def test_a_take_held_back_by_the_limits_wakes_nobody(make_store):
    store = make_store(Clock(), max_in_flight=2)
    store.push(OWNER, page(10))
    store.client.delete(store.keys.wake)
    assert len(store.take("w1", 10, running=0).entries) == 2
    assert tokens(store) == 1  # entries left, and this take was not held back: another worker may have room
    store.client.delete(store.keys.wake)
    taken = store.take("w2", 10, running=0)
    assert taken.entries == [] and taken.limited  # the room is spent: held back
    assert tokens(store) == 0  # waking another worker would only hold it back too


@pytest.mark.parametrize("partitions", [1, 3])
def test_a_stopping_worker_ends_its_idle_waits_at_once_and_others_sleep_on(make_store, partitions):
    """An idle lane blocks up to IDLE_WAIT for a token; its worker's stop ends the wait at once
    (its own token, in every partition), not at the timeout, and leaves the other workers' waits
    and the wake tokens alone."""
    store = make_store(Clock(), partitions=partitions)
    results: dict[str, tuple[bool, float]] = {}

    def wait(worker: str) -> None:
        started = time.monotonic()
        woken = store.wait_for_work(worker, IDLE_WAIT)
        results[worker] = (woken, time.monotonic() - started)

    threads = [threading.Thread(target=wait, args=(w,)) for w in ("stopping", "other")]
    for thread in threads:
        thread.start()
    wait_for(lambda: blocked(store) == 2, 5, "both waits blocked in Redis")
    store.wake_stopping("stopping")
    threads[0].join(IDLE_WAIT)
    assert not threads[0].is_alive() and "other" not in results
    woken, waited = results["stopping"]
    assert not woken and waited < 1.5, waited  # not a token for work, and not the timeout
    assert threads[1].is_alive()  # the other worker sleeps on
    started = time.monotonic()
    assert not store.wait_for_work("stopping", IDLE_WAIT)  # a later wait of the stopping one: at once too
    assert time.monotonic() - started < 1.5
    for k in store.partitions:  # the tokens put back still expire: nothing outlives the stop
        assert 0 < store.client.pttl(k.stopping("stopping")) <= STOPPING_TTL_MS
    assert sum(store.client.llen(k.wake) for k in store.partitions) == 0  # no work token taken or left
    for k in store.partitions:  # work for the other one, wherever it waits
        store.client.rpush(k.wake, b"1")
    threads[1].join(IDLE_WAIT)
    assert results["other"][0] is True
