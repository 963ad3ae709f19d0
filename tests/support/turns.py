"""The timing-sensitive layer two at a time, and the few tests that need the machine alone.

`make test` runs the serial layer (`-m serial`) in two processes: most of its tests wait on time
and on servers (the machine is half idle running them one at a time), and each keeps to its bounds
with one other beside it, as with a CPU hog. The few that measure CPU or drive every core
themselves are marked `alone`: none of the others runs beside one of them.

Every serial test holds a lock on one file for its whole run: shared, or exclusive when `alone`. A
turnstile taken before it keeps an `alone` test, once it waits, from being overtaken by the other
process's next tests (a waiting exclusive flock does not hold back new shared ones).
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def machine_turn(directory: Path, alone: bool) -> Iterator[None]:
    """Held for one test: beside one other serial test, or (alone) beside none."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "turnstile", "a") as gate, open(directory / "machine", "a") as machine:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)
