"""Which workloads the dispatcher's asked thread reads each round (dispatcher/asked.py): pure, the
clock passed in."""

from __future__ import annotations

from dataclasses import dataclass

from recheck.dispatcher.asked import FAST_EVERY, SAFETY_EVERY, AskedRounds


@dataclass
class Lane:
    name: str
    leads: bool = True
    asked_soon: bool = False

    def read_asked(self) -> None:
        pass


def names(lanes) -> list[str]:
    return [lane.name for lane in lanes]


def test_a_quiet_deployment_waits_long_and_reads_every_led_lane_at_a_ring_or_the_safety_read():
    a, b, standby = Lane("a"), Lane("b"), Lane("c", leads=False)
    rounds = AskedRounds([a, b, standby])
    assert rounds.wait() == FAST_EVERY  # nothing read yet
    assert names(rounds.to_read(rung=False, now=100.0)) == ["a", "b"]  # the first round: a safety read
    assert rounds.wait() == SAFETY_EVERY
    assert rounds.to_read(rung=False, now=100.0 + SAFETY_EVERY / 2) == []  # a timeout, nothing rang
    assert names(rounds.to_read(rung=True, now=100.0 + SAFETY_EVERY / 2)) == ["a", "b"]  # the bell
    assert rounds.to_read(rung=False, now=100.0 + SAFETY_EVERY) == []  # the ring reset the safety read
    assert names(rounds.to_read(rung=False, now=100.0 + 1.5 * SAFETY_EVERY)) == ["a", "b"]


def test_a_lane_whose_ids_wait_for_their_release_is_read_at_the_fast_pace_until_they_are_gone():
    a, b = Lane("a"), Lane("b")
    rounds = AskedRounds([a, b])
    rounds.to_read(rung=True, now=0.0)
    b.asked_soon = True  # ids asked for in flight: the scripts re-ask them without ringing
    assert rounds.wait() == FAST_EVERY
    assert names(rounds.to_read(rung=False, now=0.05)) == ["b"]
    b.asked_soon = False
    assert rounds.wait() == SAFETY_EVERY
    b.leads = False  # a standby's lanes are never read, soon or not
    b.asked_soon = True
    assert rounds.wait() == SAFETY_EVERY and rounds.to_read(rung=True, now=0.1) == [a]


def test_a_lane_just_come_to_be_led_is_read_at_once_not_at_the_next_safety_read():
    a, b = Lane("a"), Lane("b", leads=False)
    rounds = AskedRounds([a, b])
    assert names(rounds.to_read(rung=False, now=0.0)) == ["a"]
    assert rounds.wait() == SAFETY_EVERY
    b.leads = True  # this dispatcher took b's lease: what was asked meanwhile waits in its list
    assert rounds.wait() == FAST_EVERY
    assert names(rounds.to_read(rung=False, now=0.1)) == ["b"]
    assert rounds.wait() == SAFETY_EVERY and rounds.to_read(rung=False, now=0.2) == []
