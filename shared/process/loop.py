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
from collections.abc import Callable
from functools import partial

from recheck.shared.config import ConfigError, Workload
from recheck.shared.errors import RecheckError
from recheck.shared.mysql.db import Database, DatabaseDown, server_of
from recheck.shared.mysql.db import last_success as mysql_seen
from recheck.shared.outage import Outage
from recheck.shared.process.health import HealthFile, HealthRecord
from recheck.shared.process.presence import make_process_id
from recheck.shared.redis.connection import REDIS_DOWN, connect_redis
from recheck.shared.redis.connection import last_success as redis_seen
from recheck.shared.redis.store import Store, open_store
from recheck.shared.workloads import deployment_of

log = logging.getLogger(__name__)

WATCHDOG_GRACE = 1.0  # seconds past the stop deadline before the watchdog ends the process
ABANDON_TIMEOUT = 2.0  # how long the watchdog lets abandon() try to hand work back


def deliver_signals(handle: Callable[[int], None], signums=(signal.SIGTERM, signal.SIGINT)) -> None:
    """Call handle(signum) for each SIGTERM/SIGINT, in a thread of its own (call from the main
    thread). A Python-level handler runs only when the main thread next runs Python code, and then
    perhaps while that thread holds a lock it would need; a dispatcher once ignored SIGTERM until
    it was killed. Here the interpreter's C-level handler writes the signal's number to a pipe
    (signal.set_wakeup_fd) at once, whatever the main thread is doing, and a thread does the rest:
    the graceful stop and its watchdog always start."""
    read, write = os.pipe()
    os.set_blocking(write, False)

    def relay() -> None:
        while True:
            for signum in os.read(read, 64):
                if signum in signums:
                    handle(signum)

    threading.Thread(target=relay, name="signals", daemon=True).start()
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    for signum in signums:
        signal.signal(signum, lambda _number, _frame: None)  # the relay thread acts


class StartLater(RecheckError):
    """A workload's server is away at start: try the whole start again after `delay`."""

    def __init__(self, delay: float):
        super().__init__(delay)
        self.delay = delay


class Service:
    """A recheck process: its identity, its Redis client, its loop, and the outage records of
    the servers its workloads use. Each role keeps one lane per workload (the same code for one
    workload as for ten); a lane gets its own store, MySQL connection and lifeline (parts_for)."""

    role = "service"

    def __init__(self, workloads: list[Workload]) -> None:
        """workloads: every workload this process serves (they share one deployment)."""
        if not workloads:
            raise ConfigError("a process needs at least one workload")
        self.deployment = deployment_of(workloads)
        self.workloads = workloads
        self.id = make_process_id()
        # Shared by every thread of the process; "back" once real work on that server succeeds.
        self.redis_outage = Outage("redis", seen=redis_seen)
        self.client = connect_redis(
            self.deployment, self.redis_outage
        )  # waits for Redis to say if it is a cluster
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
        # For a step that no one workload owns: "mysql" is back once any of its servers answers.
        self.any_mysql_outage = (
            Outage("mysql", seen=lambda: max(mysql_seen(server) for server in servers))
            if named
            else self._mysql_outages[servers[0]]
        )

    def mysql_outage_for(self, workload: Workload) -> Outage:
        """The outage record of the MySQL server a workload is on."""
        return self._mysql_outages[server_of(workload)]

    def parts_for(self, workload: Workload) -> tuple[Store, Database, Lifeline]:
        """A workload's store (over its partitions, if several), MySQL connection and lifeline."""
        return open_store(self.client, workload), Database(workload), self.lifeline(workload)

    def heartbeat_keys(self) -> list[str]:
        """Every heartbeat key this process keeps alive (one per lane): `recheck health` wants
        them all."""
        raise NotImplementedError

    def lifeline(self, workload: Workload) -> Lifeline:
        """This process's lifecycle as one workload's code sees it (its own MySQL server)."""
        return Lifeline(self, self.mysql_outage_for(workload))

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
            self.deadline = time.monotonic() + self.deployment.shutdown_timeout
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
        deliver_signals(self._on_signal)

    def _on_signal(self, signum: int) -> None:
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
        """Run step(); (True, its result), or (False, backoff delay) if a server is away (its
        MySQL outage record: the workload's, or for a step of the whole process any_mysql_outage)."""
        ok, value = attempt(step, self.redis_outage, mysql_outage or self.any_mysql_outage)
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
        health = HealthFile(self.deployment.health_file)
        if not self.stopping:
            health.write(HealthRecord(self.role, self.id, os.getpid(), tuple(self.heartbeat_keys())))
        try:
            self.loop()
        finally:
            health.remove()  # a stopping process no longer counts as healthy
        self.shutdown()

    def start_up(self) -> None:
        """startup(), retried through outages until it succeeds or stop() is called (a lane's
        start raises StartLater when its own server is away: logged by that lane's outage)."""
        while not self.stopping:
            try:
                ok, delay = self.attempt(self.startup)
            except StartLater as later:
                ok, delay = False, later.delay
            if ok:
                return
            self.wait(delay)

    def start_lanes(self, lanes) -> None:
        """Start each lane through its own lifeline (its own MySQL server's outage record);
        StartLater if one cannot start yet: the whole start is tried again after the pause."""
        for lane in lanes:
            ok, delay = lane.life.attempt(lane.startup)
            if not ok:
                raise StartLater(delay)

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
