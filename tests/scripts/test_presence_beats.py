"""Heartbeats add their member to the registry only now and then, or where its key had expired
(shared/process/presence.py, Store.stage_heartbeat and heartbeat_replies): the reclaimer removes
a member only once its key is gone, so a beat that finds its key alive has nothing to add."""

from __future__ import annotations

from recheck.shared.core.records import DispatcherBeat, WorkerBeat
from recheck.shared.process.presence import REGISTER_EVERY, Presence
from tests.scripts.conftest import Clock


def test_a_beat_registers_again_a_member_whose_key_expired(make_store):
    store = make_store(Clock())
    presence = Presence(store, "worker", "w1", ttl_seconds=60)
    key, registry = store.presence_keys("worker", "w1")
    presence.publish(WorkerBeat(id="w1"))  # the first beat registers
    assert store.client.smembers(registry) == {b"w1"}
    store.client.delete(key)  # expired: the reclaimer took it for dead and removed it
    store.client.srem(registry, "w1")
    presence.publish(WorkerBeat(id="w1"))  # not a registering beat, but the key was gone
    assert store.client.smembers(registry) == {b"w1"}
    assert store.client.exists(key)


def test_a_registry_deleted_under_live_keys_is_filled_again_within_a_few_beats(make_store):
    store = make_store(Clock())
    presence = Presence(store, "worker", "w1", ttl_seconds=60)
    _, registry = store.presence_keys("worker", "w1")
    presence.publish(WorkerBeat(id="w1"))
    store.client.delete(registry)
    for _ in range(REGISTER_EVERY - 1):
        presence.publish(WorkerBeat(id="w1"))
    assert store.client.smembers(registry) == set()  # the key lived: these beats added nothing
    presence.publish(WorkerBeat(id="w1"))
    assert store.client.smembers(registry) == {b"w1"}


def test_workers_count_the_registry_for_their_write_slots_dispatchers_do_not(make_store):
    store = make_store(Clock())
    worker = Presence(store, "worker", "w1", ttl_seconds=60, count=True)
    Presence(store, "worker", "w2", ttl_seconds=60).publish(WorkerBeat(id="w2"))
    worker.publish(WorkerBeat(id="w1"))
    assert worker.registered == 2
    Presence(store, "worker", "w3", ttl_seconds=60).publish(WorkerBeat(id="w3"))
    worker.publish(WorkerBeat(id="w1"))
    assert worker.registered == 3  # its first beats all count: workers starting together
    for _ in range(REGISTER_EVERY - 1):  # beats 2 .. REGISTER_EVERY (a registering one)
        worker.publish(WorkerBeat(id="w1"))
    Presence(store, "worker", "w4", ttl_seconds=60).publish(WorkerBeat(id="w4"))
    for _ in range(REGISTER_EVERY - 1):
        worker.publish(WorkerBeat(id="w1"))
        assert worker.registered == 3  # then counted on the registering beats only
    worker.publish(WorkerBeat(id="w1"))
    assert worker.registered == 4


def test_dispatchers_whose_keys_expired_leave_their_registry_in_every_partition(make_store):
    """A dispatcher killed before it could withdraw stays registered with its key gone: the
    leader's reclaim job removes it (a live one stays, and one whose key merely lapsed registers
    again at its next beat)."""
    store = make_store(Clock(), partitions=3)
    live, paused = Presence(store, "dispatcher", "d-live", 60), Presence(store, "dispatcher", "d-paused", 60)
    for presence in (live, paused, Presence(store, "dispatcher", "d-killed", 60)):
        presence.publish(DispatcherBeat(id=presence.member))
    for k in store.partitions:  # killed (never withdrew), and paused past its TTL
        store.client.delete(k.dispatcher_heartbeat("d-killed"), k.dispatcher_heartbeat("d-paused"))
    assert store.forget_dead_dispatchers() == 6  # two in each of the three partitions
    for k in store.partitions:
        assert store.client.smembers(k.dispatchers) == {b"d-live"}
    assert store.forget_dead_dispatchers() == 0
    paused.publish(DispatcherBeat(id="d-paused"))  # it wakes up: its key was gone, it registers
    assert {d.id for d in store.live_dispatchers()} == {"d-live", "d-paused"}
