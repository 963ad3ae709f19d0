"""One strategy's run in `recheck bench`: its processes started as a deployment would start them,
and everything sampled once a second (checks, duplicates, lateness, rows overdue, CPU per process);
the figures of its measured window as a Result. compare.py runs one after another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from bench.procs import cpu_seconds, pid_from_file, server_pids
from bench.strategies import FLOOR, FLOOR_PROCESSES, STRATEGIES
from recheck.shared.config import Workload, WorkloadFields
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.sql import Queries
from recheck.shared.redis.connection import ClusterClient, connect_redis
from recheck.shared.redis.keys import Keys
from recheck.shared.redis.store import Store, open_store
from recheck.shared.views.buckets import SECONDS_BUCKETS, quantile

ALL_STRATEGIES = ("recheck", *STRATEGIES)
# recheck again, on a private Redis Cluster (3 masters, 3 replicas) with --partitions partitions:
# only with --private, and only when asked for (it starts six more servers).
ON_CLUSTER = "recheck_cluster"
READY_TIMEOUT = 60.0  # seconds a strategy's processes get to start before sampling begins anyway
OVERDUE_CAP = 100_000  # sampling cost stays O(cap); a figure at the cap means "at least"
# The one-shot jobs modes (bench/jobs.py): "alone" runs the producers with no consumers at all.
ALONE = "alone"
DRAIN_MODES = ("drain", "jobs")  # every row due from the start; measured until they are done
STEADY_MODES = ("steady", "jobs-steady", "jobs-saturated")  # rows come due while it runs: lateness
PRODUCERS = "producers"  # the jobs modes' producer processes, as one role in the CPU figures


@dataclass
class BenchConfig:
    mode: str  # drain | steady | jobs | jobs-steady | jobs-saturated
    rows: int
    workers: int
    seconds: float
    warmup: float
    interval: float
    strategies: tuple[str, ...]
    check: str
    concurrency: int
    batch: int
    out: Path
    consumers: int = 0  # N > 0: N claimers over the W processes (threads, or recheck's concurrency)
    partitions: int = 16  # recheck_cluster: the workload's partitions
    cluster_url: str = ""  # recheck_cluster: a node of the private Redis Cluster
    cluster_replicas: int = 1  # recheck_cluster: replicas per master (each costs the master CPU)
    peer_job: str = "first"  # the peers: their job enqueues "first" (workers held) or "overlap"ping the drain
    producers: int = 0  # jobs-steady, jobs-saturated: producer processes inserting one job per transaction
    rate: float = 0.0  # jobs-steady: their inserts per second together (0: as fast as they can)
    tail: float = 60.0  # jobs modes with producers: seconds the consumers get to finish once they stop

    @property
    def is_drain(self) -> bool:
        return self.mode in DRAIN_MODES

    @property
    def is_steady(self) -> bool:
        return self.mode in STEADY_MODES

    @property
    def is_jobs(self) -> bool:
        """A one-shot workload (once = true) on a queue table (bench/jobs.py)."""
        return self.mode.startswith("jobs")

    def per_process(self) -> int:
        """Consumers in each of the W processes (ceiling), 1 without --consumers."""
        return -(-self.consumers // self.workers) if self.consumers else 1


@dataclass
class Result:
    strategy: str
    mode: str
    rows: int
    workers: int
    seconds: float
    checks: int
    checks_per_second: float
    duplicates: int
    lock_conflicts: int
    lateness_p50_s: float | None
    lateness_p99_s: float | None
    lateness_max_s: float | None
    overdue_1s_max: int
    overdue_2s_max: int
    cpu_us_per_check: float | None
    mysql_us_per_check: float | None  # mariadbd's CPU alone
    mysql_connections_max: int  # open connections to the server, the sampler's own not counted
    row_lock_waits: int  # InnoDB row lock waits during the window
    history_length_max: int  # InnoDB history list length (undo kept by open transactions)
    take_mean: float | None  # recheck: the size the workers' takes ask for (not what they got), averaged
    cpu_seconds: dict[str, float]
    series: list[dict] = field(default_factory=list)
    # Drain mode, from the table once the processes have stopped (every strategy alike):
    drained_rows: int | None = None  # rows checked at least once
    repeated_checks: int | None = None  # checks beyond one per row (a drain's interval is a day)
    drain_checks_per_second: float | None = None  # drained_rows / (last checked_at - first)
    # CPU per check by role (workers, dispatcher, enqueuer, mariadbd, ...) over the samples that
    # enclose the whole drain (for a peer from the start of its job's read), and their sum.
    drain_cpu_us_per_check: dict[str, float] | None = None
    # The peers' job (bench/peers/enqueue.py): its read of the due ids and its enqueue, and the
    # rate counted from the start of its read to the last checked_at.
    read_seconds: float | None = None
    enqueue_seconds: float | None = None
    with_enqueue_checks_per_second: float | None = None
    # One-shot jobs (bench/jobs.py). From the producers: jobs committed over the whole run, and
    # committed per second over the measured window. From the stamps (bench/stamps.py): seconds
    # from a job's commit (its producer's clock) to the check starting on it (the worker's), for
    # the jobs committed in the window; jobs of the window never started make a quantile None.
    inserted: int | None = None
    inserts_per_second: float | None = None
    start_p50_s: float | None = None
    start_p99_s: float | None = None
    start_max_s: float | None = None
    start_unseen: int | None = None  # jobs committed in the window that the check never started
    checked_twice: int | None = None  # jobs the check was called for more than once (stamps)
    # From the table once every process has stopped (after the tail: bench_jobs_tally).
    jobs_rows: int | None = None
    left_pending: int | None = None  # neither done nor dead: left behind
    dead: int | None = None
    written_twice: int | None = None  # rows whose check_count is above 1
    tail_seconds: float | None = None  # from the producers' stop until nothing was pending


class Run:
    """One strategy's run: its processes, and a sample of everything once a second."""

    def __init__(self, settings: Workload, config: BenchConfig, strategy: str, log_dir: Path):
        self.settings = settings
        self.config = config
        self.strategy = strategy
        self.log_dir = log_dir
        if strategy == ON_CLUSTER:
            settings = settings.evolve(**{"redis_url": config.cluster_url, "partitions": config.partitions})
            self.settings = settings
        self.store = open_store(connect_redis(settings.deployment), settings)
        self.db = Database(settings)
        self.queries = Queries(settings, "bench")
        self.processes: dict[str, subprocess.Popen] = {}
        # The servers this run talks to, not every mariadbd and redis-server on the machine.
        self.mysql_pid = pid_from_file(self.db.scalar(self.queries.bench_pid_file))
        self.redis_pids = redis_pids(self.store.client)
        self.samples: list[dict] = []
        self.ran_dry: float | None = None  # drain: when 95 % of the rows were done
        self.warmup_skipped = False  # drain: over too soon to leave out a warm-up
        self.span: tuple | None = None  # drain: (rows checked, checks written, first, last checked_at)
        self.job: dict | None = None  # a peer: its job's report (read start, read and enqueue seconds)

    def extra_env(self) -> dict[str, str]:
        """Variables the strategy's processes get besides the workload's (a subclass's)."""
        return {}

    def environment(self) -> dict[str, str]:
        return {**os.environ, **self.settings.env_overrides(), **self.extra_env()}

    def start(self) -> None:
        env = self.environment()
        consumers = self.config.per_process()
        if self.config.consumers and self.strategy in ("recheck", ON_CLUSTER):
            env["RECHECK_CONCURRENCY"] = str(consumers)  # recheck's per-row checks, per process
            # --batch is what one seed consumer claims at a time (the articles: one job); recheck
            # takes ids from Redis in batches by design, so it keeps its default take.
            env["RECHECK_WORKER_BATCH"] = str(WorkloadFields.model_fields["worker_batch"].default)
        roles = []
        if self.strategy == ALONE:  # the jobs modes' producers alone (bench/jobs.py starts them)
            pass
        elif self.strategy in ("recheck", ON_CLUSTER):
            roles.append(("dispatcher", [sys.executable, "-m", "recheck.dispatcher"]))
            roles += [
                (f"worker{i}", [sys.executable, "-m", "recheck.workers"]) for i in range(self.config.workers)
            ]
        elif self.strategy == FLOOR:
            module = [sys.executable, "-m", "bench.strategies", FLOOR, str(self.config.rows)]
            slices = FLOOR_PROCESSES  # whatever --workers says: the floor has one shape
            roles += [(f"worker{i}", [*module, str(i), str(slices)]) for i in range(slices)]
        else:
            module = [sys.executable, "-m", "bench.strategies", self.strategy, str(consumers)]
            roles += [(f"worker{i}", module) for i in range(self.config.workers)]
        for name, command in roles:
            with open(self.log_dir / f"{self.strategy}-{name}.log", "wb") as log:
                self.processes[name] = subprocess.Popen(
                    command, env=env, stdout=log, stderr=subprocess.STDOUT
                )
        self.wait_ready()

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until every process publishes its heartbeat (or one exits): the samples, the warm-up
        and the drain's CPU figures then leave out the processes' start-up (imports, connecting),
        as for the peers, whose job starts once their workers listen."""
        workers = sum(name.startswith("worker") for name in self.processes)
        dispatchers = int("dispatcher" in self.processes)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and all(p.poll() is None for p in self.processes.values()):
            if (
                len(self.store.live_workers()) >= workers
                and len(self.store.live_dispatchers()) >= dispatchers
            ):
                return
            time.sleep(0.05)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()

    def pids(self) -> dict[str, list[int]]:
        pids = {name: [p.pid] for name, p in self.processes.items()}
        pids["mariadbd"] = server_pids("mariadbd", self.mysql_pid)
        pids.update(self.redis_pids)
        return pids

    def progress(self) -> dict:
        """What the workers' heartbeats say so far: checks, duplicates, conflicts, lateness."""
        workers = self.store.live_workers()
        buckets = [0] * (len(SECONDS_BUCKETS) + 1)
        for worker in workers:
            if len(worker.lateness_buckets) == len(buckets):
                buckets = [a + b for a, b in zip(buckets, worker.lateness_buckets, strict=True)]
        return {
            "takes": [w.take for w in workers if w.take],  # recheck: ids a take asks for now (gets at most)
            "checked": sum(w.checked for w in workers),
            "duplicates": sum(w.stale for w in workers),
            "conflicts": sum(w.conflicts for w in workers),
            "buckets": buckets,
            "lateness_max": max((w.lateness_max for w in workers), default=0.0),
        }

    def sample(self, started: float) -> dict:
        cpu = {}
        for name, pids in self.pids().items():
            values = [cpu_seconds(pid) for pid in pids]
            cpu[name] = sum(v for v in values if v is not None)
        overdue = {"1s": 0, "2s": 0}
        if self.config.is_steady:  # in a drain every row is overdue by design: not worth counting
            for label, lateness in (("1s", 1.0), ("2s", 2.0)):
                overdue[label] = int(
                    self.db.scalar(
                        self.queries.bench_count_due,
                        {"lateness_us": round(lateness * 1e6), "cap": OVERDUE_CAP},
                    )
                )
        server = {name: int(value) for name, value in self.db.query(self.queries.bench_server_status)}
        history = self.db.scalar(self.queries.bench_history_length)
        point = {
            "t": round(time.monotonic() - started, 3),
            "at": time.time(),  # to find the samples around a drain's checked_at span
            "connections": server.get("Threads_connected", 1) - 1,  # not the sampler's own
            "row_lock_waits": server.get("Innodb_row_lock_waits", 0),
            "history_length": int(history or 0),
            **self.progress(),
            "overdue_1s": overdue["1s"],
            "overdue_2s": overdue["2s"],
            "cpu": cpu,
        }
        self.samples.append(point)
        return point

    def _dry_within(self, window: list[dict], samples: int) -> bool:
        """Whether 95 % of the rows were done within the first `samples` samples of the window."""
        return any(s["checked"] >= 0.95 * self.config.rows for s in window[:samples])

    def summary(self) -> Result:
        config = self.config
        window = [s for s in self.samples if s["t"] >= config.warmup]
        if config.is_drain and self._dry_within(window, 3):
            # A fast drain (the floor, usually) would be over within the warm-up and measured on
            # a sample or two: measure it from its first check instead, and say so.
            window = list(self.samples)
            self.warmup_skipped = True
        if config.is_drain:
            # Processes still starting up (nothing checked yet) are not part of the drain rate:
            # the window opens at the last sample before the first check.
            started = next((i for i, s in enumerate(window) if s["checked"] > 0), len(window))
            window = window[max(started - 1, 0) :]
            # A drain measures only while there is a backlog: once 95 % of the rows are done the
            # workers run dry and an average over the idle tail would understate the rate.
            exhausted = next((i for i, s in enumerate(window) if s["checked"] >= 0.95 * config.rows), None)
            if exhausted is not None:
                self.ran_dry = window[exhausted]["t"]
                window = window[: max(exhausted, 2)]
        first, last = window[0], window[-1]
        seconds = last["t"] - first["t"]
        checks = last["checked"] - first["checked"]
        deltas = [b - a for a, b in zip(first["buckets"], last["buckets"], strict=True)]
        steady = config.is_steady
        cpu = {name: round(last["cpu"].get(name, 0) - first["cpu"].get(name, 0), 3) for name in last["cpu"]}
        # The jobs modes' producers are the load, not its cost: shown, but not counted per check.
        cpu_total = sum(seconds for name, seconds in cpu.items() if name != PRODUCERS)
        series = []
        for previous, point in zip(self.samples, self.samples[1:], strict=False):
            dt = point["t"] - previous["t"]
            step = [b - a for a, b in zip(previous["buckets"], point["buckets"], strict=True)]
            series.append(
                {
                    "t": point["t"],
                    "checks_per_second": round((point["checked"] - previous["checked"]) / dt, 1) if dt else 0,
                    "lateness_p99_s": at_most(quantile(step, SECONDS_BUCKETS, 0.99), point["lateness_max"]),
                    "lateness_max_s": point["lateness_max"],
                    "overdue_1s": point["overdue_1s"],
                    "overdue_2s": point["overdue_2s"],
                }
            )
        takes = [take for s in window for take in s["takes"]]
        late_max = max((s["lateness_max"] for s in window[1:]), default=None) if steady else None
        return Result(
            strategy=self.strategy,
            mode=config.mode,
            rows=config.rows,
            workers=config.workers,
            seconds=round(seconds, 1),
            checks=checks,
            checks_per_second=round(checks / seconds, 1) if seconds else 0.0,
            duplicates=last["duplicates"] - first["duplicates"],
            lock_conflicts=last["conflicts"] - first["conflicts"],
            lateness_p50_s=at_most(quantile(deltas, SECONDS_BUCKETS, 0.5), late_max) if steady else None,
            lateness_p99_s=at_most(quantile(deltas, SECONDS_BUCKETS, 0.99), late_max) if steady else None,
            lateness_max_s=late_max,
            overdue_1s_max=max(s["overdue_1s"] for s in window),
            overdue_2s_max=max(s["overdue_2s"] for s in window),
            cpu_us_per_check=round(cpu_total / checks * 1e6, 1) if checks else None,
            mysql_us_per_check=round(cpu.get("mariadbd", 0.0) / checks * 1e6, 1) if checks else None,
            mysql_connections_max=max(s["connections"] for s in window),
            row_lock_waits=last["row_lock_waits"] - first["row_lock_waits"],
            history_length_max=max(s["history_length"] for s in window),
            take_mean=round(sum(takes) / len(takes), 1) if takes else None,
            cpu_seconds=cpu,
            series=series,
            **(self.drain_figures() if config.is_drain else {}),
        )

    def read_span(self) -> None:
        """After a drain, from the table: rows checked, checks written, first and last checked_at."""
        rows, written, first, last = self.db.query(self.queries.bench_checked_span)[0]
        seconds = [None if value is None else float(value) for value in (first, last)]
        self.span = (int(rows), int(written), *seconds)

    def drain_figures(self) -> dict:
        """The drain as the table tells it: rows over (last - first checked_at), and for a peer
        also from the start of its job's read; CPU per check by role over the same span."""
        if self.span is None:
            return {}
        rows, written, first, last = self.span
        figures = {"drained_rows": rows, "repeated_checks": written - rows}
        if not rows:
            return figures
        if last > first:
            figures["drain_checks_per_second"] = round(rows / (last - first), 1)
        began = first
        if self.job is not None:
            began = self.job["read_started"]
            figures["read_seconds"] = self.job["read_seconds"]
            figures["enqueue_seconds"] = self.job["enqueue_seconds"]
            if last > began:
                figures["with_enqueue_checks_per_second"] = round(rows / (last - began), 1)
        figures["drain_cpu_us_per_check"] = self.cpu_per_check(began, last, rows)
        return figures

    def cpu_per_check(self, began: float, ended: float, checks: int) -> dict[str, float]:
        """CPU µs per check by role between the last sample at or before `began` and the first at
        or after `ended` (Unix seconds: the database's clock is this machine's, as the bench reads
        the servers' CPU here), each worker process counted under "workers"."""
        opening = next((s for s in reversed(self.samples) if s["at"] <= began), self.samples[0])
        closing = next((s for s in self.samples if s["at"] >= ended), self.samples[-1])
        roles: dict[str, float] = {}
        for name, seconds in closing["cpu"].items():
            role = "workers" if name.startswith("worker") else name
            roles[role] = roles.get(role, 0.0) + seconds - opening["cpu"].get(name, 0.0)
        figures = {role: round(seconds / checks * 1e6, 2) for role, seconds in roles.items()}
        figures["all"] = round(sum(roles.values()) / checks * 1e6, 2)
        return figures


def at_most(estimate: float | None, observed_max: float | None) -> float | None:
    """A quantile interpolated inside a histogram bucket can exceed the largest value seen."""
    if estimate is None or not observed_max:
        return estimate
    return min(estimate, observed_max)


def store_for(settings: Workload, prefix: str | None = None) -> Store:
    return Store(connect_redis(settings.deployment), Keys(prefix or settings.deployment.key_prefix))


def redis_pids(client) -> dict[str, list[int]]:
    """The Redis processes a run talks to: "redis-server", or on a cluster each master by port
    ("redis master :PORT") and the replicas together ("redis replicas"), as CLUSTER NODES lists
    them (each asked for its own pid)."""
    if not isinstance(client, ClusterClient):
        pid = int(client.info("server").get("process_id", 0)) or None
        return {"redis-server": server_pids("redis-server", pid)}
    found: dict[str, list[int]] = {"redis replicas": []}
    for address, node in client.cluster_nodes().items():
        host, port = address.rsplit(":", 1)
        pid = int(redis.Redis(host=host, port=int(port)).info("server").get("process_id", 0))
        if "master" in node["flags"]:
            found[f"redis master :{port}"] = [pid]
        else:
            found["redis replicas"].append(pid)
    return found
