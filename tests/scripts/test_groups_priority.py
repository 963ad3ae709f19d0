"""Groups with priority (issue 46, item 6): each group's priority rows wait in a list of their own,
taken before the group's other rows and within the group's limits. Only a real Redis, no MySQL:
the scripts as a dispatcher and workers call them, on a clock the test sets."""

from __future__ import annotations

import pytest

from recheck.shared.redis.store import Counts, Store
from tests.scripts.conftest import OWNER, Clock

ACME, GLOBEX = b"acme".hex().encode(), b"globex".hex().encode()


@pytest.fixture
def make_store(make_store):
    """A grouped workload with a priority column, on a clock the test sets."""

    def make(**values) -> Store:
        return make_store(Clock(), **{"group_column": "merchant", "priority_column": "express", **values})

    return make


def entries(first: int, count: int, group: bytes) -> list[bytes]:
    return [b"%d:1000:%s" % (i, group) for i in range(first, first + count)]


def ids(taken: list[bytes]) -> list[int]:
    return [int(entry.split(b":")[0]) for entry in taken]


def finish(store: Store, worker: str, taken: list[bytes]) -> None:
    store.acknowledge(worker, taken, [], Counts(checked=len(taken)), whole=False)


def test_a_merchants_express_rows_start_before_its_import_and_within_its_limit(make_store):
    """The order outbox of the issue: a merchant's 2,000-order import waits; its express orders,
    dispatched after, start next, never more than group_max_in_flight of its rows at once, and
    another merchant's rows keep their turn."""
    store = make_store(group_max_in_flight=3, priority_share=0.0)
    store.push(OWNER, entries(1, 2000, ACME))  # the import
    held = store.take("w1", 3).entries
    assert ids(held) == [1, 2, 3] and store.take("w2", 10).entries == []  # acme is full
    store.push(OWNER, entries(5001, 5, ACME), priority=True)  # express, after the import
    store.push(OWNER, entries(9001, 2, GLOBEX))
    assert ids(store.take("w2", 10).entries) == [9001, 9002]  # acme's limit holds, globex goes
    assert store.queue_depth(True) == 5 and store.queue_depth(False) == 1997
    finish(store, "w1", held[:2])  # two of acme's checks end: room for two
    express = store.take("w2", 10).entries
    assert ids(express) == [5001, 5002]  # its express rows first, in order, within its limit
    finish(store, "w1", held[2:])
    finish(store, "w2", express)
    assert ids(store.take("w2", 10).entries) == [5003, 5004, 5005]
    assert store.queue_depth(True) == 0 and store.queue_depth(None) == 1997
    assert not store.client.exists(store.keys.groups_urgent)  # no priority list holds entries


def test_while_both_wait_the_rest_get_their_share_of_a_groups_takes(make_store):
    """priority_share within a group: while both of its lists wait, that share of what it gives
    comes from its other rows all the same (carried over between takes), so they never starve."""
    store = make_store(priority_share=0.25)
    store.push(OWNER, entries(1, 400, ACME))
    store.push(OWNER, entries(10_001, 400, ACME), priority=True)
    express = rest = 0
    for _ in range(100):
        taken = ids(store.take("w1", 4).entries)
        express += sum(1 for i in taken if i > 10_000)
        rest += sum(1 for i in taken if i <= 10_000)
    assert (express, rest) == (300, 100)
    # Either list's shortfall is filled from the other: one take drains both.
    assert len(store.take("w1", 1000).entries) == 400
    assert not store.client.sismember(store.keys.groups_urgent, ACME)
    assert store.queue_depth(True) == 0 and store.queue_depth(None) == 0


def test_a_group_with_only_express_rows_joins_the_ring_once_and_leaves_it_when_drained(make_store):
    store = make_store()
    store.push(OWNER, entries(1, 3, ACME), priority=True)
    store.push(OWNER, entries(4, 2, ACME))  # its other list fills: already in the ring
    store.push(OWNER, entries(7, 1, ACME), priority=True)
    assert store.client.lrange(store.keys.group_ring, 0, -1) == [ACME]
    assert store.group_overview().waiting == 1 and store.group_overview().biggest == []
    assert ids(store.take("w1", 100).entries) == [1, 2, 3, 7, 4, 5]
    assert store.client.llen(store.keys.group_ring) == 0
    assert store.queue_depth(None) == 0
    assert store.client.get(store.keys.groups_urgent_waiting) == b"0"


def test_now_and_given_back_entries_go_to_the_head_of_the_list_taken_first(make_store):
    store = make_store()
    store.push(OWNER, entries(1, 2, ACME), priority=True)
    store.push(OWNER, entries(3, 2, ACME))
    store.push(OWNER, [b"50:2000:%s" % ACME], head=True)  # `now`: before the waiting express rows
    taken = store.take("w1", 1).entries
    assert ids(taken) == [50]
    store.acknowledge("w1", [], taken, Counts(), whole=True)  # not started: given back
    assert ids(store.take("w1", 2).entries) == [50, 1]


def test_express_entries_waiting_are_held_not_orphans_and_inspect_finds_them(make_store):
    store = make_store()
    store.push(OWNER, entries(1, 2, ACME))
    store.push(OWNER, entries(7, 1, ACME), priority=True)
    candidates = [b"7", b"1000", b"1", b"1000"]
    assert store.not_seen_anywhere(0, candidates, []) == []
    assert store.release_orphans(0, candidates, []) == []
    found = store.whereabouts(b"7", ACME)
    assert (found["group_position"], found["group_depth"], found["priority_queue"]) == (1, 3, True)
    found = store.whereabouts(b"1", ACME)
    assert (found["group_position"], found.get("priority_queue")) == (2, None)


def test_without_the_priority_column_what_the_groups_priority_lists_hold_is_still_taken_first(make_store):
    store = make_store()
    store.push(OWNER, entries(1, 3, ACME))
    store.push(OWNER, entries(7, 2, ACME), priority=True)
    plain = make_store(priority_column="")  # the same keys, the priority column removed
    assert ids(plain.take("w1", 3).entries) == [7, 8, 1]
    assert ids(plain.take("w1", 10).entries) == [2, 3]
    assert plain.queue_depth(None) == 0 and not plain.client.exists(plain.keys.groups_urgent)
