"""Heartbeats add their member to the registry only now and then, or where its key had expired
(shared/process/presence.py, Store.stage_heartbeat and heartbeat_replies): the reclaimer removes
a member only once its key is gone, so a beat that finds its key alive has nothing to add."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest
import redis

from recheck.shared.core.records import DispatcherBeat, WorkerBeat
from recheck.shared.process.presence import QUIET_EVERY, REGISTER_EVERY, Presence, publish_together
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.redis.store import Store
from tests.scripts.conftest import Clock
from tests.support.servers import free_port


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


def test_a_quiet_member_publishes_one_beat_in_three_with_a_key_that_lives_as_much_longer(make_store):
    """A worker lane holding nothing (or a standby) beats one heartbeat in QUIET_EVERY, its key
    living (QUIET_EVERY - 1) intervals longer; busy, every heartbeat with the short TTL, and the
    take that makes it busy shortens a long-lived key at once."""
    store = make_store(Clock(), partitions=2)
    quiet = [True]
    presence = Presence(store, "worker", "w1", ttl_seconds=5, interval_seconds=1, quiet=lambda: quiet[0])
    keys = [k.heartbeat("w1") for k in store.partitions]

    def published(beat: int) -> bool:
        presence.publish(WorkerBeat(id="w1", checked=beat))
        return all(WorkerBeat.from_json(json.loads(store.client.get(key))).checked == beat for key in keys)

    assert [published(beat) for beat in range(7)] == [True, False, False, True, False, False, True]
    assert QUIET_EVERY == 3
    assert all(6_000 < store.client.pttl(key) <= 7_000 for key in keys)  # 5 s + 2 intervals
    quiet[0] = False
    presence.busy_again()  # a take returned entries
    assert all(store.client.pttl(key) <= 5_000 for key in keys)
    assert [published(beat) for beat in range(10, 13)] == [True, True, True]
    presence.busy_again()  # already short-lived: no command
    quiet[0] = True
    assert [published(beat) for beat in range(20, 24)] == [True, False, False, True]


def test_a_beat_given_as_a_callable_is_made_only_when_it_is_published(make_store):
    """A worker hands its lanes' beats over as callables: a quiet lane's record (its counters,
    lateness buckets, rows in hand) is made for the one beat in QUIET_EVERY that goes out."""
    store = make_store(Clock())
    quiet = [True]
    presence = Presence(store, "worker", "w1", ttl_seconds=5, interval_seconds=1, quiet=lambda: quiet[0])
    made = []

    def beat() -> WorkerBeat:
        made.append(len(made))
        return WorkerBeat(id="w1", checked=len(made))

    for _ in range(7):
        publish_together([(presence, beat)])
    assert len(made) == 3  # the beats published: the first, the fourth, the seventh
    assert WorkerBeat.from_json(json.loads(store.client.get(store.keys.heartbeat("w1")))).checked == 3
    quiet[0] = False
    for _ in range(2):
        publish_together([(presence, beat)])
    assert len(made) == 5  # busy: every beat


def test_a_dispatcher_lane_beats_quietly_only_in_the_role_it_last_published(make_store):
    """A standby, or a leader whose polls read nothing, may skip beats; a change of role is
    published at the next heartbeat, and at every one after it until one lands (status shows who
    leads): a beat lost with Redis is not taken for published."""
    from recheck.dispatcher.lane import DispatchLane

    class Lane:  # what beats_quietly and role_published use of a DispatchLane
        held_beaten = None
        held_asked = None
        quiet = True
        lease = type("L", (), {"held": False})()

    lane = Lane()
    store = make_store(Clock())
    presence = Presence(
        store, "dispatcher", "d1", ttl_seconds=5, interval_seconds=1,
        quiet=DispatchLane.beats_quietly.__get__(lane), published=DispatchLane.role_published.__get__(lane),
    )  # fmt: skip
    key = presence.key

    def published(beat: int) -> bool:
        presence.publish(DispatcherBeat(id="d1", dispatched=beat))
        return json.loads(store.client.get(key))["dispatched"] == beat

    assert [published(beat) for beat in range(3)] == [True, True, False]  # first, quiet, skipped
    lane.lease.held = True
    assert [published(beat) for beat in range(10, 14)] == [True, True, False, False]  # now leading: at once
    lane.quiet = False
    assert published(20)  # its poll read rows: every beat
    lane.quiet, lane.lease.held = True, False
    with redis_away(presence), pytest.raises(REDIS_DOWN):
        published(30)  # the change to standby is lost with its round trip
    assert [published(beat) for beat in range(31, 35)] == [True, True, False, False]  # at once, again


@contextlib.contextmanager
def redis_away(presence: Presence) -> Iterator[None]:
    """For a while, the presence's store is a Redis nobody listens on."""
    live = presence.store
    presence.store = Store(redis.Redis(port=free_port(), socket_connect_timeout=1), live.partitions)
    try:
        yield
    finally:
        presence.store = live


def test_a_quiet_beat_lost_with_redis_is_published_at_the_next_heartbeat_not_skipped(make_store):
    """A quiet member's beat that never reached Redis does not count as published: its key was
    last set a whole quiet period ago, and two more skipped beats could let it expire."""
    store = make_store(Clock())
    presence = Presence(store, "worker", "w1", ttl_seconds=5, interval_seconds=1, quiet=lambda: True)

    def published(beat: int) -> bool:
        presence.publish(WorkerBeat(id="w1", checked=beat))
        return WorkerBeat.from_json(json.loads(store.client.get(presence.key))).checked == beat

    assert [published(beat) for beat in range(3)] == [True, False, False]
    with redis_away(presence), pytest.raises(REDIS_DOWN):
        published(3)  # the quiet beat due now
    assert [published(beat) for beat in range(4, 8)] == [True, False, False, True]
