"""The dispatcher's asked thread: the ids an application asked to check now, for every workload.

An application asks (Client.now, `recheck now`, resume, the dashboard) by putting ids in the
workload's asked list and ringing the deployment's bell, one stream for every workload
(Store.ask). One thread of the dispatcher blocks on that bell and, when it rings, reads the asked
lists of the workloads this dispatcher leads: an idle deployment costs one blocking read every
SAFETY_EVERY seconds, not a read per workload twenty times a second, and an asked id still goes
out within a round trip of being asked.

A workload whose last read asks for another soon (ids asked for while in flight wait for their
release, when the scripts put them in the asked list without ringing; or a read found ids, or
the queue was full) is read again every FAST_EVERY seconds, and a workload this dispatcher has
just come to lead at once (ids asked for while nobody led it). Every SAFETY_EVERY seconds every led
workload is read whatever rang: a bell lost with a Redis that restarted, or an older client that
does not ring, delays an asked id by that much at most. Before reading, one round trip asks
whether each named workload's lists hold anything at all (Store.asked_waiting): only those that do
are read, but a workload whose last read asked for another soon is read whatever it holds.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from recheck.shared.process.loop import Service
from recheck.shared.redis.store import Store

log = logging.getLogger(__name__)

FAST_EVERY = 0.05  # seconds between reads of a workload whose last read asks for another soon
SAFETY_EVERY = 2.0  # seconds between reads of every led workload, rung or not


class AskedLane(Protocol):
    """What the thread needs of a dispatcher lane."""

    @property
    def leads(self) -> bool: ...
    @property
    def asked_soon(self) -> bool: ...
    @property
    def store(self) -> Store: ...
    def read_asked(self) -> None: ...


class AskedRounds:
    """Which lanes each round reads: pure, the clock passed in."""

    def __init__(self, lanes: Sequence[AskedLane]):
        self.lanes = lanes
        self.next_safety = 0.0
        self.led: set[int] = set()  # the lanes (by position) led at the last round

    def wait(self) -> float:
        """How long the next wait for the bell lasts: short while a lane asks to be read soon,
        or one is led that was not (a new leader reads what waited meanwhile at once)."""
        lanes = enumerate(self.lanes)
        soon = any(lane.leads and (lane.asked_soon or number not in self.led) for number, lane in lanes)
        return FAST_EVERY if soon else SAFETY_EVERY

    def to_read(self, rung: bool, now: float) -> list[AskedLane]:
        """The led lanes to read after a wait that ended at `now` (rung: the bell rang)."""
        everyone = rung or now >= self.next_safety
        if everyone:
            self.next_safety = now + SAFETY_EVERY
        chosen = [
            lane
            for number, lane in enumerate(self.lanes)
            if lane.leads and (everyone or lane.asked_soon or number not in self.led)
        ]
        self.led = {number for number, lane in enumerate(self.lanes) if lane.leads}
        return chosen


class AskedThread:
    """The thread: wait for the bell (or the fast pace), read the lanes AskedRounds names."""

    def __init__(
        self,
        service: Service,
        lanes: Sequence[AskedLane],
        wait_for_bell: Callable[[str, float], str],
        last_ring: Callable[[], str],
        clock: Callable[[], float] = time.monotonic,
        holding: Callable[[list[AskedLane]], list[bool]] | None = None,
    ):
        """holding: whether each lane's asked list (or its list of ids asked for in flight) holds
        anything, in one round trip for all of them (None: read every lane named)."""
        self.service = service
        self.rounds = AskedRounds(lanes)
        self.wait_for_bell = wait_for_bell
        self.last_ring = last_ring
        self.clock = clock
        self.holding = holding
        self.thread = threading.Thread(target=self.run, name="asked", daemon=True)

    def start(self) -> None:
        if not self.thread.is_alive():
            self.thread.start()

    def run(self) -> None:
        last: str | None = None  # the newest ring seen (None: not read yet)
        while not self.service.stopping:
            rung = False
            ok, found = self.service.attempt(self._wait_step(last))
            if ok:
                rung, last = last is not None and found != last, found
            else:  # the bell's server is away (a cluster's node): the safety reads go on meanwhile
                self.service.wait(min(found, SAFETY_EVERY))
            for lane in self.worth_reading(self.rounds.to_read(rung, self.clock())):
                lane.read_asked()

    def worth_reading(self, lanes: list[AskedLane]) -> list[AskedLane]:
        """Of the lanes a round names, those to read: a lane read again soon by its last read's
        say always; the others only if their lists hold anything, asked of all of them in one
        round trip (a safety read of ten idle workloads: one round trip, not twenty)."""
        looked = [lane for lane in lanes if not lane.asked_soon]
        if not looked or self.holding is None:
            return lanes
        holding = self.holding
        ok, found = self.service.attempt(lambda: holding(looked))
        if not ok:
            return lanes  # the reads themselves meet the outage, and log it once
        empty = {id(lane) for lane, holds in zip(looked, found, strict=True) if not holds}
        return [lane for lane in lanes if id(lane) not in empty]

    def _wait_step(self, last: str | None) -> Callable[[], str]:
        """Read where the bell is at first; then wait for it to ring after `last`."""
        if last is None:
            return self.last_ring
        return functools.partial(self.wait_for_bell, last, self.rounds.wait())
