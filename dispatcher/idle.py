"""The dispatch loop's idle probe: workloads whose last poll read nothing are asked together.

A led workload whose last poll found no row due (after its cursor, or in its look-back window)
is not polled again; instead, each round, one statement per MySQL server asks every such
workload on it whether a row is due now from where its next poll would read (shared/mysql/probe.py).
Those that have one are polled that round, as before; the others cost nothing more. Ten idle job
tables on one server cost one round trip per idle_poll_interval (dispatcher.idle_pause) instead of
ten to twenty per poll_interval, and a row inserted due now is still read within one
idle_poll_interval of its commit.

If the probe's server is away, its workloads poll themselves (their outage is logged once by
their own lifelines, as ever).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from recheck.shared.config import Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.probe import DueProbe, due_part
from recheck.shared.mysql.sql import Queries
from recheck.shared.process.loop import Lifeline


class ProbedLane(Protocol):
    workload: Workload
    life: Lifeline

    def probe_part(self) -> tuple[Queries, tuple]: ...


class IdleProbe:
    def __init__(self) -> None:
        self.probes: dict[str, DueProbe] = {}  # mysql_url -> its probe (a connection of its own)

    def woken(self, idle: Sequence[ProbedLane]) -> list[ProbedLane]:
        """Those of the idle lanes that have a row due now (all of a server's when its probe fails)."""
        by_server: dict[str, list[ProbedLane]] = {}
        for lane in idle:
            by_server.setdefault(lane.workload.mysql_url, []).append(lane)
        woken: list[ProbedLane] = []
        for url, lanes in by_server.items():
            probe = self.probes.get(url)
            if probe is None:
                probe = self.probes[url] = DueProbe(Database(lanes[0].workload))
            parts = [due_part(*lane.probe_part()) for lane in lanes]
            ok, due = lanes[0].life.attempt(lambda probe=probe, parts=parts: probe.due(parts))
            woken += [lane for number, lane in enumerate(lanes) if not ok or number in due]
        return woken

    def close(self) -> None:
        for probe in self.probes.values():
            probe.close()
