"""Which workloads the dispatcher's asked thread reads each round (dispatcher/asked.py): pure, the
clock passed in."""

from __future__ import annotations

from dataclasses import dataclass

from recheck.dispatcher.asked import FAST_EVERY, SAFETY_EVERY, AskedRounds, AskedThread


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


class Service:
    """Stands for the dispatcher process: attempt() turns a ConnectionError into an outage's
    (False, backoff); it stops after `rounds` attempts."""

    def __init__(self, rounds: int):
        self.rounds = rounds
        self.waited: list[float] = []

    @property
    def stopping(self) -> bool:
        return self.rounds <= 0

    def attempt(self, step):
        self.rounds -= 1
        try:
            return True, step()
        except ConnectionError:
            return False, 0.5

    def wait(self, seconds: float) -> None:
        self.waited.append(seconds)


class CountingLane(Lane):
    reads = 0

    def read_asked(self) -> None:
        self.reads += 1


def test_the_thread_reads_at_a_ring_and_keeps_its_safety_reads_while_the_bells_server_is_away():
    lane = CountingLane("a")
    now = [0.0]
    rings = iter(["0-0", "1-0", "1-0"])  # a wait with no ring, a ring, no ring again

    def wait_for_bell(last: str, timeout: float) -> str:
        now[0] += timeout / 4  # each wait ends early: a timeout is never a whole safety period here
        return next(rings)

    service = Service(rounds=4)
    AskedThread(service, [lane], wait_for_bell, lambda: "0-0", clock=lambda: now[0]).run()
    assert lane.reads == 2  # the first round's read and the ring's; the others read nothing

    def away(*_args) -> str:
        raise ConnectionError("the bell's node is down")

    lane.reads, service = 0, Service(rounds=3)
    AskedThread(service, [lane], away, away, clock=lambda: now[0]).run()
    assert lane.reads == 1 and service.waited == [0.5, 0.5, 0.5]  # the first safety read, despite it


def test_a_round_reads_only_the_lanes_whose_lists_hold_anything_asked_of_all_in_one_look():
    a, b, soon = CountingLane("a"), CountingLane("b"), CountingLane("soon", asked_soon=True)
    looks = []

    def holding(lanes) -> list[bool]:
        looks.append(names(lanes))
        return [lane.name == "b" for lane in lanes]

    thread = AskedThread(Service(rounds=9), [a, b, soon], lambda *_: "0-0", lambda: "0-0", holding=holding)
    assert names(thread.worth_reading([a, b, soon])) == ["b", "soon"]  # "soon" is read whatever it holds
    assert looks == [["a", "b"]]  # one look for the lanes it may skip
    assert thread.worth_reading([soon]) == [soon] and len(looks) == 1  # nothing to look at: no look

    def away(_lanes) -> list[bool]:
        raise ConnectionError("redis is away")

    thread.holding = away
    assert names(thread.worth_reading([a, b])) == ["a", "b"]  # the reads meet the outage and log it
