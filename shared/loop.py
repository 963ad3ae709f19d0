"""The shape every recheck process shares: a loop of poll() calls that survives outages.

poll() does one unit of work and returns how many seconds to wait before the next call.
stop() only sets an event, which also cuts the wait short. Signal handlers only record the
signal and call stop(); a second signal exits at once (the reconciler covers what is left).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

from shared.config import Settings
from shared.db import Database, DatabaseDown, probe
from shared.health import HealthFile, HealthRecord
from shared.keys import Keys
from shared.outage import Outage
from shared.presence import Presence, make_process_id
from shared.redisconn import REDIS_DOWN, connect_redis
from shared.store import Store

log = logging.getLogger(__name__)


class Service:
    """A recheck process: its identity, its connections, its loop."""

    role = "service"
    presence: Presence  # the heartbeat; each role makes its own

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.id = make_process_id()
        self.keys = Keys(settings.key_prefix)
        self.client = connect_redis(settings)
        self.store = Store(self.client, self.keys)
        self.db = Database(settings)
        self._stop = threading.Event()
        self.signals_received = 0
        self.deadline: float | None = None  # monotonic time a graceful stop must end by
        self.fatal: str | None = None  # why the process chose to exit for a fresh start (exit 1)
        # Shared by every thread of the process; "back" needs a successful probe.
        self.redis_outage = Outage("redis", probe=self.client.ping)
        self.mysql_outage = Outage("mysql", probe=lambda: probe(settings))

    # Subclasses implement poll(); they may override startup() and shutdown().
    def poll(self) -> float:
        raise NotImplementedError

    def startup(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        if self.deadline is None:
            self.deadline = time.monotonic() + self.settings.shutdown_timeout
        self._stop.set()

    def fail(self, reason: str) -> None:
        """Stop gracefully and exit 1: something in this process cannot recover by itself."""
        if not self.fatal:
            self.fatal = reason
            log.error("%s", reason)
        self.stop()

    def time_left(self) -> float:
        """Seconds until the graceful-stop deadline (infinite while not stopping)."""
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True if stop() was called meanwhile."""
        return self._stop.wait(seconds)

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, _frame) -> None:
        self.signals_received += 1
        if self.signals_received > 1:
            os.write(2, f"{self.role}: second signal, exiting now\n".encode())
            os._exit(128 + signum)
        self.stop()

    def attempt(self, step):
        """Run step(); (True, its result), or (False, backoff delay) if a server is away."""
        ok, value = attempt(step, self.redis_outage, self.mysql_outage)
        return ok, value

    def persist(self, step):
        """Retry step() through outages; None if the graceful-stop deadline passes first."""
        while True:
            ok, value = self.attempt(step)
            if ok:
                return value
            if self.time_left() <= 0:
                log.error("giving up on an unreachable server at shutdown; the reclaimer will finish")
                return None
            if self.stopping:
                time.sleep(min(value, self.time_left()))
            else:
                self.wait(value)

    def run(self) -> None:
        self.start_up()
        health = HealthFile(self.settings.health_file)
        if not self.stopping:
            health.write(HealthRecord(self.role, self.id, os.getpid(), self.presence.key))
        try:
            self.loop()
        finally:
            health.remove()  # a stopping process no longer counts as healthy
        self.shutdown()

    def start_up(self) -> None:
        """startup(), retried through outages until it succeeds or stop() is called."""
        while not self.stopping:
            ok, delay = self.attempt(self.startup)
            if ok:
                return
            self.wait(delay)

    def loop(self) -> None:
        while not self.stopping:
            _, wait = self.attempt(self.poll)  # a poll's wait, or the backoff after an outage
            if wait:
                self.wait(wait)


def attempt(step, redis_outage: Outage, mysql_outage: Outage):
    """Run step(); (True, its result), or (False, backoff delay) after logging an outage once."""
    try:
        result = step()
    except REDIS_DOWN as error:
        return False, redis_outage.failed(error)
    except DatabaseDown as error:
        return False, mysql_outage.failed(error)
    redis_outage.ok()
    mysql_outage.ok()
    return True, result
