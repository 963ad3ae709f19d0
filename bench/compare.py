"""`recheck bench`: recheck and the seed strategies side by side, on the same table and workers.

drain:  N rows all overdue; W workers (plus recheck's dispatcher) check as fast as they can.
        The floor runs first: 3 processes writing the rows blind, 2,000 per UPDATE, whatever W
        and the batch (see bench/strategies.py), and every strategy's MySQL CPU per check is
        also given as a multiple of the floor's.
steady: N rows due evenly over interval I; after a warm-up, how late rows are checked.
floor:  the floor alone (a drain of the floor strategy).

For each strategy the table is rebuilt with the same rows, the processes are started, and every
second the benchmark samples what each worker reports in its heartbeat (checks, duplicates,
lateness histogram and maximum), rows overdue by more than 1 s and 2 s, and the CPU time of
every process involved (workers, dispatcher, mariadbd, redis-server) through psutil. Figures are
taken over the measured window only (after the warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import redis

from bench.procs import cpu_seconds, pid_from_file, server_pids
from bench.strategies import FLOOR, FLOOR_PROCESSES, STRATEGIES
from recheck.seed import seed
from shared.config import Settings
from shared.db import Database
from shared.entries import make_entry
from shared.keys import Keys
from shared.launch import launch, positive_float, positive_int
from shared.metrics import SECONDS_BUCKETS, quantile
from shared.partitioned import open_store
from shared.redisconn import ClusterClient, connect_redis
from shared.sql import Queries
from shared.store import Store

ALL_STRATEGIES = ("recheck", *STRATEGIES)
# recheck again, on a private Redis Cluster (3 masters, 3 replicas) with --partitions partitions:
# only with --private, and only when asked for (it starts six more servers).
ON_CLUSTER = "recheck_cluster"
KNOWN = (FLOOR, *ALL_STRATEGIES, ON_CLUSTER)
OWNER_CLAIMS = ("update_limit", "last_insert_id")  # strategies that claim by writing an owner column
OVERDUE_CAP = 100_000  # sampling cost stays O(cap); a figure at the cap means "at least"


@dataclass
class BenchConfig:
    mode: str  # drain | steady
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
    take_mean: float | None  # recheck: the workers' take size, averaged over the window's samples
    cpu_seconds: dict[str, float]
    series: list[dict] = field(default_factory=list)


class Run:
    """One strategy's run: its processes, and a sample of everything once a second."""

    def __init__(self, settings: Settings, config: BenchConfig, strategy: str, log_dir: Path):
        self.settings = settings
        self.config = config
        self.strategy = strategy
        self.log_dir = log_dir
        if strategy == ON_CLUSTER:
            settings = settings.model_copy(
                update={"redis_url": config.cluster_url, "partitions": config.partitions}
            )
            self.settings = settings
        self.store = open_store(connect_redis(settings), settings)
        self.db = Database(settings)
        self.queries = Queries(settings, "bench")
        self.processes: dict[str, subprocess.Popen] = {}
        # The servers this run talks to, not every mariadbd and redis-server on the machine.
        self.mysql_pid = pid_from_file(self.db.scalar(self.queries.bench_pid_file))
        self.redis_pids = redis_pids(self.store.client)
        self.samples: list[dict] = []
        self.ran_dry: float | None = None  # drain: when 95 % of the rows were done
        self.warmup_skipped = False  # drain: over too soon to leave out a warm-up

    def start(self) -> None:
        env = {**os.environ, **self.settings.env_overrides()}
        consumers = self.config.per_process()
        if self.config.consumers and self.strategy in ("recheck", ON_CLUSTER):
            env["RECHECK_CONCURRENCY"] = str(consumers)  # recheck's per-row checks, per process
            # --batch is what one seed consumer claims at a time (the articles: one job); recheck
            # takes ids from Redis in batches by design, so it keeps its default take.
            env["RECHECK_WORKER_BATCH"] = str(Settings.model_fields["worker_batch"].default)
        roles = []
        if self.strategy in ("recheck", ON_CLUSTER):
            roles.append(("dispatcher", [sys.executable, "-m", "dispatcher"]))
            roles += [(f"worker{i}", [sys.executable, "-m", "workers"]) for i in range(self.config.workers)]
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

    def sample(self, started: float) -> dict:
        workers = self.store.live_workers()
        buckets = [0] * (len(SECONDS_BUCKETS) + 1)
        for worker in workers:
            counts = worker.get("lateness_buckets") or []
            if len(counts) == len(buckets):
                buckets = [a + int(b) for a, b in zip(buckets, counts, strict=True)]
        cpu = {}
        for name, pids in self.pids().items():
            values = [cpu_seconds(pid) for pid in pids]
            cpu[name] = sum(v for v in values if v is not None)
        overdue = {"1s": 0, "2s": 0}
        if self.config.mode == "steady":  # in a drain every row is overdue by design: not worth counting
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
            "connections": server.get("Threads_connected", 1) - 1,  # not the sampler's own
            "row_lock_waits": server.get("Innodb_row_lock_waits", 0),
            "history_length": int(history or 0),
            "takes": [int(w["take"]) for w in workers if "take" in w],  # recheck: ids per take now
            "checked": sum(int(w.get("checked", 0)) for w in workers),
            "duplicates": sum(int(w.get("stale", 0)) for w in workers),
            "conflicts": sum(int(w.get("conflicts", 0)) for w in workers),
            "buckets": buckets,
            "lateness_max": max((float(w.get("lateness_max", 0)) for w in workers), default=0.0),
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
        if config.mode == "drain" and self._dry_within(window, 3):
            # A fast drain (the floor, usually) would be over within the warm-up and measured on
            # a sample or two: measure it from its first check instead, and say so.
            window = list(self.samples)
            self.warmup_skipped = True
        if config.mode == "drain":
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
        steady = config.mode == "steady"
        cpu = {name: round(last["cpu"].get(name, 0) - first["cpu"].get(name, 0), 3) for name in last["cpu"]}
        cpu_total = sum(cpu.values())
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
        )


