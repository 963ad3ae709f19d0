"""Idle workers block on wake tokens, one woken per token (issue 50, item 2): a page wakes one
worker, which wakes the next only if its take leaves entries. Before, every idle worker blocked
on the queue itself and each page woke all of them, each for a sliver of it. Every path that
leaves entries for a take must leave a token too: a missing one makes an idle worker wait for
its next look (workers/intake.py LOOK_EVERY, 5 s)."""

from __future__ import annotations

from recheck.shared.redis.store import Counts
from tests.scripts.conftest import OWNER, Clock


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
