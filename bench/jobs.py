"""One-shot jobs in `recheck bench` (issue 34): a queue table whose rows are each handled once,
recheck (`once = true`) beside the articles' own consumers on the same table and servers.

- jobs:           a drain of --rows pending jobs. Every strategy gets the same freshly built jobs
                  table (bench_create_jobs_table; update_limit's also gets the index its claim
                  walks), seeded with the jobs due over the hour before.
                  The articles' strategies claim `WHERE due <= NOW(3) ORDER BY due, id LIMIT n`
                  (FOR UPDATE, FOR UPDATE SKIP LOCKED, UPDATE ... SET owner = ... LIMIT n then
                  SELECT) and mark their jobs done through recheck's own WriteBack of a once
                  workload (the fenced write_done), so only the claiming differs.
- jobs-steady:    the table starts empty; --producers processes (bench/producer.py) insert one job
                  per autocommit transaction at --rate jobs/s together while the consumers run.
- jobs-saturated: the same producers as fast as they can, first with no consumers at all (the
                  pseudo-strategy "alone"), then beside the consumers, each phase on a freshly
                  built empty table for the same --seconds: what the producers insert alone
                  against what is handled (and inserted) with consumers running, in one run.
                  The consumers' phase starts from an empty table, as the alone phase did: a
                  backlog from the first phase would let them handle more than is inserted.

Every strategy runs the same check, bench.stamps:stamp (a no-op that notes when it started on
which jobs): commit -> start is measured directly (bench/stamps.py) and every call of the check
is counted, so a job handled twice shows whatever the table says. Once the measured window is
over the producers stop, the consumers get up to --tail seconds to finish what is pending, and
the table is tallied: pending (left behind), dead, rows written twice.

"24 consumers x batch 100" means what the recurring drains mean by it (docs/performance.md):
--workers 24 --batch 100, i.e. 24 recheck worker processes taking 100 ids per check call (their
takes from Redis grow while the queue is deep, as in production), against 24 processes of each
queue-table strategy, one claimer each, claiming 100 jobs at a time; "3 x 2,000" is --workers 3
--batch 2000.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench.runs import ALONE, PRODUCERS, BenchConfig, Result, Run, store_for
from bench.stamps import ENV, quantile, read_checks, read_commits, start_delays
from recheck.commands.seed import seed
from recheck.shared.config import Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.sql import Queries

JOBS_TABLE = "bench_jobs"
STAMP_CHECK = "bench.stamps:stamp"
DEFAULT_STRATEGIES = {
    "jobs": ("recheck", "for_update", "skip_locked", "update_limit"),
    "jobs-steady": ("recheck",),
    "jobs-saturated": (ALONE, "recheck"),
}
SEED_SPREAD = 3000.0  # a drain's jobs were inserted over 3,000 s, up to 10 minutes ago
PENDING_CAP = 1_000_000
TAIL_POLL = 0.2  # seconds between counts of what is still pending, once the producers stopped


def prepare_jobs(settings: Workload, config: BenchConfig, say, claim_index: bool = False) -> None:
    """The same jobs table for every strategy (plus, with claim_index, the index an owner claim
    walks): dropped, created, and for a drain seeded with --rows jobs due over the hour before (as
    inserted one after another: distinct due times)."""
    db = Database(settings)
    queries = Queries(settings, "bench")
    try:
        db.execute(queries.bench_drop_table)
        db.execute(queries.bench_create_jobs_table)
        if claim_index:
            db.execute(queries.bench_owner_claim_index)
        if config.is_drain:
            seed(settings.evolve(interval=SEED_SPREAD), db, config.rows, start_in_s=-3600.0)
    finally:
        db.close()
    store_for(settings).clear()
    if config.is_drain:
        say(f"  table {settings.table}: {config.rows:,} pending jobs")
    else:
        say(f"  table {settings.table}: empty; {config.producers} producers at "
            f"{f'{config.rate:,.0f} jobs/s' if config.rate else 'full speed'}")  # fmt: skip


class JobsRun(Run):
    """A strategy's consumers (none for "alone"), then the producers; on stop the producers first,
    then the tail, then the consumers; the stamps and the table tallied."""

    def __init__(self, settings: Workload, config: BenchConfig, strategy: str, log_dir: Path):
        super().__init__(settings, config, strategy, log_dir)
        self.stamps = log_dir / "stamps" / strategy
        self.stamps.mkdir(parents=True, exist_ok=True)
        self.first_id = int(self.db.scalar(self.queries.bench_jobs_inserted))
        self.reports: list[dict] = []
        self.tail_seconds: float | None = None
        self.tally: tuple[int, ...] | None = None

    def extra_env(self) -> dict[str, str]:
        return {ENV: str(self.stamps)}

    def start(self) -> None:
        super().start()  # the consumers, until their heartbeats show
        producers = 0 if self.config.is_drain else self.config.producers
        rate = self.config.rate / producers if producers else 0.0
        env = self.environment()
        for index in range(producers):
            stamps = self.stamps / f"commits-{index}.txt"
            command = [sys.executable, "-m", "bench.producer", str(rate), str(stamps)]
            with open(self.log_dir / f"{self.strategy}-producer{index}.log", "wb") as log:
                self.processes[f"producer{index}"] = subprocess.Popen(
                    command, env=env, stdout=subprocess.PIPE, stderr=log
                )

    def producers(self) -> dict[str, subprocess.Popen]:
        return {name: p for name, p in self.processes.items() if name.startswith("producer")}

    def pids(self) -> dict[str, list[int]]:
        pids = super().pids()
        for name in self.producers():
            pids.setdefault(PRODUCERS, []).extend(pids.pop(name))
        return pids

    def sample(self, started: float) -> dict:
        point = super().sample(started)
        if not self.config.is_drain:  # jobs committed so far by the producers
            point["inserted"] = int(self.db.scalar(self.queries.bench_jobs_inserted)) - self.first_id
        return point

    def stop(self) -> None:
        """The producers first (each reports what it inserted), then the tail: the consumers go
        on until nothing is pending, for at most --tail seconds; then the consumers."""
        producers = self.producers()
        for process in producers.values():
            if process.poll() is None:
                process.terminate()
        for process in producers.values():
            try:
                out, _ = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                out, _ = process.communicate()
            lines = [line for line in out.decode().splitlines() if line.startswith("{")]
            if lines:
                self.reports.append(json.loads(lines[-1]))
        if producers and self.strategy != ALONE:
            self.tail_seconds = self.wait_until_done()
        super().stop()
        self.tally = tuple(int(v) for v in self.db.query(self.queries.bench_jobs_tally)[0])

    def wait_until_done(self) -> float:
        began = time.monotonic()
        while time.monotonic() - began < self.config.tail:
            if not int(self.db.scalar(self.queries.bench_jobs_pending, {"cap": PENDING_CAP})):
                break
            time.sleep(TAIL_POLL)
        return round(time.monotonic() - began, 2)

    def summary(self) -> Result:
        result = super().summary()
        return replace(result, **self.jobs_figures())

    def jobs_figures(self) -> dict:
        figures: dict = {"tail_seconds": self.tail_seconds}
        if self.strategy == ALONE:
            figures["lateness_max_s"] = None  # nobody handles anything: no lateness to speak of
        if self.tally is not None:
            rows, pending, dead, twice = self.tally
            figures.update(jobs_rows=rows, left_pending=pending, dead=dead, written_twice=twice)
        starts, calls = read_checks(self.stamps)
        if self.strategy != ALONE:
            figures["checked_twice"] = sum(1 for n in calls.values() if n > 1)
        if self.config.is_drain:
            return figures
        figures["inserted"] = figures["rows"] = sum(report["inserted"] for report in self.reports)
        window = [s for s in self.samples if s["t"] >= self.config.warmup] or self.samples
        first, last = window[0], window[-1]
        if last["t"] > first["t"]:
            inserted = last["inserted"] - first["inserted"]
            figures["inserts_per_second"] = round(inserted / (last["t"] - first["t"]), 1)
        if self.strategy == ALONE:
            return figures
        delays, unseen = start_delays(read_commits(self.stamps), starts, first["at"], last["at"])
        figures.update(
            start_p50_s=rounded(quantile(delays, 0.5, unseen)),
            start_p99_s=rounded(quantile(delays, 0.99, unseen)),
            start_max_s=None if unseen or not delays else rounded(delays[-1]),
            start_unseen=unseen,
        )
        return figures


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
