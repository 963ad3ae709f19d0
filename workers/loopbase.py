"""What both loops are made of: the check, where entries come from and where they end."""

from __future__ import annotations

from collections.abc import Callable

from shared.config import Settings
from shared.loop import Service
from shared.metrics import WorkerMetrics
from workers.completer import Completer
from workers.intake import Intake


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
