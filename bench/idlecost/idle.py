"""`recheck bench --mode idle`: what a deployment costs while nothing is due, and how soon a job
inserted into one of its idle tables then starts (issue 50).

--workloads one-shot workloads (default 10), each on a jobs table of its own (bench_create_jobs_table,
empty), in one workloads file; one dispatcher and --workers worker processes (default 2) serving
all of them, with their metrics (and the dispatcher's dashboard) on, as compose runs them. Once
every process heartbeats and a warm-up has passed:

1. Idle: for --seconds (default 30), the recheck processes' CPU time (user + system, psutil) as a
   share of one core, Redis' commands per second (INFO's total_commands_processed, the two reads
   of it left out) and the commands that made them, MariaDB's and Redis' own CPU beside.
2. Latency: --jobs single autocommit INSERTs (default 40), one at a time into a table picked at
   random, 0.5-1.5 s apart (the deployment idles between them); commit -> the check's start
   (bench/stamps.py), p50, p99 and the largest.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.procs import cpu_seconds, pid_from_file, server_pids, thread_cpu_seconds, wakeups
from bench.stamps import ENV, quantile, read_checks, start_delays
from recheck.shared.config import Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.sql import Queries
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.keys import Keys
from recheck.shared.redis.store import Store

STAMP_CHECK = "bench.stamps:stamp"
READY_TIMEOUT = 60.0
WARMUP = 5.0  # seconds after every process heartbeats before the idle window starts
GAP = (0.5, 1.5)  # seconds between two inserts of the latency part
SETTLE = 5.0  # seconds the last jobs get to start before the latency part is tallied
TOP_COMMANDS = 30


@dataclass
class IdleResult:
    workloads: int
    workers: int
    seconds: float
    cpu_share: float  # the recheck processes' CPU over the window, as a share of one core
    cpu_by_process: dict[str, float]
    wakeups_per_s: dict[str, float]  # each recheck process's threads woken a second (bench.procs.wakeups)
    redis_commands_per_s: float
    redis_top: dict[str, float]  # commands/s by command (Redis' commandstats), the largest first
    mariadbd_cpu_share: float
    redis_cpu_share: float
    mysql_statements_per_s: float  # the server's Questions a second (the bench's own reads left out)
    jobs: int
    start_p50_ms: float | None
    start_p99_ms: float | None
    start_max_ms: float | None
    never_started: int
    delays_ms: list[float] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def workload_names(count: int) -> list[str]:
    return [f"idle{i}" for i in range(count)]


def first_id(name: str) -> int:
    """Each table's ids start at a billion times its number: the stamps name ids alone."""
    return int(name.removeprefix("idle")) * 10**9 + 1


def prepare(settings: Workload, count: int, folder: Path) -> Path:
    """count empty jobs tables and the workloads file naming them; returns the file's path."""
    lines = []
    db = Database(settings)
    try:
        for name in workload_names(count):
            one = settings.evolve(table=f"bench_{name}", once=True)
            queries = Queries(one, "bench")
            db.execute(queries.bench_drop_table)
            db.execute(queries.bench_create_jobs_table)
            db.execute(queries.bench_ids_from, (first_id(name),))  # ids unique over the tables
            lines += [f"[workloads.{name}]", f'table = "bench_{name}"', "once = true",
                      f'check = "{STAMP_CHECK}"', ""]  # fmt: skip
    finally:
        db.close()
    path = folder / "recheck.toml"
    path.write_text("\n".join(lines))
    return path


def redis_info(client) -> tuple[int, dict[str, int]]:
    """(total commands processed, calls by command) so far."""
    total = int(client.info("stats")["total_commands_processed"])
    calls = {
        name.removeprefix("cmdstat_"): int(stats["calls"])
        for name, stats in client.info("commandstats").items()
    }
    return total, calls


