"""The shape every recheck process shares: a loop of poll() calls that survives outages.

poll() does one unit of work and returns how many seconds to wait before the next call.
stop() only sets an event, which also cuts the wait short. Signal handlers only record the
signal and call stop(); a second signal exits at once (the reconciler covers what is left).

A graceful stop ends within RECHECK_SHUTDOWN_TIMEOUT whatever the servers do: if the loop is
still blocked on a silent server then, a watchdog hands back what the process holds (abandon())
and exits.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from functools import partial

from shared.config import Settings
from shared.db import Database, DatabaseDown, server_of
from shared.db import last_success as mysql_seen
from shared.health import HealthFile, HealthRecord
from shared.outage import Outage
from shared.partitioned import PartitionedStore, open_store
from shared.presence import Presence, make_process_id
from shared.redisconn import REDIS_DOWN, connect_redis
from shared.redisconn import last_success as redis_seen
from shared.store import Store

log = logging.getLogger(__name__)

WATCHDOG_GRACE = 1.0  # seconds past the stop deadline before the watchdog ends the process
ABANDON_TIMEOUT = 2.0  # how long the watchdog lets abandon() try to hand work back


class Service:
    """A recheck process: its identity, its connections, its loop."""

    role = "service"
    presence: Presence  # the heartbeat; each role makes its own

    def __init__(self, settings: Settings, workloads: list[Settings] | None = None) -> None:
        """settings: the process's (the first workload's; every workload has the same process
        settings); workloads: every workload this process serves (default: that one)."""
        self.settings = settings
        self.workloads = workloads or [settings]
        self.id = make_process_id()
        # Shared by every thread of the process; "back" once real work on that server succeeds.
        self.redis_outage = Outage("redis", seen=redis_seen)
        self.client = connect_redis(settings, self.redis_outage)  # waits for Redis to say if it is a cluster
        self.store = open_store(self.client, settings)
        self.db = Database(settings)
        self._stop = threading.Event()
        self.signals_received = 0
        self.deadline: float | None = None  # monotonic time a graceful stop must end by
        self.fatal: str | None = None  # why the process chose to exit for a fresh start (exit 1)
        servers = sorted({server_of(w) for w in self.workloads})
        named = len(servers) > 1  # logs say which server when there are several
        self._mysql_outages = {
            server: Outage(f"mysql {server}" if named else "mysql", seen=partial(mysql_seen, server))
            for server in servers
        }
        self.mysql_outage = self.mysql_outage_for(settings)

    def mysql_outage_for(self, settings: Settings) -> Outage:
        """The outage record of the MySQL server these (workload) settings point at."""
        return self._mysql_outages[server_of(settings)]

    def parts_for(self, settings: Settings) -> tuple[Store | PartitionedStore, Database, Lifeline]:
        """A workload's store (over its partitions, if several), MySQL connection and lifeline;
        the first workload uses the process's own connections."""
        if settings is self.settings:
            return self.store, self.db, self.lifeline(settings)
        return open_store(self.client, settings), Database(settings), self.lifeline(settings)

    def lifeline(self, settings: Settings) -> Lifeline:
        """This process's lifecycle as one workload's code sees it (its own MySQL server)."""
        return Lifeline(self, self.mysql_outage_for(settings))

    # Subclasses implement poll(); they may override startup() and shutdown().
    def poll(self) -> float:
        raise NotImplementedError

    def startup(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def abandon(self) -> None:
        """Last resort when a graceful stop overran its deadline: hand back what is held."""

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
        threading.Thread(target=self._watchdog, name="stop-watchdog", daemon=True).start()

    def _watchdog(self) -> None:
        """A graceful stop that overruns its deadline (a call blocked on a silent server) ends here."""
        time.sleep(max(self.time_left(), 0.0) + WATCHDOG_GRACE)
        log.error("%s still stopping %.0fs past its deadline: a server does not answer; exiting now",
                  self.role, WATCHDOG_GRACE)  # fmt: skip
        helper = threading.Thread(target=self.abandon, name="abandon", daemon=True)
        helper.start()
        helper.join(ABANDON_TIMEOUT)
        logging.shutdown()
        os._exit(1)

    def attempt(self, step, mysql_outage: Outage | None = None):
        """Run step(); (True, its result), or (False, backoff delay) if a server is away."""
        ok, value = attempt(step, self.redis_outage, mysql_outage or self.mysql_outage)
        return ok, value

    def persist(self, step, given_up=lambda: False, mysql_outage: Outage | None = None):
        """Retry step() through outages; None if the graceful-stop deadline passes first, or as
        soon as given_up() says the work no longer matters (someone else has it now)."""
        while True:
            ok, value = self.attempt(step, mysql_outage)
            if ok:
                return value
            if given_up():
                return None
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


class Lifeline:
    """One workload's view of its process: the process's stop and deadline, and the outage
    record of the workload's own MySQL server (workloads may live on different servers)."""

    def __init__(self, service: Service, mysql_outage: Outage):
        self.service = service
        self.mysql_outage = mysql_outage

    @property
    def stopping(self) -> bool:
        return self.service.stopping

    def attempt(self, step):
        return self.service.attempt(step, self.mysql_outage)

    def persist(self, step, given_up=lambda: False):
        return self.service.persist(step, given_up, self.mysql_outage)

    def time_left(self) -> float:
        return self.service.time_left()

    def wait(self, seconds: float) -> bool:
        return self.service.wait(seconds)

    def fail(self, reason: str) -> None:
        self.service.fail(reason)


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
