"""The asked thread's look before its reads (dispatcher/asked.py, Store.asked_waiting): whether
each workload's asked lists hold anything, every partition's, in one round trip per Redis."""

from __future__ import annotations

from recheck.shared.redis.store import Store
from tests.scripts.conftest import Clock, command_calls


def test_the_look_sees_an_asked_id_or_one_asked_while_in_flight_in_any_partition(make_store):
    one, three = make_store(Clock()), make_store(Clock(), partitions=3, workload="three")
    assert Store.asked_waiting([one, three]) == [False, False]
    one.ask([b"7"])
    assert Store.asked_waiting([one, three]) == [True, False]
    three.client.hset(three.partitions[2].again, "9", 1)  # asked while in flight, in its last partition
    assert Store.asked_waiting([one, three]) == [True, True]
    assert one.take_asked(10)[0] == [b"7"]
    assert Store.asked_waiting([one, three]) == [False, True]


def test_while_nothing_is_asked_the_look_is_one_command_for_every_workload(make_store):
    made = [make_store(Clock(), workload=f"w{n}") for n in range(5)]
    redis = made[0].client
    stores = [Store(redis, store.partitions) for store in made]  # one process: one client
    redis.config_resetstat()
    assert Store.asked_waiting(stores) == [False] * 5
    assert command_calls(redis) == {"cmdstat_exists": 1}
