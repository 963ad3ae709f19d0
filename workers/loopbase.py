"""What both loops are made of: the check, where entries come from and where they end."""

from __future__ import annotations

import time
from collections.abc import Callable

from shared.config import Settings
from shared.db import last_success as mysql_seen
from shared.loop import Service
from shared.metrics import WorkerMetrics
from workers.completer import Completer
from workers.intake import Intake

IDLE_PROBE_EVERY = 3.0  # seconds without any statement on MySQL before an idle worker probes it
HUNG_CHECKS_LIMIT = 3  # abandoned, still-running checks after which the process restarts itself


class CheckLoop:
    def __init__(
        self,
        settings: Settings,
        check: Callable,
        intake: Intake,
        completer: Completer,
        life: Service,
        metrics: WorkerMetrics,
    ):
        self.settings = settings
        self.check = check
        self.check_name = f"{check.__module__}:{check.__qualname__}"
        self.intake = intake  # take, wait for work, adopt
        self.completer = completer  # write back and acknowledge, or give back
        self.life = life  # the worker's lifecycle: stopping, attempt(), time_left(), fail()
        self.metrics = metrics

    def ready_to_write(self) -> None:
        """While MySQL is failing, take no more work until it takes writes again.

        Raises DatabaseDown (through the caller's attempt(): backoff) until the probe passes: a
        worker that cannot write would only hold rows that other workers could finish."""
        if self.life.mysql_outage.down:
            self.completer.writeback.probe()

    def keep_in_touch(self) -> None:
        """An idle worker makes sure MySQL still takes its writes every few seconds, so its
        heartbeat's "MySQL has worked for N s" is true even when it has nothing to write: a
        worker whose write-back is stuck hands its batch only to workers that can write it."""
        writeback = self.completer.writeback
        if time.monotonic() - mysql_seen(writeback.db.server) >= IDLE_PROBE_EVERY:
            writeback.probe()
