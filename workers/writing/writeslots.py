"""At most RECHECK_WRITE_SLOTS write-backs of one workload at once, deployment-wide.

Every write-back moves its rows' entries in the due index to the same place (now + interval),
so many concurrent write-backs contend inside InnoDB: measured with 24 worker processes on 2
cores, MySQL spent about twice the CPU per row with every worker writing at will as with 2
slots (docs/performance.md). A worker that finds every slot taken blocks in Redis until one is
given back (BLPOP: the longest waiter first), at most WAIT_STEP at a time before asking again
(a slot that lapsed is never announced); meanwhile its takes stay large (workers/batchsize.py),
so fewer, larger statements carry the same rows.

A slot is a politeness, never a reason to hold work: with Redis away or in a graceful stop the
write goes ahead without one; and while the workload has no more workers than slots, nobody
asks. A slot is held as long as its holder is alive: the holder's heartbeat renews it
(renew()), so a MySQL stall (an application's LOCK TABLES, a slow disk) keeps the limit instead
of letting every waiter in once a lease has passed. It lapses by itself after its lease
(writeslot.lua) once the holder is gone (killed, paused, cut off from Redis), and the holder
gives it back at once when its write is given back as stuck (completer.py: another
worker can write, so the limit must not keep it waiting). While waiting, a worker probes MySQL
every heartbeat: whether MySQL takes its writes is what tells a stuck holder from a stalled server.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from recheck.shared.redis.connection import REDIS_DOWN

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
        probe: Callable[[], object] = lambda: None,
        probe_every: float = 1.0,
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
        self.probe = probe  # a statement that proves MySQL takes this worker's writes (or raises)
        self.probe_every = probe_every
        self.holding = False  # a slot is this worker's now (renewed by the heartbeat)

    @contextlib.contextmanager
    def held(self) -> Iterator[bool]:
        """Hold a slot for the duration (yields whether one was taken; see the module's note)."""
        taken = self._take() if 0 < self.slots < self.writers() else False
        self.holding = taken
        try:
            yield taken
        finally:
            if taken:
                self.release()

    def renew(self) -> None:
        """From the heartbeat: the holder is alive, its slot stays its own."""
        if self.holding:
            self.store.renew_write_slot(self.holder, self.slots, self.lease_ms)

    def release(self) -> None:
        """Give the slot back now (also from the heartbeat, for a write given back as stuck)."""
        if self.holding:
            self.holding = False
            with contextlib.suppress(*REDIS_DOWN):  # it lapses by itself
                self.store.give_write_slot(self.holder, self.slots, self.lease_ms)

    def _take(self) -> bool:
        started = time.monotonic()
        probed = started
        try:
            while not self.store.take_write_slot(self.holder, self.slots, self.lease_ms):
                if self.stopping():
                    return False
                self.store.wait_for_write_slot(WAIT_STEP)
                if time.monotonic() - probed >= self.probe_every:
                    probed = time.monotonic()
                    with contextlib.suppress(Exception):  # an outage shows in the write itself
                        self.probe()
            return True
        except REDIS_DOWN:
            return False  # the write goes ahead; what follows it meets the outage
        finally:
            self.waited(time.monotonic() - started)