def run_idle_bench(settings: Workload, workloads: int, workers: int, seconds: float, jobs: int,
                   out: Path, say=print) -> IdleResult:  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="recheck-idle-"))
    config = prepare(settings, workloads, folder)
    store = Store(connect_redis(settings.deployment), Keys(settings.deployment.key_prefix))
    store.clear()
    stamps = folder / "stamps"
    stamps.mkdir()
    env = {**os.environ, **settings.env_overrides(), "RECHECK_CONFIG": str(config), ENV: str(stamps),
           "RECHECK_LOG_LEVEL": "WARNING"}  # fmt: skip
    env.pop("RECHECK_WORKLOAD", None)
    here = str(Path(__file__).resolve().parents[2])  # the check, bench.stamps, from this checkout
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH", "")]))
    roles = [("dispatcher", [sys.executable, "-m", "recheck.dispatcher"])]
    roles += [(f"worker{i}", [sys.executable, "-m", "recheck.workers"]) for i in range(workers)]
    processes: dict[str, subprocess.Popen] = {}
    try:
        for name, command in roles:
            ports = {
                "RECHECK_METRICS_PORT": os.environ.get("XPORT") or str(free_port()),
                "RECHECK_DASHBOARD_PORT": os.environ.get("XPORT") or str(free_port()),
            }
            own = {**env, **ports}
            with open(folder / f"{name}.log", "wb") as log:
                processes[name] = subprocess.Popen(command, env=own, stdout=log, stderr=subprocess.STDOUT)
        wait_ready(settings, workloads, workers, processes)
        say(f"  {workloads} idle one-shot workloads, 1 dispatcher and {workers} workers running; "
            f"warm-up {WARMUP:.0f} s")  # fmt: skip
        time.sleep(WARMUP)
        result = measure_idle(settings, store, processes, workloads, workers, seconds)
        say(
            f"  idle {seconds:.0f} s: recheck processes {100 * result.cpu_share:.2f} % of a core "
            f"({', '.join(f'{k} {100 * v:.2f} %' for k, v in result.cpu_by_process.items())}); redis "
            f"{result.redis_commands_per_s:.1f} commands/s "
            f"({', '.join(f'{k} {v:.1f}' for k, v in result.redis_top.items())}); "
            f"mariadbd {100 * result.mariadbd_cpu_share:.2f} %, "
            f"redis-server {100 * result.redis_cpu_share:.2f} %; MySQL statements "
            f"{result.mysql_statements_per_s:.1f}/s; wake-ups/s "
            f"({', '.join(f'{k} {v:.1f}' for k, v in result.wakeups_per_s.items())})"
        )
        measure_starts(settings, workloads, jobs, stamps, result, say)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(folder, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "idle.json").write_text(json.dumps(asdict(result), indent=2))
    return result


def mysql_questions(db: Database) -> int:
    """The server's statements so far (Questions: every client's, this one included)."""
    return int(db.query("SHOW GLOBAL STATUS LIKE 'Questions'")[0][1])


def wait_ready(settings: Workload, workloads: int, workers: int, processes: dict) -> None:
    """Until every process heartbeats in every workload (or one exits: an error)."""
    stores = [Store(connect_redis(settings.deployment), Keys(settings.deployment.key_prefix, name))
              for name in workload_names(workloads)]  # fmt: skip
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        exited = [name for name, p in processes.items() if p.poll() is not None]
        if exited:
            raise RuntimeError(f"{', '.join(exited)} exited at start (see its log)")
        if all(len(s.live_workers()) >= workers and s.live_dispatchers() for s in stores):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the processes did not all heartbeat within {READY_TIMEOUT:.0f} s")