def at_most(estimate: float | None, observed_max: float | None) -> float | None:
    """A quantile interpolated inside a histogram bucket can exceed the largest value seen."""
    if estimate is None or not observed_max:
        return estimate
    return min(estimate, observed_max)


def prepare(settings: Settings, config: BenchConfig, strategy: str, say) -> None:
    """The same table for every strategy (plus the index its claims need): dropped, created, seeded."""
    db = Database(settings)
    queries = Queries(settings, "bench")
    try:
        db.execute(queries.bench_drop_table)
        db.execute(queries.bench_create_table)
        if strategy in OWNER_CLAIMS:
            db.execute(queries.bench_owner_claim_index)
        # A drain's rows are all an hour overdue from the start (inserted so: an UPDATE of every row
        # would leave InnoDB a purge backlog that runs during the measurement).
        drain = config.mode == "drain"
        seed(settings, db, config.rows, due_now=drain, start_in_s=-3600.0 if drain else 0.0)
    finally:
        db.close()
    store_for(settings).clear()
    if strategy == ON_CLUSTER:
        on_cluster = settings.model_copy(
            update={"redis_url": config.cluster_url, "partitions": config.partitions}
        )
        open_store(connect_redis(on_cluster), on_cluster).clear()
    spread = "all overdue" if config.mode == "drain" else "due over one interval"
    say(f"  table {settings.table}: {config.rows:,} rows ({spread})")


def store_for(settings: Settings, prefix: str | None = None) -> Store:
    return Store(connect_redis(settings), Keys(prefix or settings.key_prefix))


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


def redis_bytes_per_queued_id(settings: Settings, count: int = 100_000) -> float:
    """Redis memory one queued id costs (queue entry + in-flight entry), by pushing `count`."""
    store = store_for(settings, settings.key_prefix + "-memory")
    store.clear()
    store.hold_lease("memory-probe", 3_600_000)
    before = int(store.client.info("memory")["used_memory"])
    base_due = 1_790_000_000_000
    for start in range(0, count, 5000):
        store.push("memory-probe", [make_entry(i, base_due + i) for i in range(start + 1, start + 5001)])
    after = int(store.client.info("memory")["used_memory"])
    store.clear()
    return (after - before) / count


