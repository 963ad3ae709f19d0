"""What both loops are made of: the check, where entries come from and where they end."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import MappingProxyType

from recheck.shared.config import Workload
from recheck.shared.core.entries import Item
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.db import last_success as mysql_seen
from recheck.shared.mysql.rows import Rows
from recheck.shared.process.loop import Lifeline
from recheck.shared.process.metrics import WorkloadWorkerMetrics
from recheck.shared.process.tracing import outcome_attributes, rows_attributes, tracing_for
from recheck.workers.checks import Outcome
from recheck.workers.intake import Intake
from recheck.workers.writing.completer import Completer

IDLE_PROBE_EVERY = 3.0  # seconds without any statement on MySQL before an idle worker probes it
HUNG_CHECKS_LIMIT = 3  # abandoned, still-running checks after which the process restarts itself


class CheckLoop:
    def __init__(
        self,
        workload: Workload,
        check: Callable,
        intake: Intake,
        completer: Completer,
        life: Lifeline,
        metrics: WorkloadWorkerMetrics,
    ):
        self.workload = workload
        self.check = check
        self.check_name = f"{check.__module__}:{check.__qualname__}"
        self.intake = intake  # take, wait for work, adopt
        self.completer = completer  # write back and acknowledge, or give back
        self.life = life  # the worker's lifecycle: stopping, attempt(), time_left(), fail()
        self.metrics = metrics
        # With `columns`, the rows a check gets are read for each take on a connection of their own.
        self.reader = Rows(workload, Database(workload)) if workload.columns else None
        self.key_of = (lambda row: row[workload.id_column]) if workload.columns else None
        # Tracing (docs/tracing.md): off, a no-op; with a trace_column, each take also reads the
        # trace contexts its rows' producers stored (one statement, on a connection of its own).
        self.tracing = tracing_for(workload.deployment)
        self.traces = (  # on the check's own connection if it has one (`columns`): one statement at a time
            Rows(workload, self.reader.db if self.reader else Database(workload))
            if self.tracing.on and workload.trace_column
            else None
        )
        self.contexts: dict = {}  # the take's rows' trace contexts: id -> traceparent

    def with_rows(self, items: list[Item]) -> tuple[list[Item], list, list[bytes]]:
        """(the items whose rows still exist, what the check gets for each: its id, or with
        `columns` its row, and the entries of rows deleted since their dispatch). One statement
        for the whole take; raises DatabaseDown like any MySQL step."""
        if self.traces is not None:
            self.contexts = self.traces.trace_contexts([self.traces.keys.ref(item) for item in items])
        if self.reader is None:
            return items, [item.id for item in items], []
        keys = self.reader.keys
        found = self.reader.check_rows([keys.ref(item) for item in items])
        schedules = self.completer.writeback.schedules
        if schedules is not None:  # read with the rows: the write-back reads them no more
            schedules.remember(items, found)
        try:  # usually every row is still there; the check gets read-only views of them
            return items, [MappingProxyType(found[item.id]) for item in items], []
        except KeyError:  # rows deleted since their dispatch (or their key changed): sorted out below
            pass
        present, rows, gone = [], [], []
        for item in items:
            values = found.get(item.id)
            if values is None:
                gone.append(item.entry)
            else:
                present.append(item)
                rows.append(MappingProxyType(values))
        return present, rows, gone

    # What every loop offers its lane (workers/lane.py): run until the process stops, the items
    # in hand (their due times go into the heartbeat), checks abandoned past their timeout, close.
    def run(self) -> None:
        raise NotImplementedError

    def items_in_hand(self) -> list[Item]:
        raise NotImplementedError

    @property
    def abandoned(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        self.close_reader()

    def complete(
        self,
        items: list[Item],
        outcomes: list[Outcome],
        malformed: Sequence[bytes] = (),
        gone: Sequence[bytes] = (),
    ) -> None:
        """The completer's write-back and acknowledgement, in a `recheck.write_back` span with what
        it wrote when tracing is on."""
        if not self.tracing.on:
            self.completer.complete(items, outcomes, malformed, gone)
            return
        with self.tracing.span("recheck.write_back", rows_attributes(self.workload.name, len(items))) as span:
            written = self.completer.complete(items, outcomes, malformed, gone)
            if written is not None:
                self.tracing.record(span, outcome_attributes(written, len(gone)))

    def close_reader(self) -> None:
        for rows in (self.reader, self.traces):
            if rows is not None:
                rows.db.close()  # closing a shared connection twice is harmless

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
