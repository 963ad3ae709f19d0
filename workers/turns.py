"""Weighted turns: how a worker shares its time between the batch workloads it serves.

Each batch workload (a lane) takes its batches in turns: one lane at a time takes a batch,
checks it and writes it back. When several lanes want a turn, the one that has been served
least, relative to its weight, goes first (stride scheduling: each lane's "pass" grows by the
rows it checked divided by its weight). So two lanes with weights 3 and 1 that both have more
work than the worker can do share its checks 3:1; a lane with nothing due is not waiting and
costs nothing; a lane that was idle starts again at the current pass, so it cannot hoard credit
and then shut the others out. With one lane there is never anyone to wait for.

Per-row workloads do not take turns: their checks mostly wait on the network, bounded by their
own concurrency, and run beside the batch lanes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class Turn:
    """What the lane did with its turn: the rows it checked (charged against its weight)."""

    def __init__(self) -> None:
        self.rows = 0


class Turns:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pass: dict[str, float] = {}
        self._waiting: set[str] = set()
        self._holder: str | None = None
        self._clock = 0.0  # the pass of the lane served last: where a returning lane starts

    def _next(self) -> str:
        return min(self._waiting, key=lambda name: (self._pass[name], name))

    @contextlib.contextmanager
    def turn(self, lane: str, weight: float) -> Iterator[Turn]:
        """Wait for this lane's turn, hold it for the block, charge the rows it reports."""
        with self._cond:
            self._pass[lane] = max(self._pass.get(lane, 0.0), self._clock)
            self._waiting.add(lane)
            while self._holder is not None or self._next() != lane:
                self._cond.wait()
            self._waiting.discard(lane)
            self._holder = lane
            self._clock = self._pass[lane]
        turn = Turn()
        try:
            yield turn
        finally:
            with self._cond:
                self._pass[lane] += turn.rows / weight
                self._holder = None
                self._cond.notify_all()

    def passes(self) -> dict[str, float]:
        """Each lane's pass (rows served / weight), for tests and status."""
        with self._cond:
            return dict(self._pass)
