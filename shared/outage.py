"""One log line when a server goes away, one when it is back, capped backoff in between.

One Outage per server per process, shared by every loop and job in it (thread-safe), so an
outage is reported once however many threads notice it. "Back" is only reported once real
work on that server has succeeded after the failure (`seen`: when it last did); a step that
happened not to need the server proves nothing, and no probe ever blocks a loop on a server
it was not using.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("recheck.outage")

# The longest pause between reconnection attempts: part of every recovery bound in docs/guarantees.md.
MAX_BACKOFF = 2.0


class Outage:
    def __init__(self, server: str, seen: Callable[[], float],
                 first_delay: float = 0.2, max_delay: float = MAX_BACKOFF):  # fmt: skip
        self.server = server
        self.seen = seen
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.down_since: float | None = None
        self.up_since = time.monotonic()  # when the server was last seen to be back (or first used)
        self.delay = first_delay
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def down_for(self) -> float:
        """Seconds this outage has lasted (0 if the server is not down)."""
        since = self.down_since
        return 0.0 if since is None else time.monotonic() - since

    def up_for(self) -> float:
        """Seconds the server has worked since its last outage (0 while it is down)."""
        return 0.0 if self.down_since is not None else time.monotonic() - self.up_since

    def failed(self, error: BaseException) -> float:
        """Record a failure; returns how long to wait before trying again."""
        with self._lock:
            if self.down_since is None:
                self.down_since = time.monotonic()
                self.delay = self.first_delay
                text = str(error).strip()
                reason = text.splitlines()[0] if text else type(error).__name__
                what = "refuses writes" if getattr(error, "refusal", False) else "unreachable"
                log.warning("%s %s (%s); retrying with backoff", self.server, what, reason)
            else:
                self.delay = min(self.delay * 2, self.max_delay)
                log.debug("%s still failing (%s); next try in %.1fs", self.server, error, self.delay)
            return self.delay

    def ok(self) -> None:
        """A step succeeded: if it used this server since it failed, the server is back."""
        since = self.down_since
        if since is None or self.seen() <= since:
            return
        with self._lock:
            if self.down_since is not None:
                log.warning("%s back after %.1fs", self.server, time.monotonic() - self.down_since)
                self.down_since = None
                self.up_since = time.monotonic()