def run_bench(settings: Settings, config: BenchConfig, say=print) -> dict:
    settings = settings.model_copy(
        update={
            "table": "bench_rows",
            "key_prefix": "bench",
            "check": config.check,
            "interval": config.interval if config.mode == "steady" else 86_400.0,
            "concurrency": config.concurrency,
            "worker_batch": config.batch,
            "metrics_port": 0,
            "dashboard_port": 0,
        }
    )
    config.out.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="recheck-bench-"))
    keep_logs = False
    results: list[Result] = []
    for strategy in config.strategies:
        consumers = f" x {config.per_process()} consumers" if config.consumers else ""
        say(f"{strategy}: {config.mode}, {config.rows:,} rows, {config.workers} workers{consumers}, "
            f"{config.warmup:g} s warm-up + {config.seconds:g} s")  # fmt: skip
        prepare(settings, config, strategy, say)
        run = Run(settings, config, strategy, log_dir)
        started = time.monotonic()
        run.start()
        try:
            while (elapsed := time.monotonic() - started) < config.warmup + config.seconds:
                point = run.sample(started)
                if int(elapsed) % 5 == 0:
                    checked, overdue = point["checked"], point["overdue_1s"]
                    say(f"  [{elapsed:5.0f}s] {checked:>10,} checks | overdue>1s {overdue:>9,}")
                time.sleep(max(0.0, 1.0 - (time.monotonic() - started - elapsed)))
            run.sample(started)
        finally:
            run.stop()
        crashed = {name: p.returncode for name, p in run.processes.items() if p.returncode not in (0, -15)}
        if crashed:
            keep_logs = True
            say(f"  processes exited badly {crashed}; logs kept in {log_dir}")
        result = run.summary()
        results.append(result)
        if run.warmup_skipped:
            say("  drained within the warm-up: measured from the first check instead")
        if run.ran_dry is not None and not result.checks:
            say("  the backlog ran dry during the warm-up: nothing measured (more --rows, or less --warmup)")
        elif run.ran_dry is not None:
            say(f"  the backlog ran dry at {run.ran_dry:.0f} s: measured until then (more --rows: longer)")
    report = {
        "config": {**asdict(config), "out": str(config.out)},
        "machine": {
            "cpus": os.cpu_count(),
            "mysql": settings.mysql.host,
            "redis": settings.redis_url.split("@")[-1],
        },
        "redis_bytes_per_queued_id": round(redis_bytes_per_queued_id(settings), 1)
        if "recheck" in config.strategies
        else None,
        "results": [asdict(r) for r in results],
    }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    json_path = config.out / f"bench-{config.mode}-{stamp}.json"
    json_path.write_text(json.dumps(report, indent=2))
    say("")
    say(table(results, report["redis_bytes_per_queued_id"]))
    say(f"\nJSON: {json_path}")
    png = plot(results, config, config.out / f"bench-{config.mode}-{stamp}.png")
    say(f"plot: {png}" if png else "plot: skipped (pip install 'recheck[bench]' for matplotlib)")
    if not keep_logs:
        shutil.rmtree(log_dir, ignore_errors=True)
    return report


# Server settings of `recheck bench --private`, the ones a deployment for this load would use:
# a buffer pool that holds the table, a redo log large enough to avoid checkpoint storms,
# durable commits (flush at every commit). No binary log: add its cost if you replicate.
PRIVATE_MARIADB = (
    "--innodb-buffer-pool-size=4G",
    "--innodb-log-file-size=1G",
    "--innodb-flush-log-at-trx-commit=1",
    "--innodb-io-capacity=2000",
)


def private_servers(settings: Settings, folder: Path, started: list, say) -> Settings:
    """Start MariaDB and Redis of the benchmark's own from the machine's binaries; each server
    goes into `started` as soon as it runs, for the caller to stop whatever happens next."""
    from bench.servers import MariaDBServer, RedisServer

    mysql = MariaDBServer(folder / "mysql", extra=PRIVATE_MARIADB)
    started.append(mysql)
    mysql.start()
    cache = RedisServer(folder / "redis")
    started.append(cache)
    cache.start()
    say(f"private servers: mariadbd :{mysql.port} ({' '.join(PRIVATE_MARIADB)}), redis-server :{cache.port}")
    updated = settings.model_copy(update={"mysql_url": mysql.url("recheck"), "redis_url": cache.url()})
    server = Database(updated, with_database=False)
    server.execute(Queries(updated).create_database)
    server.close()
    return updated


