"""What an acknowledgement sees waiting (issue 50, item 2): a batch worker whose ack saw nothing
left for a take waits for work at once instead of taking nothing first (workers/batchloop.py).
The count must never say 0 while a take would find something: that would leave entries waiting
up to a blocking wait's timeout."""

from __future__ import annotations

from recheck.shared.redis.store import Counts
from tests.scripts.conftest import OWNER, Clock


def test_the_ack_counts_what_a_take_would_find_in_the_queue(make_store):
    store = make_store(Clock())
    store.push(OWNER, [b"1:1000", b"2:1000", b"3:1000"])
    taken = store.take("w1", 2).entries
    assert store.acknowledge("w1", taken, [], Counts(checked=2), whole=True).waiting == 1
    last = store.take("w1", 10).entries
    assert store.acknowledge("w1", last, [], Counts(checked=1), whole=True).waiting == 0
    assert store.take("w1", 10).entries == []  # the 0 was true


def test_entries_given_back_and_pushed_meanwhile_count(make_store):
    store = make_store(Clock())
    store.push(OWNER, [b"1:1000", b"2:1000"])
    taken = store.take("w1", 10).entries
    store.push(OWNER, [b"3:1000"])  # the dispatcher's next page, while the batch was checked
    acked = store.acknowledge("w1", taken[:1], taken[1:], Counts(checked=1), whole=True)
    assert acked.waiting == 2  # the one given back and the new one
    assert sorted(store.take("w1", 10).entries) == [b"2:1000", b"3:1000"]


def test_priority_entries_count(make_store):
    store = make_store(Clock(), priority_column="prio")
    store.push(OWNER, [b"1:1000"], priority=True)
    taken = store.take("w1", 10).entries
    assert taken == [b"1:1000"]
    store.push(OWNER, [b"2:1000"], priority=True)  # into the priority list, meanwhile
    assert store.acknowledge("w1", taken, [], Counts(checked=1), whole=True).waiting == 1


def test_a_grouped_workload_cannot_tell(make_store):
    store = make_store(Clock(), group_column="tenant")
    assert store.acknowledge("w1", [], [], Counts(), whole=True).waiting is None


def test_reclaimed_groups_count(make_store):
    store = make_store(Clock())
    store.push(OWNER, [b"1:1000", b"2:1000"])
    dead = store.take("dead", 1).entries  # a worker that never beats: its heartbeat is gone
    taken = store.take("w1", 1).entries
    assert store.reclaim(0, "dead", max_reclaims=5, groups=1) == (1, 0)  # one suspect group
    assert store.take("w1", 0).entries == []  # (only what landed: the suspect stays)
    assert store.acknowledge("w1", taken, [], Counts(checked=1), whole=True).waiting == 1
    assert store.take("w1", 10).entries == dead
