"""A take's slices, called one after another in the check's thread: one hand-off per take.

A take of 1,500 ids with RECHECK_WORKER_BATCH 500 is three calls of the check. Handing each call
to the check's thread and waiting for it, then the next, cost three hand-offs between two threads
(a wake-up, then the GIL passed back and forth) for each take. At moderate rates, where a worker
sleeps between the dispatcher's pages, a wake-up costs several times what it costs back to back,
and those hand-offs were about a tenth of a worker's CPU (docs/performance.md, "Moderate rates:
one take a page, one hand-off a take"). Here the thread calls the check on each slice in turn and the lane
waits once; each call keeps its own timeout: the lane reads which call runs and since when
(`running`), and abandons the run if that call is past RECHECK_CHECK_TIMEOUT. An abandoned run
starts no further call; the lane calls the slices after the hung one in a fresh thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Call:
    """One call of the check: what it returned (or raised) and how long it took."""

    value: object  # what the check returned (None if it raised)
    error: BaseException | None  # what it raised, if it did
    seconds: float


class SliceRun:
    """The check called on each of `given` (the slices' arguments, the check's own copies) in
    turn, until all are done or the lane abandons the run. Thread-safe between the one thread
    that runs it and the lane that watches it."""

    def __init__(self, check: Callable, given: Sequence[list], clock: Callable[[], float] = time.monotonic):
        self._check = check
        self._given = given
        self._clock = clock
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self._started: float | None = None  # when the call running now began (None: none runs)
        self._abandoned = False

    def __len__(self) -> int:
        """How many calls the run makes if nothing is abandoned."""
        return len(self._given)

    def __call__(self) -> None:
        for given in self._given:
            with self._lock:
                if self._abandoned:
                    return
                started = self._started = self._clock()
            value, raised = None, None
            try:
                value = self._check(given)
            except BaseException as error:  # a check may raise anything, sys.exit() too: its rows fail
                raised = error
            with self._lock:
                self._calls.append(Call(value, raised, self._clock() - started))
                self._started = None

    def running(self) -> tuple[int, float] | None:
        """The index of the call running now and for how long it has run; None between calls."""
        with self._lock:
            if self._started is None:
                return None
            return len(self._calls), self._clock() - self._started

    def calls(self) -> list[Call]:
        """The calls finished so far, in order."""
        with self._lock:
            return list(self._calls)

    def abandon_if_past(self, timeout: float) -> list[Call] | None:
        """If the call running now has run `timeout` seconds or more, abandon the run (no further
        call starts) and return the calls finished before it; else None and nothing changes."""
        with self._lock:
            if self._started is None or self._clock() - self._started < timeout:
                return None
            self._abandoned = True
            return list(self._calls)

    def abandon(self) -> list[Call]:
        """Abandon the run whatever runs now (a graceful stop's deadline); the calls finished."""
        with self._lock:
            self._abandoned = True
            return list(self._calls)
