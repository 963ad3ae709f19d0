"""Where a worker's entries come from: take a batch, wait for work, adopt what a lost reply hid.

Everything taken lands in the worker's processing set in Redis first (one take script call per
batch), so that what a worker holds is known even if it dies. Nothing read from Redis is ever
evaluated: entries are parsed by the key kind's strict rules (digits, or hex for text and binary
keys: shared/core/keys.py), anything else is set aside as malformed.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence

from recheck.shared.core.entries import Item
from recheck.shared.core.failures import Breaker
from recheck.shared.core.keys import KeyKind
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.redis.store import ROOM_WAIT, Store

log = logging.getLogger(__name__)

# Seconds an idle worker waits for wake tokens before it takes anyway. Every path that leaves
# entries for a take leaves a token (a page, a give-back, a reclaim, the settle job, a take that
# leaves entries), so an empty take after each blocking wait's timeout found nothing but cost a
# script call a workload a second. This look covers what no token announces: a token taken by a
# worker killed before its take, and dispatchers older than the tokens.
LOOK_EVERY = 5.0
# Seconds an idle lane blocks for a wake token before it comes back to its loop (to look for work
# no token announced, to keep in touch with MySQL). A token wakes it at once whatever this is, and
# so does its worker's stop (Store.wake_stopping): the wait sets only how often an idle worker
# wakes for nothing. At 1 s, ten idle workloads cost each worker ten wake-ups and Redis ten BLPOPs
# a second (docs/performance.md, an idle deployment). As long as the look, so that each wait's
# end is a look, never a wake-up for nothing: at 2.5 s every other one was.
IDLE_WAIT = LOOK_EVERY
# Each idle wait lasts up to this share of IDLE_WAIT longer, at random: lanes that began waiting
# together (a worker's start, one page for several workloads) drift apart. Ten lanes woken in the
# same millisecond fought over the GIL, several context switches each for a wake-up's little work.
IDLE_WAIT_SPREAD = 0.1
RATE_WAIT_MAX = 1.0  # seconds slept at most for the rate limit's tokens before asking again
ROOM_RETRY = 0.05  # seconds between takes while max_in_flight checks run elsewhere (ours wake us)
LIMITED_RECENTLY = 5.0  # seconds after the limits last held a take back that it counts as limited
SETTLED_WARN_EVERY = 60.0  # seconds between warnings that the leader orders the workload otherwise


class Intake:
    def __init__(self, store: Store, worker_id: str, metrics=None, prefix: str = ""):
        self.store = store
        self.prefix = prefix  # the workload's, for logs
        self.worker_id = worker_id
        self.metrics = metrics
        self._resync = False
        self.limited = 0.0  # the last take's Taken.limited: how long the limits ask us to wait
        self.limited_at: dict[str, float] = {}  # reason ("rate", "in_flight") -> when it last held us back
        self.limits = any(limit.limited for limit in store.limits)
        self.took = threading.Event()  # set by a take that brought entries: the heartbeat tells soon
        self.breaker: Breaker | None = None  # backing off a failing provider (the lane sets it)
        self.totals: Callable[[], tuple[int, int]] = lambda: (0, 0)  # rows checked, failed so far
        self._backing_off = False  # the last take was held back by the breaker
        self.limiting_group = ""  # a grouped workload: the last group whose own limits held us back
        self._by_group = False  # the last take was held back by a group's limits
        self._settled_warned = -SETTLED_WARN_EVERY  # monotonic time of the last such warning
        self.clock: Callable[[], float] = time.monotonic  # tests set it
        self.found_nothing_at: float | None = None  # when the last take found nothing, not held back
        self.running_told = 0  # checks the last take told the limits we run (max_in_flight)
        self.on_taken: Callable[[], None] = lambda: None  # after a take that returned entries

    def take(
        self,
        limit: int,
        in_hand: Callable[[], set[bytes]] = set,
        running: int = 0,
        ended: Sequence[bytes] = (),
    ) -> list[bytes]:
        """Up to `limit` entries, now held in our processing set (0: only what a wait delivered),
        within the workload's rate_limit and max_in_flight (running: the checks we run now;
        ended: held entries whose checks ended, their groups' room given back first).

        in_hand: the entries the caller is still working on, asked only when a lost reply
        means the processing set must be read back."""
        self._backing_off = False
        self._by_group = False
        if self.breaker is not None and limit > 0:
            cap, wait = self.breaker.allowance(*self.totals())
            if cap == 0:  # backing off: nothing until the next probe
                self.limited, self._backing_off = wait, True
                return []
            if cap is not None:
                limit = min(limit, cap)
        try:
            taken = self.store.take(self.worker_id, limit, running, ended)
            entries, self.limited = taken.entries, taken.limited
            if taken.group:
                self.limiting_group, self._by_group = taken.group, True
            if taken.settled:
                self.warn_settled(taken.settled)
            if entries:
                self.took.set()
            self.found_nothing_at = None if entries or self.limited else self.clock()
            self.running_told = running + len(entries)
            if self.limits and entries and self.metrics is not None:
                self.metrics.limit_granted.inc(len(entries))
        except REDIS_DOWN:
            # The script may have run and only its reply been lost: entries would then sit in our
            # processing set unseen. The reclaimer leaves a live worker's set alone, so adopt them.
            self._resync = True
            self.found_nothing_at = None  # (nor is it known to hold nothing: not quiet)
            raise
        if self._resync:
            entries = entries + self.adopt_unseen(entries, in_hand())
            self._resync = False
        if entries:
            self.on_taken()
        return entries

    @property
    def quiet(self) -> bool:
        """The last take found nothing (not held back by the limits) and told them no check runs:
        this lane holds nothing in Redis, unless a take is under way (Presence's quiet beats)."""
        return self.found_nothing_at is not None and self.running_told == 0

    def warn_settled(self, settled: str, now: float | None = None) -> bool:
        """Once a minute: the leader runs another ordering than this worker's settings say (a
        change rolling out, or settings that differ): the lists it fills are not all the ones
        this worker takes from. Whether it warned."""
        now = self.clock() if now is None else now
        if now - self._settled_warned < SETTLED_WARN_EVERY:
            return False
        self._settled_warned = now
        log.warning(
            "%sthe dispatcher leading this workload orders its rows by %s, this worker's settings by %s: "
            "rows it queues may wait for a worker with the dispatcher's settings (give every process "
            "the same workload settings)", self.prefix, settled, self.store.ordering.name,
        )  # fmt: skip
        return True

    def adopt_unseen(self, just_taken: list[bytes], in_hand: set[bytes]) -> list[bytes]:
        """Entries in our processing set that we neither just took nor have in hand."""
        known = set(just_taken) | in_hand
        unseen = [e for e in self.store.held(self.worker_id) if e not in known]
        if unseen:
            log.warning(
                "adopted %d held entries whose delivery was cut off by a lost connection", len(unseen)
            )
        return unseen

    def limit_wait(self) -> float:
        """Seconds to wait before the next take when the last one was held back by the limits
        (0: it was not): until the rate limit's tokens are due, or a moment while max_in_flight
        checks run elsewhere. Counted as waited (metrics, heartbeat)."""
        if not self.limited:
            return 0.0
        reason, seconds = ("in_flight", ROOM_RETRY) if self.limited == ROOM_WAIT else (
            "backoff" if self._backing_off else "rate", min(self.limited, RATE_WAIT_MAX))  # fmt: skip
        if self._by_group:
            reason = "group"
        self.limited_at[reason] = time.monotonic()
        if self.metrics is not None:
            self.metrics.limit_wait.labels(reason).inc(seconds)
        return seconds

    def held_by_group(self) -> bool:
        """The last take was held back by a group's own limits or breaker: other groups' new work
        may come meanwhile, and wakes a worker blocked on the wake list (wait_for_work)."""
        return self._by_group

    def waiting_for_room(self) -> bool:
        """The last take was held back by max_in_flight (checks running, here or elsewhere)."""
        return self.limited == ROOM_WAIT

    def limited_by(self) -> str:
        """ "rate", "in_flight", "backoff" or "group X" (a group's own limits) if the limits or
        the breaker held a take back in the last few seconds, else ""."""
        now = time.monotonic()
        recent = [(at, why) for why, at in self.limited_at.items() if now - at < LIMITED_RECENTLY]
        why = max(recent)[1] if recent else ""
        return f"group {self.limiting_group}" if why == "group" else why

    def idle(self, running: int = 0) -> bool:
        """The last take found nothing (and the limits did not hold it back), no wake token came
        since, the next look (LOOK_EVERY) is not due, and the checks we run (`running`) are what
        that take told the limits (a take tells them when checks ended): wait for a token rather
        than take."""
        if self.found_nothing_at is None or running != self.running_told:
            return False
        return self.clock() - self.found_nothing_at < LOOK_EVERY

    def wait_for_work(self, timeout: float | None = None) -> bool:
        """Block until a wake token says entries wait (one idle worker per token: a page wakes one
        worker, which wakes the next if its take leaves entries); False on timeout (by default
        IDLE_WAIT, and up to IDLE_WAIT_SPREAD of it more)."""
        if timeout is None:
            timeout = IDLE_WAIT * (1.0 + IDLE_WAIT_SPREAD * random.random())
        woken = self.store.wait_for_work(self.worker_id, timeout)
        if woken:
            self.found_nothing_at = None  # the next poll takes
        return woken

    def held_count(self) -> int:
        return self.store.held_count(self.worker_id)


def split(entries: list[bytes], keys: KeyKind) -> tuple[list[Item], list[bytes]]:
    """Well-formed items and malformed entries (logged once per batch)."""
    items, malformed = keys.parse(entries)
    if malformed:
        log.warning("dropped %d malformed queue entries (e.g. %r)", len(malformed), malformed[0][:40])
    return items, malformed
