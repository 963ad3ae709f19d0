"""The take script's limits against a clock the test sets: only a real Redis, no MySQL, no sleep.

The take scripts read the Redis clock (one clock for every worker's host) unless given the time
(issue 46, items 3 and 4: time passed in, so scripts are tested in milliseconds, not by waiting).
Here a simulated 10 s of takes every 10 ms runs in well under a second.
"""

from __future__ import annotations

from recheck.shared.redis.store import Counts
from tests.scripts.conftest import OWNER, Clock

STEP_US = 10_000  # a take every 10 ms of the test's clock


def test_a_rate_limit_hands_out_rate_times_t_plus_one_burst_on_the_scripts_clock(make_store):
    clock = Clock()
    store = make_store(clock, rate_limit=100.0)  # a burst of 10 (0.1 s of rate)
    store.push(OWNER, [b"%d:1000" % i for i in range(1, 3001)])
    taken_at: list[int] = []
    for _ in range(1000):  # 10 s of the test's clock
        taken = store.take("w1", 50)
        taken_at += [clock.now_us] * len(taken.entries)
        if not taken.entries:
            assert 0 < taken.limited <= 0.1  # told how long until the next token
        clock.now_us += STEP_US
    assert 1000 <= len(taken_at) <= 1000 + 10  # rate x T (+ one burst)
    for start in range(0, 10_000_000, 1_000_000):  # and in every second of it
        window = [t for t in taken_at if taken_at[0] + start <= t < taken_at[0] + start + 1_000_000]
        assert len(window) <= 100 + 10


def test_a_groups_rate_limit_holds_one_group_back_and_not_the_others(make_store):
    clock = Clock()
    store = make_store(clock, group_column="merchant", group_rate_limit=10.0)
    big, small = b"big".hex().encode(), b"small".hex().encode()
    store.push(OWNER, [b"%d:1000:%s" % (i, big) for i in range(1, 501)])  # a 500-order import
    store.push(OWNER, [b"%d:1000:%s" % (i, small) for i in range(1001, 1006)])
    got: dict[bytes, int] = {big: 0, small: 0}
    for _ in range(100):  # 1 s of the test's clock
        for entry in store.take("w1", 50).entries:
            got[big if int(entry.split(b":")[0]) <= 500 else small] += 1
        clock.now_us += STEP_US
    assert got[small] == 5  # never behind the other merchant's import
    assert 10 <= got[big] <= 10 + 1  # its own 10/s (and one token ahead)


def test_a_checks_end_gives_its_groups_room_back_at_the_next_take_and_its_ack_gives_nothing_twice(make_store):
    """group_max_in_flight counts calls (issue 47, item 2): a per-row worker names the held
    entries whose checks ended at its next take; their room goes back then, not after their
    write-back, and only while the worker still holds them."""
    store = make_store(Clock(), group_column="merchant", group_max_in_flight=2)
    acme = b"acme".hex().upper()
    store.push(OWNER, [b"%d:1000:%s" % (i, acme.encode()) for i in range(1, 11)])
    held = store.take("w1", 10).entries
    assert len(held) == 2 and store.take("w2", 10).entries == []  # acme is full
    # w1's first check ended, its write-back not done yet: its room goes to w1's next take.
    more = store.take("w1", 10, running=1, ended=[held[0]]).entries
    assert len(more) == 1 and int(store.client.hget(store.keys.groups_running, acme)) == 2
    store.acknowledge("w1", [held[0]], [], Counts(checked=1), whole=False)  # the write-back, later
    assert int(store.client.hget(store.keys.groups_running, acme)) == 2  # nothing given twice
    assert store.take("w2", 10).entries == []
    # Entries the worker no longer holds (reclaimed from it meanwhile) give nothing back.
    store.client.srem(store.keys.processing("w1"), held[1])
    assert store.take("w1", 10, running=1, ended=[held[1]]).entries == []
    assert int(store.client.hget(store.keys.groups_running, acme)) == 2
    # The group was full: the room an ended check gives back wakes an idle worker.
    store.client.delete(store.keys.wake)
    assert len(store.take("w3", 10, running=0, ended=[]).entries) == 0
    store.client.sadd(store.keys.processing("w1"), held[1])
    assert len(store.take("w1", 0, ended=[more[0]]).entries) == 0  # limit 0: only the room moves
    assert store.client.llen(store.keys.wake) == 1
    # A write-back given back after its slot was (a stuck one): to the head of its group's list.
    store.acknowledge("w1", [], [more[0]], Counts(), whole=False)
    assert store.client.lindex(store.keys.group_list(acme.encode()), 0) == more[0]
    assert store.take("w2", 10).entries == [more[0]]
