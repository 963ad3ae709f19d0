"""At most RECHECK_WRITE_SLOTS write-backs of one workload at once, deployment-wide.

Every write-back moves its rows' entries in the due index to the same place (now + interval),
so many concurrent write-backs contend inside InnoDB: measured with 24 worker processes on 2
cores, MySQL spent about twice the CPU per row with every worker writing at will as with 2
slots (docs/performance.md). A worker that finds every slot taken blocks in Redis until one is
given back (BLPOP: the longest waiter first), at most WAIT_STEP at a time before asking again
(a slot that lapsed is never announced); meanwhile its takes stay large (workers/batchsize.py),
so fewer, larger statements carry the same rows.

A slot is a politeness, never a reason to hold work: with Redis away, after waiting a whole
slot lease (what a dead holder's slot takes to lapse), or in a graceful stop, the write goes
ahead without one; and while the workload has no more workers than slots, nobody asks. A slot
lapses by itself after its lease (writeslot.lua), so a worker that dies holding one costs the
others at most that long.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from shared.redisconn import REDIS_DOWN

WAIT_STEP = 0.1  # seconds a waiter blocks for a slot to be given back before asking again


class WriteSlots:
    def __init__(
        self,
        store,
        holder: str,
        slots: int,
        lease_s: float,
        stopping: Callable[[], bool],
        waited: Callable[[float], None] = lambda seconds: None,
        writers: Callable[[], int] | None = None,
    ):
        self.store = store
        self.holder = holder
        self.slots = slots  # 0: no limit
        self.lease_s = lease_s
        self.lease_ms = max(1, round(lease_s * 1000))
        self.stopping = stopping
        self.waited = waited  # told how long each wait for a slot took
        # How many workers the workload has (its registry, read at each heartbeat): while they
        # are no more than the slots, none can be kept waiting, and Redis is not asked.
        self.writers = writers or (lambda: slots + 1)

    @contextlib.contextmanager
    def held(self) -> Iterator[bool]:
        """Hold a slot for the duration (yields whether one was taken; see the module's note)."""
        taken = self._take() if 0 < self.slots < self.writers() else False
        try:
            yield taken
        finally:
            if taken:
                with contextlib.suppress(*REDIS_DOWN):  # it lapses by itself
                    self.store.give_write_slot(self.holder, self.slots, self.lease_ms)

    def _take(self) -> bool:
        started = time.monotonic()
        try:
            while not self.store.take_write_slot(self.holder, self.slots, self.lease_ms):
                if self.stopping() or time.monotonic() - started >= self.lease_s:
                    return False
                self.store.wait_for_write_slot(WAIT_STEP)
            return True
        except REDIS_DOWN:
            return False  # the write goes ahead; what follows it meets the outage
        finally:
            self.waited(time.monotonic() - started)