def table(results: list[Result], redis_bytes: float | None) -> str:
    def f(value, fmt: str = "{:,.0f}") -> str:
        return "-" if value is None else fmt.format(value)

    best = max((r.checks_per_second for r in results if r.strategy in STRATEGIES), default=0)
    floor = next((r.mysql_us_per_check for r in results if r.strategy == FLOOR), None)

    def times_floor(us: float | None) -> str:
        return f"{us / floor:.2f}x" if floor and us is not None else "-"

    lines = [
        f"{'strategy':<15} {'checks/s':>10} {'vs best seed':>12} {'p50 late':>9} {'p99 late':>9} "
        f"{'max late':>9} {'>1s max':>9} {'>2s max':>9} {'dups':>6} {'deadlocks':>9} {'CPU us/check':>13} "
        f"{'MySQL us':>9} {'MySQL/floor':>11} {'all/floor':>9} {'conns':>6} {'lock waits':>10} "
        f"{'history':>8}",
    ]
    for r in results:
        ratio = f"{r.checks_per_second / best:.1f}x" if best and r.strategy == "recheck" else ""
        lines.append(
            f"{r.strategy:<15} {f(r.checks_per_second):>10} {ratio:>12} {f(r.lateness_p50_s, '{:.2f}s'):>9} "
            f"{f(r.lateness_p99_s, '{:.2f}s'):>9} {f(r.lateness_max_s, '{:.2f}s'):>9} "
            f"{f(r.overdue_1s_max):>9} {f(r.overdue_2s_max):>9} {r.duplicates:>6} {r.lock_conflicts:>9} "
            f"{f(r.cpu_us_per_check, '{:.1f}'):>13} {f(r.mysql_us_per_check, '{:.1f}'):>9} "
            f"{times_floor(r.mysql_us_per_check):>11} {times_floor(r.cpu_us_per_check):>9} "
            f"{r.mysql_connections_max:>6} {r.row_lock_waits:>10,} {r.history_length_max:>8,}"
        )
    for r in results:
        if r.take_mean is not None:
            lines.append(f"  {r.strategy}: workers took {r.take_mean:,.0f} ids at a time on average")
    for r in results:
        parts = ", ".join(f"{name} {sec:.1f}s" for name, sec in sorted(r.cpu_seconds.items()) if sec)
        lines.append(f"  CPU {r.strategy}: {parts}")
    for r in results:
        redis = {name: sec for name, sec in sorted(r.cpu_seconds.items()) if name.startswith("redis")}
        if r.checks and r.strategy in ("recheck", ON_CLUSTER):
            each = ", ".join(f"{name} {sec / r.checks * 1e6:.2f}" for name, sec in redis.items())
            total = sum(redis.values()) / r.checks * 1e6
            lines.append(f"  Redis CPU us per check, {r.strategy}: {each} (all {total:.2f})")
    if redis_bytes is not None:
        lines.append(f"Redis memory per queued id (queue entry + in-flight entry): {redis_bytes:.0f} bytes")
    return "\n".join(lines)


