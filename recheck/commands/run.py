"""`recheck run`: a dispatcher and N workers on this machine, supervised, with a live line.

Each role runs as its own process (`python -m recheck.dispatcher`, `python -m recheck.workers`), exactly what
compose runs. A child that dies unexpectedly is restarted (with a growing pause if it keeps
dying); one that exits 2 (bad configuration, e.g. a check that cannot be imported) would only
fail again, so the run stops with its message instead. With --duration the whole set stops
gracefully that many seconds after every process is up (at the latest a minute after the
start), a freshness summary is printed, and the exit code says whether every row was fresh at
the end (0) or not (3).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from recheck.commands.base import Command
from recheck.commands.launch import positive_float, positive_int
from recheck.shared.config import Settings, Workload
from recheck.shared.core.records import StatusFacts
from recheck.shared.mysql.db import Database, DatabaseDown
from recheck.shared.mysql.rows import Rows
from recheck.shared.mysql.schema import require_distinct_tables, require_table
from recheck.shared.policies.lifecycle import lifecycle_of, rhythm_of
from recheck.shared.process.health import started_marker
from recheck.shared.process.loop import deliver_signals
from recheck.shared.redis.connection import REDIS_DOWN, connect_redis
from recheck.shared.redis.store import Store, open_store
from recheck.shared.views.status import NOT_FRESH, capped, dead_line, gather, verdict
from recheck.shared.workloads import deployment_of, read_workloads

log = logging.getLogger("recheck.run")

BAD_CONFIGURATION = 2  # a child's exit code that a restart cannot fix
START_WAIT = 60.0  # --duration counts from when every child is up, or from this long after the spawn


def duration_over(duration: float | None, elapsed: float, up_at: float | None) -> bool:
    """Whether a run with --duration is over: `duration` seconds after every child was up
    (`up_at`, seconds into the run; None while some are still starting), so a slow start on a
    loaded machine is not counted against the rows' freshness."""
    return duration is not None and up_at is not None and elapsed - up_at >= duration


@dataclass
class Child:
    role: str
    index: int
    process: subprocess.Popen | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = field(default=0.0)


