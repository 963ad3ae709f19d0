"""One take script per ordering (issue 46, item 3): each take reads its own ordering's lists only,
and the leader settles what an older configuration left in the others, once (settle.lua), when
it takes the lease. Only a real Redis, no MySQL, on a clock the test sets."""

from __future__ import annotations

from recheck.shared.redis.store import Counts, Store
from tests.scripts.conftest import OWNER, Clock, command_calls

ACME, GLOBEX = b"acme".hex().encode(), b"globex".hex().encode()
GROUPS = {"group_column": "merchant"}
PRIORITY = {"priority_column": "express"}


def entries(first: int, count: int, group: bytes | None = None) -> list[bytes]:
    tail = b":" + group if group else b""
    return [b"%d:1000%s" % (i, tail) for i in range(first, first + count)]


def ids(taken: list[bytes]) -> list[int]:
    return [int(entry.split(b":")[0]) for entry in taken]


def take_all(store: Store, worker: str = "w1") -> list[int]:
    got: list[bytes] = []
    while batch := store.take(worker, 1000).entries:
        got += batch
    return ids(got)


def test_each_ordering_takes_from_its_own_lists_only(make_store):
    """A fifo take does not read the priority list, nor a priority take the groups' lists: what
    waits there waits for the leader's settling, not for every take to look."""
    clock = Clock()
    with_priority = make_store(clock, **PRIORITY, priority_share=0.0)
    with_priority.push(OWNER, entries(9, 1))  # (a priority page lands here while both are empty)
    with_priority.push(OWNER, entries(1, 3), priority=True)
    fifo = make_store(clock)
    assert fifo.take("w1", 10).entries == entries(9, 1)  # the queue only
    assert fifo.take("w1", 10).entries == []
    grouped = make_store(clock, **GROUPS)
    grouped.push(OWNER, entries(10, 2, ACME))
    assert with_priority.take("w1", 10).entries == entries(1, 3)  # its own lists, not the groups'
    assert ids(grouped.take("w1", 10).entries) == [10, 11]


def test_priority_removed_the_priority_entries_go_first_in_the_queue_once(make_store):
    clock = Clock()
    before = make_store(clock, **PRIORITY)
    assert before.settle(OWNER).now == "priority"
    before.push(OWNER, entries(1, 3))  # first: a priority page lands here while both are empty
    before.push(OWNER, entries(4, 3), priority=True)
    fifo = make_store(clock)
    done = fifo.settle(OWNER)
    assert (done.before, done.now, done.moved, done.released) == ("priority", "fifo", 3, 0)
    assert take_all(fifo) == [4, 5, 6, 1, 2, 3]  # the priority rows first, in their order
    assert fifo.settle(OWNER).changed is False  # settled: one read, nothing moved
    assert fifo.client.get(fifo.keys.ordering) == b"fifo"


def test_groups_removed_every_groups_entries_go_to_the_queue_held_back_or_not(make_store):
    """Groups in the ring, asleep (rate) and full (room), with priority lists: all their entries
    reach the plain lists, and the groups' state goes (entries workers hold are acknowledged or
    given back as the plain ordering's)."""
    clock = Clock()
    grouped = make_store(clock, **GROUPS, **PRIORITY, group_max_in_flight=1)
    grouped.settle(OWNER)
    grouped.push(OWNER, entries(1, 4, ACME))
    grouped.push(OWNER, entries(10, 2, ACME), priority=True)
    grouped.push(OWNER, entries(20, 3, GLOBEX))
    held = grouped.take("w1", 2).entries  # one of each: both groups full now
    assert sorted(ids(held)) == [10, 20]
    plain = make_store(clock, **PRIORITY)
    done = plain.settle(OWNER)
    assert (done.before, done.moved, done.released) == ("groups with priority", 7, 0)
    assert plain.client.lrange(plain.keys.priority_queue, 0, -1) == entries(11, 1)
    assert sorted(take_all(plain)) == [1, 2, 3, 4, 11, 21, 22]
    keys = plain.keys
    gone = (keys.group_ring, keys.groups_full, keys.groups_sleeping, keys.groups_waiting, keys.groups_urgent)
    assert plain.client.exists(*gone, keys.group_of, keys.groups_running) == 0  # no group holds room now
    assert plain.acknowledge("w1", held, [], Counts(checked=2), whole=False).still_held == 2
    assert plain.client.hlen(keys.inflight) == 7  # those two released; the seven taken since still held


def test_going_to_groups_the_plain_entries_are_released_to_be_read_again_with_their_groups(make_store):
    """A plain entry does not say its group: released (its id leaves inflight and `again`, a drop
    mark goes) and asked for again: the dispatcher pushes it, with its group, as it pushes `now`."""
    clock = Clock()
    plain = make_store(clock, **PRIORITY)
    plain.settle(OWNER)
    plain.push(OWNER, entries(1, 3))
    plain.push(OWNER, entries(4, 2), priority=True)
    keys = plain.keys
    plain.client.hset(keys.again, b"2", b"1")
    plain.client.sadd(keys.dropped, b"3:1000")
    plain.client.rpush(keys.queue, b"2:999")  # stale: id 2 is in flight for another due time
    grouped = make_store(clock, **GROUPS)
    done = grouped.settle(OWNER)
    # the stale entry goes without a release (the log line counts the ids asked for again)
    assert (done.before, done.now, done.moved, done.released) == ("priority", "groups", 0, 5)
    assert grouped.client.hlen(keys.inflight) == 0
    assert grouped.client.lrange(keys.asked, 0, -1) == [b"4", b"5", b"1", b"2", b"3"]
    assert not grouped.client.exists(keys.dropped, keys.queue, keys.priority_queue, keys.again)
    grouped.push(OWNER, entries(1, 3, ACME), head=True)  # asked: pushed again, with their groups
    assert sorted(take_all(grouped)) == [1, 2, 3]