def measure_idle(settings: Workload, store: Store, processes: dict, workloads: int, workers: int,
                 seconds: float) -> IdleResult:  # fmt: skip
    db = Database(settings)
    mysql_pids = server_pids("mariadbd", pid_from_file(db.scalar(Queries(settings, "bench").bench_pid_file)))
    redis_pid = int(store.client.info("server")["process_id"])
    watched = {name: [p.pid] for name, p in processes.items()}
    watched |= {"mariadbd": mysql_pids, "redis": [redis_pid]}

    def cpu() -> dict[str, float]:
        """recheck's processes to the nanosecond (their threads live as long as they do); the
        servers' from the process totals (threads of theirs come and go)."""
        read = {name: thread_cpu_seconds for name in processes}
        return {
            name: sum(read.get(name, cpu_seconds)(p) or 0.0 for p in pids) for name, pids in watched.items()
        }

    def woken() -> dict[str, int]:
        return {name: wakeups(process.pid) or 0 for name, process in processes.items()}

    total_before, calls_before = redis_info(store.client)
    questions_before = mysql_questions(db)
    cpu_before, woken_before, began = cpu(), woken(), time.monotonic()
    time.sleep(seconds)
    cpu_after, woken_after, spent = cpu(), woken(), time.monotonic() - began
    total_after, calls_after = redis_info(store.client)
    questions = mysql_questions(db) - questions_before - 1  # the first read's own statement
    db.close()
    share = {name: (cpu_after[name] - cpu_before[name]) / spent for name in watched}
    by_command = {name: (n - calls_before.get(name, 0)) / spent for name, n in calls_after.items()}
    by_command.pop("info", None)
    top = dict(sorted(((k, round(v, 1)) for k, v in by_command.items() if v > 0), key=lambda kv: -kv[1]))
    own = list(processes)
    return IdleResult(
        workloads=workloads, workers=workers, seconds=round(spent, 2),
        cpu_share=round(sum(share[name] for name in own), 5),
        cpu_by_process={name: round(share[name], 5) for name in own},
        wakeups_per_s={name: round((woken_after[name] - woken_before[name]) / spent, 1) for name in own},
        redis_commands_per_s=round((total_after - total_before - 2) / spent, 1),
        redis_top=dict(list(top.items())[:TOP_COMMANDS]),
        mariadbd_cpu_share=round(share["mariadbd"], 5), redis_cpu_share=round(share["redis"], 5),
        mysql_statements_per_s=round(questions / spent, 1),
        jobs=0, start_p50_ms=None, start_p99_ms=None, start_max_ms=None, never_started=0,
    )  # fmt: skip


def measure_starts(settings: Workload, workloads: int, jobs: int, stamps: Path, result: IdleResult,
                   say) -> None:  # fmt: skip
    """jobs single inserts into random tables, GAP apart; commit -> start into `result`."""
    if jobs <= 0:
        return
    names = workload_names(workloads)
    connections = {name: Database(settings) for name in names}
    rng = random.Random(50)
    commits: dict[int, float] = {}
    try:
        for _ in range(jobs):
            time.sleep(rng.uniform(*GAP))
            index = rng.randrange(workloads)
            db = connections[names[index]]
            sql = Queries(settings.evolve(table=f"bench_{names[index]}", once=True), "bench").bench_produce
            with db.conn.cursor() as cursor:
                cursor.execute(sql)
                commits[cursor.lastrowid] = time.time()
        time.sleep(SETTLE)
    finally:
        for db in connections.values():
            db.close()
    starts, _ = read_checks(stamps)
    delays, unseen = start_delays(commits, starts, 0.0, float("inf"))
    result.jobs = jobs
    result.never_started = unseen
    result.delays_ms = [round(1000 * d, 1) for d in delays]
    p50, p99 = quantile(delays, 0.5, unseen), quantile(delays, 0.99, unseen)
    result.start_p50_ms = None if p50 is None else round(1000 * p50, 1)
    result.start_p99_ms = None if p99 is None else round(1000 * p99, 1)
    result.start_max_ms = round(1000 * delays[-1], 1) if delays and not unseen else None
    say(
        f"  {jobs} single inserts, {GAP[0]}-{GAP[1]} s apart: commit -> start p50 {result.start_p50_ms} ms, "
        f"p99 {result.start_p99_ms} ms, max {result.start_max_ms} ms; never started {unseen}"
    )
