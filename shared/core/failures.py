"""Are the checks failing? A failed check is not a fresh row.

A worker's heartbeat thread feeds its running totals to a FailureWatch in every beat; the watch
keeps about a minute of them, the worker publishes the last minute's checks and failures in its
heartbeat, and `recheck status` and the dashboard add them up and judge them by the same rule
(`failing`), so "checks failing" needs no scan of the table. The watch also logs one warning
when the share of failures crosses RECHECK_FAILING_THRESHOLD, and one line when it is back
under half of it. Pure logic: no I/O but the log lines.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

WINDOW = 60.0  # seconds of history judged
MIN_CHECKS = 10  # fewer checks than this in the window say nothing either way


@dataclass(frozen=True)
class Recent:
    checked: int  # rows written as checked in the window
    failed: int  # rows written as failed in the window

    @property
    def ratio(self) -> float:
        done = self.checked + self.failed
        return self.failed / done if done else 0.0


def failing(recent: Recent, threshold: float) -> bool:
    """Whether these recent checks count as failing (enough of them, and too many failed)."""
    return recent.checked + recent.failed >= MIN_CHECKS and recent.ratio >= threshold


class FailureWatch:
    def __init__(
        self,
        threshold: float,
        window: float = WINDOW,
        clock: Callable[[], float] = time.monotonic,
        prefix: str = "",
    ):
        self.threshold = threshold
        self.prefix = prefix  # names the workload in the log lines (Workload.log_prefix)
        self.window = window
        self.clock = clock
        self._totals: deque[tuple[float, int, int]] = deque()  # (time, checked, failed)
        self.alarmed = False

    def observe(self, checked: int, failed: int, last_error: str | None) -> Recent:
        """Record the running totals; returns the last window's share, logging on a change."""
        now = self.clock()
        self._totals.append((now, checked, failed))
        while len(self._totals) > 1 and now - self._totals[1][0] >= self.window:
            self._totals.popleft()
        _, checked_then, failed_then = self._totals[0]
        recent = Recent(checked - checked_then, failed - failed_then)
        enough = recent.checked + recent.failed >= MIN_CHECKS
        if failing(recent, self.threshold) and not self.alarmed:
            self.alarmed = True
            log.warning(
                "%schecks failing: %.0f%% of the %d checks in the last %.1fs failed (last error: %s); "
                "failing rows are tried again (retry setting) and not fresh",
                self.prefix, 100 * recent.ratio, recent.checked + recent.failed, now - self._totals[0][0],
                last_error or "unknown",
            )  # fmt: skip
        elif self.alarmed and enough and recent.ratio < self.threshold / 2:
            self.alarmed = False  # back under half the threshold: no flapping around it
            log.warning(
                "%schecks succeeding again: %.0f%% of recent checks failed", self.prefix, 100 * recent.ratio
            )
        return recent


# Errors grouped: the parts of a message that differ from row to row are masked, so "cannot
# reach 4711" and "cannot reach 4712" are one group.
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"]+", re.IGNORECASE)  # one group per error, not per URL
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_HEX = re.compile(r"\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b|\b(?:0x)?[0-9a-f]{8,}\b", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
GROUP_LENGTH = 200


def error_group(message: str | None) -> str:
    """A failure's message with ids, numbers and quoted values masked, on one line (a traceback's
    lines would break the tables that show it): the group it belongs to."""
    text = " ".join((message or "unknown error").split())
    text = _URL.sub("URL", text)
    text = _QUOTED.sub("'…'", text)
    text = _HEX.sub("X", text)
    text = _NUMBER.sub("N", text)
    return text[:GROUP_LENGTH]


# Backing off a failing provider (the workload's backoff_threshold): each worker judges its own
# checks, so no coordination is needed and the calls of all workers drop together.
BACKOFF_WINDOW = 1.0  # seconds of a worker's own outcomes judged while it runs at full rate
BACKOFF_MIN = 10  # outcomes in that window before it may trip
PROBE_SHARE = 0.02  # while backing off: this share of the calls per second it made before
PROBE_EVERY = 1.0  # seconds between probes
PROBE_MIN = 3  # ids a probe takes at least: one lucky success of a provider failing 80 % is no recovery


class Breaker:
    """A circuit breaker on a worker's takes: when at least `threshold` of the worker's last
    BACKOFF_WINDOW seconds of checks failed, takes stop but for a probe every PROBE_EVERY seconds
    of PROBE_SHARE of the ids per second the worker handled before (at least one); the first probe
    whose checks fail less than `threshold` ends it, and takes are back to full at once. Fed the
    worker's running totals (rows written as checked, as failed). One log line at each change.
    Pure logic: no I/O but the log lines."""

    def __init__(self, threshold: float, clock: Callable[[], float] = time.monotonic, prefix: str = ""):
        self.threshold = threshold
        self.clock = clock
        self.prefix = prefix
        self._totals: deque[tuple[float, int, int]] = deque()  # (time, checked, failed)
        self.open_since: float | None = None  # backing off since (None: full rate)
        self.probe = 1  # ids a probe may take
        self._next_probe = 0.0
        self._seen = (0, 0)  # the totals when backing off began, or the last probe was allowed

    @property
    def backing_off(self) -> bool:
        return self.open_since is not None

    def allowance(self, checked: int, failed: int) -> tuple[int | None, float]:
        """How many ids the next take may have (None: no cap) and, when none, the seconds to wait."""
        if self.threshold <= 0:
            return None, 0.0
        now = self.clock()
        if self.open_since is None:
            self._observe(now, checked, failed)
            return None, 0.0
        done_checked, done_failed = checked - self._seen[0], failed - self._seen[1]
        # Hysteresis, as FailureWatch: a probe must fail under half the threshold to end it.
        if done_checked + done_failed and done_failed / (done_checked + done_failed) < self.threshold / 2:
            log.warning("%sprovider recovered: a probe's checks succeeded after %.0f s of backing off; "
                        "back to full rate", self.prefix, now - self.open_since)  # fmt: skip
            self.open_since = None
            self._totals.clear()
            return None, 0.0
        if now >= self._next_probe:
            self._next_probe = now + PROBE_EVERY
            self._seen = (checked, failed)
            return self.probe, 0.0
        return 0, self._next_probe - now

    def _observe(self, now: float, checked: int, failed: int) -> None:
        self._totals.append((now, checked, failed))
        while len(self._totals) > 1 and now - self._totals[1][0] >= BACKOFF_WINDOW:
            self._totals.popleft()
        then, checked_then, failed_then = self._totals[0]
        recent = Recent(checked - checked_then, failed - failed_then)
        if recent.checked + recent.failed < BACKOFF_MIN or recent.ratio < self.threshold:
            return
        if now - then < BACKOFF_WINDOW / 2:  # one take's outcomes, just after a start: not yet a trend
            return
        span = max(now - then, PROBE_EVERY)
        self.probe = max(PROBE_MIN, int((recent.checked + recent.failed) / span * PROBE_SHARE * PROBE_EVERY))
        self.open_since, self._next_probe, self._seen = now, now + PROBE_EVERY, (checked, failed)
        log.warning("%sbacking off a failing provider: %.0f%% of this worker's last %d checks failed; "
                    "probing with %d ids every %g s until they succeed", self.prefix, 100 * recent.ratio,
                    recent.checked + recent.failed, self.probe, PROBE_EVERY)  # fmt: skip
