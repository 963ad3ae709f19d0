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
