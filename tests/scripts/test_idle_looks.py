"""An idle worker waits for wake tokens and takes only when one comes, or every LOOK_EVERY
seconds (workers/intake.py): before, every blocking wait's timeout (1 s) was followed by an
empty take, a script call per workload per worker per second for nothing. The look covers what
no token announces (a token taken by a worker killed before its take); the clock is set here."""

from __future__ import annotations

from recheck.workers.intake import LOOK_EVERY, Intake
from tests.scripts.conftest import OWNER, Clock
from tests.support.clock import ManualClock


def idle_intake(store, worker: str = "w1") -> tuple[Intake, ManualClock]:
    intake = Intake(store, worker)
    intake.clock = clock = ManualClock(1000.0)
    return intake, clock


def test_after_an_empty_take_a_worker_waits_until_a_token_comes(make_store):
    store = make_store(Clock())
    intake, clock = idle_intake(store)
    assert not intake.idle()  # a new worker takes first
    assert intake.take(10) == []
    assert intake.idle()
    clock.now += LOOK_EVERY - 0.1
    assert intake.idle()
    store.push(OWNER, [b"1:1000", b"2:1000"])  # a page leaves a token
    assert intake.wait_for_work(0.1)
    assert not intake.idle()  # the token: take now
    assert sorted(intake.take(10)) == [b"1:1000", b"2:1000"]
    assert not intake.idle()  # entries found: the next take comes after the batch


def test_a_lost_token_costs_at_most_one_look(make_store):
    store = make_store(Clock())
    intake, clock = idle_intake(store)
    assert intake.take(10) == []
    store.push(OWNER, [b"7:1000"])
    store.client.delete(store.keys.wake)  # taken by a worker killed before its take
    assert not intake.wait_for_work(0.05)
    assert intake.idle()  # nothing announces the entry ...
    clock.now += LOOK_EVERY
    assert not intake.idle()  # ... until the look is due
    assert intake.take(10) == [b"7:1000"]


def test_a_take_held_back_by_the_limits_is_not_idle(make_store):
    store = make_store(Clock(), max_in_flight=1)
    intake, _ = idle_intake(store)
    store.push(OWNER, [b"1:1000", b"2:1000"])
    assert intake.take(10, running=0) == [b"1:1000"]
    assert intake.take(10, running=1) == []
    assert intake.limited and not intake.idle()  # the limits' own wait applies, not the token's


def test_checks_ended_since_the_last_take_are_told_by_a_take(make_store):
    store = make_store(Clock(), max_in_flight=4)
    intake, _ = idle_intake(store)
    store.push(OWNER, [b"1:1000"])
    assert intake.take(10, running=0) == [b"1:1000"]
    assert intake.take(10, running=1) == []  # its check still runs: nothing else queued
    assert intake.idle(running=1)
    assert not intake.idle(running=0)  # the check ended: a take tells the limits (their room)
    assert intake.take(10, running=0) == []
    assert store.client.hget(store.keys.running, "w1") is None
    assert intake.idle(running=0)