def plot(results: list[Result], config: BenchConfig, path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    steady = config.mode == "steady"
    fig, axes = plt.subplots(2 if steady else 1, 1, figsize=(10, 7 if steady else 4), squeeze=False)
    for r in results:
        t = [p["t"] for p in r.series]
        axes[0][0].plot(t, [p["checks_per_second"] for p in r.series], label=r.strategy)
        if steady:
            axes[1][0].plot(t, [p["lateness_p99_s"] or 0 for p in r.series], label=f"{r.strategy} p99")
    axes[0][0].set_ylabel("checks / s")
    axes[0][0].set_title(f"{config.mode}: {config.rows:,} rows, {config.workers} workers")
    if steady:
        axes[1][0].set_ylabel("lateness p99 (s)")
        axes[1][0].set_yscale("log")
    for row in axes:
        row[0].axvline(config.warmup, color="grey", linestyle=":", linewidth=1)
        row[0].set_xlabel("seconds")
        row[0].legend(loc="best", fontsize=8)
        row[0].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


EVERY_STRATEGY = ",".join(ALL_STRATEGIES)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recheck bench",
        description="Measure recheck beside the MySQL queue-table strategies on the same table and check "
        "(see docs/performance.md).",
    )
    parser.add_argument(
        "--mode", choices=("drain", "steady", "floor", "poll"), default="drain",
        help="drain: all rows overdue (the floor first); steady: rows due over --interval; "
        "floor: the floor alone; poll: dispatcher cost per poll",
    )  # fmt: skip
    parser.add_argument(
        "--sizes", default="1000000,10000000", help="poll: table sizes to measure at (comma-separated)"
    )
    parser.add_argument("--polls", type=positive_int, default=200, help="poll: polls measured per size")
    parser.add_argument("--rows", type=positive_int, default=1_000_000, help="rows in the table (default 1M)")
    parser.add_argument("--workers", type=positive_int, default=4, help="worker processes per strategy")
    parser.add_argument("--seconds", type=positive_float, default=20.0, help="measured time per strategy")
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="unmeasured start (default: 5 s drain; steady 90 s, enough for a freshly seeded table "
        "to settle and any start-up backlog to clear near full load)",
    )
    parser.add_argument(
        "--interval", type=positive_float, default=10.0, help="steady: seconds between checks of a row"
    )
    parser.add_argument(
        "--strategies", default=None,
        help=f"comma-separated, from floor,{EVERY_STRATEGY},{ON_CLUSTER} (default: all but {ON_CLUSTER}; "
        "steady: no floor)",
    )  # fmt: skip
    parser.add_argument("--check", default="workers.demo:noop", help="the check every strategy runs")
    parser.add_argument("--concurrency", type=positive_int, default=50, help="per-row checks: rows at once")
    parser.add_argument("--batch", type=positive_int, default=500, help="ids a worker takes at a time")
    parser.add_argument(
        "--consumers", type=int, default=0,
        help="N concurrent claimers spread over the --workers processes: recheck's per-row "
        "concurrency, or each seed strategy's threads (one MySQL connection each)",
    )  # fmt: skip
    parser.add_argument(
        "--partitions", type=positive_int, default=16,
        help=f"{ON_CLUSTER}: the workload's partitions on the private Redis Cluster",
    )  # fmt: skip
    parser.add_argument(
        "--cluster-replicas", type=int, default=1, choices=(0, 1, 2),
        help=f"{ON_CLUSTER}: replicas per master of the private Redis Cluster (3 masters)",
    )  # fmt: skip
    parser.add_argument("--out", default="bench-results", help="where JSON and PNG go")
    parser.add_argument(
        "--private",
        action="store_true",
        help="start tuned MariaDB and Redis of its own (see docs/performance.md)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    default = {"drain": (FLOOR, *ALL_STRATEGIES), "floor": (FLOOR,)}.get(args.mode, ALL_STRATEGIES)
    strategies = default
    if args.strategies is not None:
        strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    unknown = [s for s in strategies if s not in KNOWN]
    if unknown or not strategies:
        choices = f"floor,{EVERY_STRATEGY}"
        print(f"recheck bench: unknown strategies {unknown}; choose from {choices}", file=sys.stderr)
        return 2
    if FLOOR in strategies and args.mode == "steady":
        print("recheck bench: the floor is measured in drain mode (its rows are written blind, once)",
              file=sys.stderr)  # fmt: skip
        return 2
    sizes = []
    if args.mode == "poll":
        try:
            sizes = [positive_int(size.replace("_", "")) for size in args.sizes.split(",")]
        except (ValueError, argparse.ArgumentTypeError) as error:
            print(f"recheck bench: --sizes {args.sizes!r}: {error}", file=sys.stderr)
            return 2
    warmup = args.warmup if args.warmup is not None else (90.0 if args.mode == "steady" else 5.0)
    config = BenchConfig(
        mode="drain" if args.mode == "floor" else args.mode, rows=args.rows, workers=args.workers,
        seconds=args.seconds, warmup=warmup, interval=args.interval, strategies=strategies,
        check=args.check, concurrency=args.concurrency, batch=args.batch, out=Path(args.out),
        consumers=max(args.consumers, 0), partitions=args.partitions, cluster_replicas=args.cluster_replicas,
    )  # fmt: skip
    if ON_CLUSTER in strategies and not args.private:
        print(
            f"recheck bench: {ON_CLUSTER} starts a Redis Cluster of its own: add --private", file=sys.stderr
        )
        return 2
    return launch("bench", lambda settings: bench(settings, config, sizes, args.polls, args.private))


def bench(settings: Settings, config: BenchConfig, sizes: list[int], polls: int, private: bool) -> int:
    servers: list = []
    folder = Path(tempfile.mkdtemp(prefix="recheck-servers-")) if private else None
    try:
        if folder is not None:
            settings = private_servers(settings, folder, servers, print)
            if ON_CLUSTER in config.strategies:
                from bench.servers import RedisCluster

                cluster = RedisCluster(folder / "redis-cluster", replicas=config.cluster_replicas)
                servers.append(cluster)
                cluster.start()
                config.cluster_url = cluster.url()
                print(f"private redis cluster: 3 masters, {config.cluster_replicas} replicas each, "
                      f"from :{cluster.nodes[0].port}")  # fmt: skip
        if config.mode == "poll":
            from bench.pollcost import run_poll_bench

            run_poll_bench(settings, sizes, polls, config.out)
        else:
            run_bench(settings, config)
    finally:
        for server in servers:
            server.kill()
        if folder is not None:  # the private servers' data: over 1 GB a run, of no use afterwards
            shutil.rmtree(folder, ignore_errors=True)
    return 0