class Runner:
    def __init__(
        self,
        settings: Settings,
        workers: int,
        duration: float | None,
        out=sys.stdout,
        on_tick=None,
        workloads: list[Workload] | None = None,
        worker_args: list[str] | tuple[str, ...] = (),
    ):
        """settings: the environment the children get; workloads: what they serve (they read the
        same workloads file; default: the environment's one workload)."""
        self.workloads = workloads or [settings.default_workload()]
        self.deployment = deployment_of(self.workloads)
        self.worker_args = list(worker_args)
        self.duration = duration
        self.out = out
        self.children = [Child("dispatcher", 0)] + [Child("worker", i) for i in range(workers)]
        self.stop_event = threading.Event()
        self.signals = 0
        self.env = {**os.environ, **settings.env_overrides()}
        self.worst_lateness = 0.0
        self.worst_overdue = 0
        self.counters_at_start: dict[str, dict[str, int]] = {}  # per workload
        self.on_tick = on_tick  # called every second with (elapsed, children), e.g. MemoryWatch
        self.gave_up: str | None = None  # why the run stopped early (a child that cannot start)
        self.fresh_at_end = True
        self.private_folder = tempfile.mkdtemp(prefix="recheck-run-")  # removed when the run ends

    def _on_signal(self, signum: int) -> None:
        self.signals += 1
        if self.signals > 1:
            for child in self.children:
                if child.process and child.process.poll() is None:
                    child.process.kill()
            os._exit(128 + signum)
        self.stop_event.set()

    def spawn(self, child: Child) -> None:
        module = "recheck.dispatcher" if child.role == "dispatcher" else "recheck.workers"
        env = dict(self.env)
        base = self.deployment.metrics_port
        if base:  # one machine, one port each: the dispatcher on the base port, worker i on base + 1 + i
            env["RECHECK_METRICS_PORT"] = str(base if child.role == "dispatcher" else base + 1 + child.index)
        # One health file each (`recheck health` checks them all); without RECHECK_HEALTH_FILE, in a
        # folder of the run's own: each child's start marker tells a crash from bad configuration.
        env["RECHECK_HEALTH_FILE"] = self.health_file(child)
        started_marker(env["RECHECK_HEALTH_FILE"]).unlink(missing_ok=True)
        args = self.worker_args if child.role == "worker" else []
        child.process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            env=env,
            start_new_session=True,  # Ctrl-C reaches only us; we stop children gracefully
        )
        child.started_at = time.monotonic()

    def health_file(self, child: Child) -> str:
        base = self.deployment.health_file or str(Path(self.private_folder) / "recheck.health")
        return f"{base}.{child.role}-{child.index}"

    def started(self, child: Child) -> bool:
        return started_marker(self.health_file(child)).exists()

    def supervise(self) -> None:
        now = time.monotonic()
        for child in self.children:
            process = child.process
            if process is not None and process.poll() is None:
                continue
            if process is not None and process.returncode == BAD_CONFIGURATION and not self.started(child):
                # 2 is "bad configuration" only before the child started working: later it is a crash
                # like any other (e.g. a library calling sys.exit(2) where nothing could catch it).
                self.gave_up = (
                    f"{child.role} {child.index} exited with code 2 (bad configuration, see its message "
                    "above); a restart would fail the same way, so the run stops"
                )
                self.stop_event.set()
                return
            if process is not None and child.next_start == 0.0:
                child.restarts += 1
                lived = now - child.started_at
                pause = 0.0 if lived > 30 else min(2.0**child.restarts / 4, 30.0)
                log.warning(
                    "%s %d exited with code %s after %.1fs; restarting%s",
                    child.role,
                    child.index,
                    process.returncode,
                    lived,
                    f" in {pause:.1f}s" if pause else "",
                )
                child.next_start = now + pause
            if now >= child.next_start:
                child.next_start = 0.0
                self.spawn(child)

    def live_line(self, watched: list, elapsed: float) -> str:
        """One line: checks/s, queue, overdue rows, failing checks, workers (per workload if several)."""
        every = [(w, gather(w, db, store, count_rows=False, sampled=True)) for w, db, store in watched]
        if elapsed > max(w.interval for w in self.workloads) + 5:  # after warm-up
            for _, facts in every:
                self.worst_lateness = max(self.worst_lateness, facts.oldest_lateness_s)
                self.worst_overdue = max(self.worst_overdue, facts.overdue_waiting)
        parts = []
        for workload, facts in every:
            overdue = capped(facts.overdue_waiting, facts)
            failing = ""
            if facts.checks_failing:
                failing = f" | CHECKS FAILING ({facts.recent_failed:,} of {facts.recent_checks:,} in 1 min)"
            if len(every) == 1:
                parts.append(
                    f"{facts.checks_per_second:>9,.0f} checks/s"
                    f" | queue {facts.queue_depth:>7,} | in flight {facts.in_flight:>7,}"
                    f" | overdue>1s {overdue:>7} | oldest {facts.oldest_lateness_s:5.2f}s{failing}"
                )
            else:
                rate, queue = facts.checks_per_second, facts.queue_depth
                parts.append(
                    f"{workload.name}: {rate:,.0f}/s, queue {queue:,}, "
                    f"overdue>1s {overdue}, oldest {facts.oldest_lateness_s:.2f}s{failing}"
                )
        workers = max(facts.live_workers for _, facts in every)
        return f"[{elapsed:6.1f}s] " + " | ".join(parts) + f" | workers {workers}"

    def run(self) -> int:
        deliver_signals(self._on_signal)  # not signal.signal: see deliver_signals
        client = connect_redis(self.deployment)
        watched = [(w, Database(w), open_store(client, w)) for w in self.workloads]
        for workload, db, store in watched:  # counters are cumulative in Redis: report this run's share
            try:
                facts = gather(workload, db, store, count_rows=False, sampled=True)
                self.counters_at_start[workload.name] = facts.counters
            except (DatabaseDown, *REDIS_DOWN):
                self.counters_at_start[workload.name] = {}
        started = time.monotonic()
        up_at: float | None = None  # seconds into the run when every child was up
        interactive = self.out.isatty()
        last_print = 0.0
        for child in self.children:
            self.spawn(child)
        d = self.deployment
        if d.dashboard_port:
            self.out.write(
                f"dashboard: http://{d.dashboard_host}:{d.dashboard_port}/   "
                f"metrics: http://{d.metrics_host}:{d.metrics_port}/metrics\n"
            )
        try:
            while not self.stop_event.wait(1.0):
                elapsed = time.monotonic() - started
                self.supervise()
                if self.gave_up:
                    break
                if self.on_tick:
                    self.on_tick(elapsed, self.children)
                try:
                    line = self.live_line(watched, elapsed)
                except (DatabaseDown, *REDIS_DOWN) as error:
                    line = f"[{elapsed:6.1f}s] status unavailable: {error}"
                if interactive:
                    self.out.write("\r\033[K" + line)
                    self.out.flush()
                elif elapsed - last_print >= 5:
                    self.out.write(line + "\n")
                    self.out.flush()
                    last_print = elapsed
                if up_at is None and (elapsed >= START_WAIT or all(map(self.started, self.children))):
                    up_at = elapsed
                if duration_over(self.duration, elapsed, up_at):
                    break
            if interactive:
                self.out.write("\n")
            if self.gave_up:
                self.out.write(f"recheck run: {self.gave_up}\n")
            else:
                elapsed = time.monotonic() - started
                fresh = [self.summary(workload, db, store, elapsed) for workload, db, store in watched]
                self.fresh_at_end = all(fresh)
                self.out.write(
                    f"after warm-up: worst oldest-lateness {self.worst_lateness:.2f} s, "
                    f"most rows overdue by > 1 s at once: {self.worst_overdue:,}\n"
                )
        finally:
            codes = self.stop_children()
            for _, db, _ in watched:
                db.close()
            shutil.rmtree(self.private_folder, ignore_errors=True)
        failed = {role: code for role, code in codes if code != 0}
        if failed:
            self.out.write(f"processes exiting with errors: {failed}\n")
        if self.gave_up:
            return BAD_CONFIGURATION
        if failed:
            return 1
        return 0 if self.fresh_at_end or self.duration is None else NOT_FRESH

    @staticmethod
    def rows_line(workload: Workload, facts: StatusFacts, age: float, stale: int) -> str:
        """The summary's line about the rows, as the workload's rhythm makes sense of them."""
        if not lifecycle_of(workload).has_rhythm:
            pending = facts.one_shot.pending if facts.one_shot else None
            return f"rows {facts.rows:,}; pending {pending or 0:,}; dead {facts.dead:,}"
        failing = f"failing now: {facts.failing_rows:,}"
        if rhythm_of(workload).calendar:
            return f"rows {facts.rows:,}, each on its calendar ({facts.schedule}); {failing}"
        return f"rows {facts.rows:,}; not attempted in the last {age:g} s: {stale:,}; {failing}"

    def summary(self, workload: Workload, db: Database, store: Store, elapsed: float) -> bool:
        """This run's figures for one workload; whether it was fresh at the end."""
        named = f"workload {workload.name}: " if len(self.workloads) > 1 else ""
        try:
            facts = gather(workload, db, store)
            age = self.stale_age_s(facts)
            # A scheduled row's rhythm is its calendar: "not attempted within an interval" says nothing.
            counted = lifecycle_of(workload).has_rhythm and not rhythm_of(workload).calendar
            stale = Rows(workload, db).count_stale(age) if counted else 0
        except (DatabaseDown, *REDIS_DOWN) as error:
            self.out.write(f"{named}summary unavailable: {error}\n")
            return False
        at_start = self.counters_at_start.get(workload.name, {})
        counters = {k: v - at_start.get(k, 0) for k, v in facts.counters.items()}
        lines = [
            f"{named}ran {elapsed:.0f} s: {counters.get('checked', 0):,} checks written, "
            f"{counters.get('failed', 0):,} failed, {counters.get('stale', 0):,} fenced out as stale",
            self.rows_line(workload, facts, age, stale),
            f"now: {verdict(facts)}",
            *([dead_line(facts)] if facts.dead else []),
        ]
        if counters.get("failed", 0) > counters.get("checked", 0):
            lines.append("warning: more checks failed than succeeded; see the workers' logs for the errors")
        self.out.write("\n".join(lines) + "\n")
        return facts.fresh

    def stale_age_s(self, facts: StatusFacts) -> float:
        """A row is stale if its last attempt (checked_at: a success or a failure) is older than
        one interval, the longest of any row's with an interval column, plus 1 s of lateness."""
        _, longest = facts.interval_range_s or (facts.interval_s, facts.interval_s)
        return round(longest + 1.0, 3)

    def stop_children(self) -> list[tuple[str, int]]:
        """Stop the running children gracefully; their exit codes. A child that had already died
        (a crash waiting for its restart) is not counted: its crash was logged when it happened.
        One stopped by our SIGTERM before it could install its handler (just restarted) stopped
        as asked: 0."""
        alive = [c for c in self.children if c.process and c.process.poll() is None]
        for child in alive:
            assert child.process is not None
            child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.deployment.shutdown_timeout + 5
        codes = []
        for child in alive:
            assert child.process is not None
            try:
                code = child.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log.error("%s %d did not stop in time; killing it", child.role, child.index)
                child.process.kill()
                code = child.process.wait()
            codes.append((f"{child.role} {child.index}", 0 if code == -signal.SIGTERM else code))
        return codes


def run(settings: Settings, args: argparse.Namespace) -> int:
    workloads = read_workloads(settings)
    dbs = [Database(workload) for workload in workloads]
    try:
        for workload, db in zip(workloads, dbs, strict=True):
            require_table(workload, db)
        require_distinct_tables(list(zip(workloads, dbs, strict=True)))
    finally:
        for db in dbs:
            db.close()
    worker_args = ["--concurrency", str(args.concurrency)] if args.concurrency else []
    return Runner(settings, args.workers, args.duration, workloads=workloads, worker_args=worker_args).run()


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=positive_int, default=2, help="worker processes (default 2)")
    parser.add_argument("--duration", type=positive_float, help="stop gracefully after this many seconds")
    parser.add_argument(
        "--concurrency", type=positive_int, help="rows checked at once per worker (per-row checks)"
    )


COMMANDS = [
    Command(
        "run",
        "run a dispatcher and N workers here, with a live status line",
        "what the dispatcher and the workers use",
        run,
        arguments,
        epilog=f"With --duration: exit {NOT_FRESH} if rows are overdue or checks failing at the end.",
    )
]
