"""The dispatcher leader lease: several dispatchers may run, exactly one dispatches.

The leader renews a Redis key with a TTL every heartbeat, on a thread of its own (a page that is
slow to read or push must not let the lease lapse under a leader that is making progress); a
standby tries to take it every heartbeat from its dispatch loop. A leader that stops renewing
(killed, paused, its loop stuck on a silent server: dispatcher/lane.py) loses it. Every push
also checks the lease inside the same Lua script, so a deposed leader that wakes up late pushes
nothing. Two threads change the lease: a lock keeps their view of it whole.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Sequence

from recheck.shared.errors import RecheckError
from recheck.shared.redis.store import Store

log = logging.getLogger(__name__)


class NotLeader(RecheckError):
    """A push was refused: this dispatcher no longer holds the lease."""


class Lease:
    def __init__(self, store: Store, owner: str, ttl_seconds: float):
        self.store = store
        self.owner = owner
        self.ttl_ms = round(ttl_seconds * 1000)
        self.holder: str | None = None
        self.gained = 0  # times this dispatcher came to hold the lease (another may have led between)
        self.lock = threading.Lock()  # the dispatch loop and the renewing thread

    @property
    def held(self) -> bool:
        return self.holder == self.owner

    def hold(self) -> bool:
        """Renew the lease if ours, take it if free. True if we hold it afterwards."""
        with self.lock:
            return self._hold()

    def renew(self) -> bool:
        """Renew the lease only if we hold it (never take it again after a release or a
        deposition the other thread has just seen). True if we hold it afterwards."""
        with self.lock:
            return self.held and self._hold()

    def _hold(self) -> bool:
        self._now_held_by(self.store.hold_lease(self.owner, self.ttl_ms))
        return self.held

    def _now_held_by(self, holder: str | None) -> None:
        was_held = self.held
        self.holder = holder
        if self.held and not was_held:
            self.gained += 1
            log.warning("dispatcher %s is now the leader", self.owner)
        elif was_held and not self.held:
            log.warning("dispatcher %s lost the lease to %s; standing by", self.owner, self.holder)

    def deposed(self) -> None:
        """A push was refused: someone else holds the lease now."""
        with self.lock:
            if self.held:
                log.warning("dispatcher %s was deposed (its lease expired); standing by", self.owner)
            self.holder = None

    def release(self) -> None:
        """Graceful stop: hand over at once instead of after the TTL."""
        with self.lock:
            if self.held:
                self.store.release_lease(self.owner)
                self.holder = None
                log.warning("dispatcher %s released the lease", self.owner)


def renew_together(leases: Sequence[Lease]) -> None:
    """Renew the held ones of a dispatcher's leases (single-partition workloads, one owner and
    TTL) in one script call per Redis client (Store.renew_leases), as Lease.renew does one: a
    lease released or seen lost meanwhile is not renewed; one whose key lapsed with nobody taking
    it (a renewal late on a slow network) is held again. Each lease's lock is held through the
    call, as renew holds it (the dispatch loop takes one lock at a time: no deadlock)."""
    if not leases:
        return
    with contextlib.ExitStack() as locks:
        for lease in leases:
            locks.enter_context(lease.lock)
        held = [lease for lease in leases if lease.held]
        if not held:
            return
        owner, ttl_ms = held[0].owner, held[0].ttl_ms
        assert all((lease.owner, lease.ttl_ms) == (owner, ttl_ms) for lease in held)
        holders = Store.renew_leases([lease.store for lease in held], owner, ttl_ms)
        for lease, holder in zip(held, holders, strict=True):
            lease._now_held_by(holder)
