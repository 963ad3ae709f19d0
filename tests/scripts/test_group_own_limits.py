"""Limits and weights per group (issue 47, item 3), on the scripts' clock: a group the group
limits table names keeps its own rate and room, exactly as the workload's group limits are kept,
and a weight of 3 gives it three times the share of the turns. Only a real Redis, no MySQL (the
table's copy into Redis is the dispatcher's, tests/integration/test_groups.py)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from recheck.shared.redis.store import Counts
from tests.scripts.conftest import OWNER, Clock

STEP_US = 10_000
SECOND_US = 1_000_000


def name(group: str) -> bytes:
    return group.encode().hex().upper().encode()


def backlog(store, groups: dict[str, int]) -> dict[int, str]:
    """Entries of each group pushed; id -> group."""
    group_of, next_id = {}, 1
    for group, count in groups.items():
        ids = range(next_id, next_id + count)
        store.push(OWNER, [b"%d:1000:%s" % (i, name(group)) for i in ids])
        group_of.update({i: group for i in ids})
        next_id += count
    return group_of


@pytest.mark.parametrize("sizes", ["10 each", "1 to 20"])
def test_a_weight_of_three_gets_three_times_the_share_while_both_wait(make_store, sizes):
    """Takes of one size, and of sizes that vary as a per-row worker's free slots do: a turn cut
    short goes on with the fraction of its share left, whatever the next take's size."""
    store = make_store(Clock(), group_column="merchant")
    group_of = backlog(store, {"big": 5000, "small": 5000, "other": 5000})
    store.set_group_limits({name("big").decode(): "::3"})
    got: Counter[str] = Counter()
    size = random.Random(7)
    for _ in range(200 if sizes == "10 each" else 190):
        taken = store.take("w1", 10 if sizes == "10 each" else size.randint(1, 20)).entries
        got.update(group_of[int(e.split(b":")[0])] for e in taken)
        store.acknowledge("w1", taken, [], Counts(checked=len(taken)), whole=True)
    print(f"weights 3, 1, 1, takes of {sizes}: {dict(got)}")
    assert 2.7 <= got["big"] / got["small"] <= 3.3, got
    assert 0.9 <= got["other"] / got["small"] <= 1.1, got


def test_a_groups_own_rate_and_room_hold_as_the_workloads_do(make_store):
    clock = Clock()
    store = make_store(clock, group_column="merchant", group_rate_limit=100.0)
    group_of = backlog(store, {"slow": 3000, "fast": 3000})
    store.set_group_limits({name("slow").decode(): "10::"})  # 10/s, the others 100/s
    got: Counter[str] = Counter()
    for _ in range(500):  # 5 s of the scripts' clock
        taken = store.take("w1", 50).entries
        got.update(group_of[int(e.split(b":")[0])] for e in taken)
        store.acknowledge("w1", taken, [], Counts(checked=len(taken)), whole=True)
        clock.now_us += STEP_US
    print(f"own rate 10/s beside 100/s, 5 s: {dict(got)}")
    assert 50 <= got["slow"] <= 50 + 1, got  # rate x T, and one token ahead
    assert 500 <= got["fast"] <= 500 + 10, got
    store.set_group_limits({name("fast").decode(): ":2:"})  # room for 2 at once, no rate of its own
    clock.now_us += SECOND_US
    held = store.take("w2", 50).entries
    assert sum(group_of[int(e.split(b":")[0])] == "fast" for e in held) <= 2
    assert "held back: 2 checks running" in store.group_state(name("fast"))
    store.set_group_limits({})  # the table emptied: the workload's limits again
    assert not store.client.exists(store.keys.groups_limits)


def test_an_emptied_groups_time_is_forgotten_once_passed_and_a_waiting_groups_kept(make_store):
    """The tokens' hash keeps a group's arrival time while the group waits, and while its time
    runs ahead of now; a group whose lists a take emptied is remembered with its time, which a
    later take deletes once it has passed (a time passed is as good as none)."""
    clock = Clock()
    store = make_store(clock, group_column="merchant", group_rate_limit=10.0)  # a burst of 1
    backlog(store, {"one": 1, "five": 5})
    rates, emptied = store.keys.group_rates, store.keys.group_rates_emptied
    one, five = name("one"), name("five")
    assert len(store.take("w1", 50).entries) == 2  # a token each: "one" emptied, "five" waits
    assert store.client.hexists(rates, one) and store.client.hexists(rates, five)
    assert store.client.zscore(emptied, one) == int(store.client.hget(rates, one))
    assert store.client.zscore(emptied, five) is None  # it waits: its time is needed
    assert 0 < store.client.pttl(emptied) <= 1100 and 0 < store.client.pttl(rates) <= 1100  # (0.1 s ahead)
    clock.now_us += SECOND_US  # both times passed
    assert len(store.take("w1", 50).entries) == 1  # "five" again, woken from its sleep
    assert not store.client.hexists(rates, one)  # forgotten
    assert store.client.hexists(rates, five) and not store.client.exists(emptied)

    def push(group: str, *ids: int) -> None:
        store.push(OWNER, [b"%d:1000:%s" % (i, name(group)) for i in ids])

    push("one", 101)
    store.take("w1", 50)  # emptied again: remembered with its new time
    newer = int(store.client.hget(rates, one))
    assert store.client.zscore(emptied, one) == newer > clock.now_us
    clock.now_us += 50_000  # not passed yet (a token at 10/s: 0.1 s ahead)
    push("other", 102)
    store.take("w1", 50)
    assert int(store.client.hget(rates, one)) == newer  # kept while it runs ahead of now
    push("one", 103, 104)  # back with two entries, visited after its time passed: a newer time
    clock.now_us += SECOND_US
    store.take("w1", 50)  # one of them (a burst of 1); the other waits
    assert int(store.client.hget(rates, one)) > newer  # not deleted: its newer time is needed
    assert store.client.zscore(emptied, one) is None  # and forgotten only once emptied again
    assert not store.client.exists(emptied)
