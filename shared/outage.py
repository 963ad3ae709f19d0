"""One log line when a server goes away, one when it is back, capped backoff in between.

One Outage per server per process, shared by every loop and job in it (thread-safe), so an
outage is reported once however many threads notice it. "Back" is only reported after a
probe of that server succeeds: a step that happened not to need the server proves nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("recheck.outage")

# The longest pause between reconnection attempts: part of every recovery bound in the README.
MAX_BACKOFF = 2.0


class Outage:
    def __init__(self, server: str, probe: Callable[[], object] | None = None,
                 first_delay: float = 0.2, max_delay: float = MAX_BACKOFF):  # fmt: skip
        self.server = server
        self.probe = probe
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.down_since: float | None = None
        self.delay = first_delay
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, error: BaseException) -> float:
        """Record a failure; returns how long to wait before trying again."""
        with self._lock:
            if self.down_since is None:
                self.down_since = time.monotonic()
                self.delay = self.first_delay
                text = str(error).strip()
                reason = text.splitlines()[0] if text else type(error).__name__
                log.warning("%s unreachable (%s); retrying with backoff", self.server, reason)
            else:
                self.delay = min(self.delay * 2, self.max_delay)
                log.debug("%s still unreachable (%s); next try in %.1fs", self.server, error, self.delay)
            return self.delay

    def ok(self) -> None:
        """A step succeeded; if we thought the server was down, check before saying it is back."""
        if self.down_since is None:
            return
        if self.probe is not None:
            try:
                self.probe()
            except Exception:  # still away: stay quiet, keep backing off
                return
        with self._lock:
            if self.down_since is not None:
                log.warning("%s back after %.1fs", self.server, time.monotonic() - self.down_since)
                self.down_since = None