def test_a_big_backlog_is_settled_in_several_calls_nothing_lost_or_doubled(make_store):
    clock = Clock()
    before = make_store(clock, **PRIORITY)
    before.settle(OWNER)
    before.push(OWNER, entries(30_001, 2))  # first: a priority page lands here while both are empty
    for start in range(1, 25_001, 5000):
        before.push(OWNER, entries(start, 5000), priority=True)
    fifo = make_store(clock)
    done = fifo.settle(OWNER)  # 10,000 entries a script call: three calls
    assert done.moved == 25_000
    assert fifo.client.llen(fifo.keys.queue) == 25_002
    assert ids(fifo.client.lrange(fifo.keys.queue, 0, 2)) == [1, 2, 3]
    assert ids(fifo.client.lrange(fifo.keys.queue, -3, -1)) == [25_000, 30_001, 30_002]


def test_an_empty_take_tells_a_worker_whose_settings_order_the_workload_otherwise(make_store):
    clock = Clock()
    leader = make_store(clock, **PRIORITY)
    worker = make_store(clock)
    assert worker.take("w1", 10).settled == ""  # nothing recorded yet (an older leader)
    leader.settle(OWNER)
    leader.push(OWNER, entries(9, 1))
    leader.push(OWNER, entries(1, 2), priority=True)
    assert worker.take("w1", 10).entries == entries(9, 1)
    assert worker.take("w1", 10).settled == "priority"  # its lists are not the ones filled
    assert leader.take("w2", 1).settled == ""
    leader.push(OWNER, entries(5, 1))
    assert worker.take("w1", 10).entries == entries(5, 1)  # a take that found work says nothing
    assert worker.take("w1", 10).settled == "priority"


def test_only_the_lease_holder_settles(make_store):
    """A deposed leader of other settings, waking late, must not undo what the new one settled."""
    clock = Clock()
    grouped = make_store(clock, **GROUPS)
    grouped.settle(OWNER)
    grouped.push(OWNER, entries(1, 3, ACME))
    stale = make_store(clock)
    assert stale.settle("a-deposed-dispatcher") is None
    assert grouped.client.get(grouped.keys.ordering) == b"groups"
    assert ids(grouped.take("w1", 10).entries) == [1, 2, 3]  # nothing moved


def test_entries_given_back_into_another_orderings_lists_are_settled_on_the_next_round(make_store):
    """Workers of the old settings still run after the change: what they hold and give back goes
    to their ordering's lists. The leader's next settling round (every few seconds) finds it."""
    clock = Clock()
    grouped = make_store(clock, **GROUPS, group_max_in_flight=1)
    grouped.settle(OWNER)
    grouped.push(OWNER, entries(1, 3, ACME))
    held = grouped.take("old", 5).entries  # a grouped worker holds one as the group column goes
    fifo = make_store(clock)
    assert fifo.settle(OWNER).moved == 2
    grouped.acknowledge("old", [], held, Counts(), whole=True)  # it gives it back on its way out
    assert fifo.queue_depth() == 3  # no group of its is known now: to the plain queue
    assert sorted(take_all(fifo)) == [1, 2, 3]
    # And the other way: a plain entry given back under a grouped leader is asked for again.
    fifo.push(OWNER, entries(7, 1))
    plain_held = fifo.take("old", 5).entries
    again = make_store(clock, **GROUPS)
    again.settle(OWNER)
    fifo.acknowledge("old", [], plain_held, Counts(), whole=True)
    assert fifo.client.lrange(fifo.keys.queue, 0, -1) == entries(7, 1)
    done = again.settle(OWNER)
    assert (done.changed, done.released) == (False, 1)
    assert again.client.lrange(again.keys.asked, 0, -1) == [b"7"]


def test_a_settled_workload_costs_three_reads_and_a_leftover_still_settles(make_store):
    """The leader looks every few seconds, idle or not: with nothing in another ordering's keys
    its look is the lease, the name and one EXISTS; one entry given back into the priority list,
    or one group's state left behind, is still found on the next look."""
    clock = Clock()
    with_priority = make_store(clock, **PRIORITY)
    fifo = make_store(clock)
    fifo.settle(OWNER)
    redis = fifo.client
    redis.config_resetstat()
    assert fifo.settle(OWNER).moved == 0
    assert command_calls(redis) == {"cmdstat_evalsha": 1, "cmdstat_get": 2, "cmdstat_exists": 1}
    fifo.push(OWNER, entries(9, 1))
    with_priority.push(OWNER, entries(1, 2), priority=True)  # an old priority worker's give-back
    done = fifo.settle(OWNER)
    assert (done.changed, done.moved) == (False, 2)
    assert take_all(fifo) == [1, 2, 9]
    redis.hset(fifo.keys.groups_running, "acme", 1)  # a group's state, left behind
    fifo.settle(OWNER)
    assert not redis.exists(fifo.keys.groups_running)
