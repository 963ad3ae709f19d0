"""`recheck bench`: recheck and the seed strategies side by side, on the same table and workers.

drain:  N rows all overdue; W workers (plus recheck's dispatcher) check as fast as they can.
        The floor runs first: 3 processes writing the rows blind, 2,000 per UPDATE, whatever W
        and the batch (see bench/strategies.py), and every strategy's MySQL CPU per check is
        also given as a multiple of the floor's.
steady: N rows due evenly over interval I; after a warm-up, how late rows are checked.
floor:  the floor alone (a drain of the floor strategy).
jobs, jobs-steady, jobs-saturated: one-shot jobs on a queue table (once = true), recheck beside
        the articles' own consumers; a drain of pending jobs, producers inserting one job per
        transaction at a fixed rate while consumers run, and producers at full speed alone and
        then beside recheck's consumers (bench/jobs.py).

For each strategy the table is rebuilt with the same rows, the processes are started, and every
second the benchmark samples what each worker reports in its heartbeat (checks, duplicates,
lateness histogram and maximum), rows overdue by more than 1 s and 2 s, and the CPU time of
every process involved (workers, dispatcher, mariadbd, redis-server) through psutil. Figures are
taken over the measured window only (after the warm-up); sampling starts once every process is
up (its heartbeat published). After a drain the table itself says how many rows were checked
(and how many twice), between which first and last checked_at, and the CPU per check of each
role over the samples that enclose that span.

The peers (bench/peers/, only when asked for, with the `peers` extra): a hand-batched or per-row
Celery or RQ job on the same table, servers and check; their job's read of the due ids and its
enqueue are timed, and a second rate counts from the start of that read.
"""

from __future__ import annotations

import _thread
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from bench.jobs import DEFAULT_STRATEGIES as JOBS_STRATEGIES
from bench.jobs import JOBS_TABLE, STAMP_CHECK, JobsRun, prepare_jobs
from bench.peers import EXTRA as PEERS_EXTRA
from bench.peers import PEERS, missing_packages
from bench.report import jobs_lines, plot, table
from bench.runs import ALL_STRATEGIES, ALONE, ON_CLUSTER, BenchConfig, Result, Run, store_for
from bench.strategies import FLOOR
from recheck.commands.launch import launch, positive_float, positive_int
from recheck.commands.seed import seed
from recheck.shared.config import Workload
from recheck.shared.core.entries import make_entry
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.schema import create_changes_table
from recheck.shared.mysql.sql import Queries
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import open_store

# The hand-written Celery and RQ jobs (bench/peers/): only when asked for, with the peers extra.
KNOWN = (FLOOR, *ALL_STRATEGIES, ON_CLUSTER, *PEERS, ALONE)
JOBS_MODES = tuple(JOBS_STRATEGIES)
WITH_PRODUCERS = ("jobs-steady", "jobs-saturated")
OWNER_CLAIMS = ("update_limit", "last_insert_id")  # strategies that claim by writing an owner column
DRAINED_SAMPLES = 2  # seconds a drain is sampled after its last row was checked (the CPU span's end)


def make_run(settings: Workload, config: BenchConfig, strategy: str, log_dir: Path) -> Run:
    if strategy in PEERS:
        from bench.peers.run import PeerRun

        return PeerRun(settings, config, strategy, log_dir)
    if config.is_jobs:
        return JobsRun(settings, config, strategy, log_dir)
    return Run(settings, config, strategy, log_dir)


def prepare(settings: Workload, config: BenchConfig, strategy: str, say) -> None:
    """The same table for every strategy (plus the index its claims need): dropped, created, seeded."""
    if config.is_jobs:
        prepare_jobs(settings, config, say, claim_index=strategy in OWNER_CLAIMS)
        return
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
        if settings.changes and strategy == "recheck":  # RECHECK_CHANGES=true: the change feed's cost
            create_changes_table(settings, db)
            db.execute(queries.bench_clear_changes)
    finally:
        db.close()
    store_for(settings).clear()
    if strategy in PEERS:
        from bench.peers.run import clear_peer_keys

        clear_peer_keys(store_for(settings).client)
    if strategy == ON_CLUSTER:
        on_cluster = settings.evolve(**{"redis_url": config.cluster_url, "partitions": config.partitions})
        open_store(connect_redis(on_cluster), on_cluster).clear()
    spread = "all overdue" if config.mode == "drain" else "due over one interval"
    say(f"  table {settings.table}: {config.rows:,} rows ({spread})")


def redis_bytes_per_queued_id(settings: Workload, count: int = 100_000) -> float:
    """Redis memory one queued id costs (queue entry + in-flight entry), by pushing `count`."""
    store = store_for(settings, settings.deployment.key_prefix + "-memory")
    store.clear()
    store.hold_lease("memory-probe", 3_600_000)
    before = int(store.client.info("memory")["used_memory"])
    base_due = 1_790_000_000_000
    for start in range(0, count, 5000):
        store.push("memory-probe", [make_entry(i, base_due + i) for i in range(start + 1, start + 5001)])
    after = int(store.client.info("memory")["used_memory"])
    store.clear()
    return (after - before) / count


def run_strategies(
    settings: Workload, config: BenchConfig, log_dir: Path, results: list[Result], crashed: list[str], say
) -> None:
    """Each strategy in turn, its Result appended to `results`, and its name to `crashed` if one
    of its processes exited badly (their logs are in log_dir): both filled as it goes, so that an
    interrupted run still knows."""
    for strategy in config.strategies:
        consumers = f" x {config.per_process()} consumers" if config.consumers else ""
        rows = f"{config.producers} producers" if config.producers else f"{config.rows:,} rows"
        say(f"{strategy}: {config.mode}, {rows}, {config.workers} workers{consumers}, "
            f"{config.warmup:g} s warm-up + {config.seconds:g} s")  # fmt: skip
        prepare(settings, config, strategy, say)
        run = make_run(settings, config, strategy, log_dir)
        run.start()  # returns once its processes are up: the warm-up and the time count from then
        started = time.monotonic()
        drained_at = None  # a drain ends once every row is checked: nothing is left to measure
        try:
            while (elapsed := time.monotonic() - started) < config.warmup + config.seconds:
                point = run.sample(started)
                if int(elapsed) % 5 == 0:
                    checked, overdue = point["checked"], point["overdue_1s"]
                    inserted = f" | inserted {point['inserted']:>10,}" if "inserted" in point else ""
                    say(f"  [{elapsed:5.0f}s] {checked:>10,} checks | overdue>1s {overdue:>9,}{inserted}")
                if config.is_drain and point["checked"] >= config.rows:
                    drained_at = elapsed if drained_at is None else drained_at
                    if elapsed - drained_at >= DRAINED_SAMPLES and elapsed >= config.warmup + 1:
                        say(f"  [{elapsed:5.0f}s] every row checked: stopping")
                        break
                time.sleep(max(0.0, 1.0 - (time.monotonic() - started - elapsed)))
            run.sample(started)
        finally:
            run.stop()
        if config.is_drain:
            run.read_span()
        bad = {name: p.returncode for name, p in run.processes.items() if p.returncode not in (0, -15)}
        if bad:
            crashed.append(strategy)
            say(f"  processes exited badly {bad}; logs kept in {log_dir}")
        result = run.summary()
        results.append(result)
        if run.warmup_skipped:
            say("  drained within the warm-up: measured from the first check instead")
        if run.ran_dry is not None and not result.checks:
            say("  the backlog ran dry during the warm-up: nothing measured (more --rows, or less --warmup)")
        elif run.ran_dry is not None:
            say(f"  the backlog ran dry at {run.ran_dry:.0f} s: measured until then (more --rows: longer)")
        if result.drained_rows is not None and result.drained_rows < config.rows:
            say(f"  {result.drained_rows:,} of {config.rows:,} rows checked by the end: the drain figures "
                "cover those (more --seconds to see the whole drain)")  # fmt: skip
        if strategy in PEERS and run.job is None:
            say(
                "  its job had not finished enqueueing by the end: no read + enqueue figures (more --seconds)"
            )


def run_bench(settings: Workload, config: BenchConfig, say=print) -> dict:
    settings = settings.evolve(
        **{
            "table": JOBS_TABLE if config.is_jobs else "bench_rows",
            "once": config.is_jobs,  # a one-shot workload: a success is done (bench/jobs.py)
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
    results: list[Result] = []
    crashed: list[str] = []
    try:  # the processes' logs are kept only if one exited badly (interrupted or not)
        run_strategies(settings, config, log_dir, results, crashed, say)
    finally:
        if not crashed:
            shutil.rmtree(log_dir, ignore_errors=True)
    report = {
        "config": {**asdict(config), "out": str(config.out)},
        "machine": {
            "cpus": os.cpu_count(),
            "mysql": settings.mysql.host,
            "redis": settings.deployment.redis_url.split("@")[-1],
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
    if config.is_jobs:
        say("\n".join(jobs_lines(results, config)))
    say(f"\nJSON: {json_path}")
    png = plot(results, config, config.out / f"bench-{config.mode}-{stamp}.png")
    say(f"plot: {png}" if png else "plot: skipped (pip install 'recheck[bench]' for matplotlib)")
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


def split_cores(available: set[int], mysql_core: int) -> tuple[set[int], set[int]]:
    """--mysql-core: (MariaDB's core, the cores left for everything else); ValueError unless the
    core is one this process may run on and another one is left."""
    if mysql_core not in available:
        raise ValueError(f"core {mysql_core} is not one this process may run on ({sorted(available)})")
    rest = available - {mysql_core}
    if not rest:
        raise ValueError("no other core is left for Redis, the dispatcher and the workers")
    return {mysql_core}, rest


def pin_threads(pid: int, cores: set[int]) -> None:
    """Every thread of process `pid` onto `cores`; threads it starts later (a connection's) are
    started by these and inherit it."""
    import psutil

    for thread in psutil.Process(pid).threads():
        os.sched_setaffinity(thread.id, cores)


def private_mariadb(folder: Path, started: list, say, mysql_core: int | None = None):
    """Start the benchmark's own MariaDB (PRIVATE_MARIADB) from the machine's binaries; it goes
    into `started` as soon as it runs, for the caller to stop whatever happens next. With
    `mysql_core`, it runs alone on that core and this process, and all it starts after (Redis,
    the dispatcher, the workers, the peers), on the others: MySQL as on a host of its own."""
    from tests.support.servers import MariaDBServer

    cores = split_cores(os.sched_getaffinity(0), mysql_core) if mysql_core is not None else None
    if cores is not None:
        os.sched_setaffinity(0, cores[1])
    mysql = MariaDBServer(folder / "mysql", extra=PRIVATE_MARIADB)
    started.append(mysql)
    mysql.start()
    if cores is not None and mysql.process is not None:
        pin_threads(mysql.process.pid, cores[0])
        say(f"mariadbd alone on core {mysql_core}; everything else on cores {sorted(cores[1])}")
    return mysql


def private_servers(
    settings: Workload, folder: Path, started: list, say, mysql_core: int | None = None
) -> Workload:
    """Start MariaDB (private_mariadb) and Redis of the benchmark's own; each server goes into
    `started` as soon as it runs."""
    from tests.support.servers import RedisServer

    mysql = private_mariadb(folder, started, say, mysql_core)
    cache = RedisServer(folder / "redis")
    started.append(cache)
    cache.start()
    say(f"private servers: mariadbd :{mysql.port} ({' '.join(PRIVATE_MARIADB)}), redis-server :{cache.port}")
    updated = settings.evolve(**{"mysql_url": mysql.url("recheck"), "redis_url": cache.url()})
    server = Database(updated, with_database=False)
    server.execute(Queries(updated).create_database)
    server.close()
    return updated


EVERY_STRATEGY = ",".join(ALL_STRATEGIES)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recheck bench",
        description="Measure recheck beside the MySQL queue-table strategies on the same table and check "
        "(see docs/performance.md).",
    )
    parser.add_argument(
        "--mode", choices=("drain", "steady", "floor", "poll", "groups", "scripts", "idle", *JOBS_MODES),
        default="drain",
        help="drain: all rows overdue (the floor first); steady: rows due over --interval; "
        "floor: the floor alone; poll: dispatcher cost per poll; groups: a worker's take as the "
        "number of groups grows (--sizes: group counts); scripts: Redis' time per id in the "
        "dispatch, take and ack scripts (--rows ids a round, --rounds); idle: --workloads empty one-shot "
        "workloads, a dispatcher and --workers workers (default 2): CPU and Redis commands over "
        "--seconds (default 30), then --jobs single inserts' commit -> start; one-shot jobs on a queue "
        "table: "
        "jobs: a drain of --rows pending jobs; jobs-steady: --producers inserting one job per "
        "transaction at --rate jobs/s while the consumers run; jobs-saturated: the producers as fast "
        f"as they can, alone ({ALONE}) and then beside the consumers (docs/performance.md)",
    )  # fmt: skip
    parser.add_argument(
        "--sizes",
        default="1000000,10000000",
        help="poll: table sizes to measure at; groups: group counts (comma-separated)",
    )
    parser.add_argument("--polls", type=positive_int, default=200, help="poll: polls measured per size")
    parser.add_argument("--rounds", type=positive_int, default=5, help="scripts: rounds measured")
    parser.add_argument("--rows", type=positive_int, default=1_000_000, help="rows in the table (default 1M)")
    parser.add_argument(
        "--workers", type=positive_int, default=None, help="worker processes per strategy (default 4; idle 2)"
    )
    parser.add_argument(
        "--seconds", type=positive_float, default=None,
        help="measured time per strategy (default 20; idle 30)",
    )  # fmt: skip
    parser.add_argument("--workloads", type=positive_int, default=10, help="idle: one-shot workloads")
    parser.add_argument(
        "--jobs", type=int, default=40, help="idle: single inserts timed after the idle window"
    )
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
        help=f"comma-separated, from floor,{EVERY_STRATEGY},{ON_CLUSTER},{','.join(PEERS)} (default: "
        f"all but {ON_CLUSTER} and the peers; steady: no floor). The peers, hand-batched and per-row "
        "Celery and RQ jobs (drain only, one consumer per process), need the peers extra",
    )  # fmt: skip
    parser.add_argument(
        "--check", default=None,
        help=f"the check every strategy runs (default recheck.workers.demo:noop; jobs modes {STAMP_CHECK}, "
        "the same no-op noting when it starts on which job)",
    )  # fmt: skip
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
    parser.add_argument(
        "--peer-job", choices=("first", "overlap"), default="first",
        help="the peers: their job reads and enqueues every due id first, the workers held until it is "
        "done (their drain alone is a pure drain), or while the workers drain (overlap, as a periodic "
        "job beside running workers does)",
    )  # fmt: skip
    parser.add_argument(
        "--producers", type=positive_int, default=8,
        help="jobs-steady, jobs-saturated: producer processes, each inserting one job per transaction",
    )  # fmt: skip
    parser.add_argument(
        "--rate", type=float, default=2000.0,
        help="jobs-steady: jobs/s the producers insert together (jobs-saturated: as fast as they can)",
    )  # fmt: skip
    parser.add_argument(
        "--tail", type=positive_float, default=60.0,
        help="jobs-steady, jobs-saturated: seconds the consumers get to finish the pending jobs once the "
        "producers stop, before the table is tallied",
    )  # fmt: skip
    parser.add_argument("--out", default="bench-results", help="where JSON and PNG go")
    parser.add_argument(
        "--private",
        action="store_true",
        help="start tuned MariaDB and Redis of its own (see docs/performance.md)",
    )
    parser.add_argument(
        "--mysql-core", type=int, default=None, metavar="N",
        help="with --private: MariaDB alone on CPU core N, everything else on the other cores (MySQL "
        "as on a host of its own, where its CPU per check is not its neighbours' contention)",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    defaults = {"drain": (FLOOR, *ALL_STRATEGIES), "floor": (FLOOR,), **JOBS_STRATEGIES}
    default = defaults.get(args.mode, ALL_STRATEGIES)
    strategies = default
    if args.strategies is not None:
        strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    unknown = [s for s in strategies if s not in KNOWN]
    if unknown or not strategies:
        choices = f"floor,{EVERY_STRATEGY},{ON_CLUSTER},{','.join(PEERS)}"
        print(f"recheck bench: unknown strategies {unknown}; choose from {choices}", file=sys.stderr)
        return 2
    peers = [s for s in strategies if s in PEERS]
    if peers and args.mode != "drain":
        print(f"recheck bench: {', '.join(peers)} are measured in drain mode (their job enqueues the due "
              "rows once)", file=sys.stderr)  # fmt: skip
        return 2
    missing = missing_packages(peers)
    if missing:
        print(
            f"recheck bench: {', '.join(peers)} need {' and '.join(missing)}: {PEERS_EXTRA}", file=sys.stderr
        )
        return 2
    if FLOOR in strategies and args.mode not in ("drain", "floor"):
        print("recheck bench: the floor is measured in drain mode (its rows are written blind, once)",
              file=sys.stderr)  # fmt: skip
        return 2
    if ALONE in strategies and args.mode not in WITH_PRODUCERS:
        print(f"recheck bench: {ALONE} (producers, no consumers) is for {' and '.join(WITH_PRODUCERS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.mode == "jobs-steady" and args.rate <= 0:
        print("recheck bench: jobs-steady needs a --rate above 0 (jobs-saturated runs them flat out)",
              file=sys.stderr)  # fmt: skip
        return 2
    sizes = []
    if args.mode in ("poll", "groups"):
        try:
            sizes = [positive_int(size.replace("_", "")) for size in args.sizes.split(",")]
        except (ValueError, argparse.ArgumentTypeError) as error:
            print(f"recheck bench: --sizes {args.sizes!r}: {error}", file=sys.stderr)
            return 2
    warmups = {"steady": 90.0, "jobs-steady": 10.0, "jobs-saturated": 3.0}
    warmup = args.warmup if args.warmup is not None else warmups.get(args.mode, 5.0)
    idle = args.mode == "idle"
    args.workers = args.workers or (2 if idle else 4)
    args.seconds = args.seconds or (30.0 if idle else 20.0)
    check = args.check or (STAMP_CHECK if args.mode in JOBS_MODES else "recheck.workers.demo:noop")
    config = BenchConfig(
        mode="drain" if args.mode == "floor" else args.mode, rows=args.rows, workers=args.workers,
        seconds=args.seconds, warmup=warmup, interval=args.interval, strategies=strategies,
        check=check, concurrency=args.concurrency, batch=args.batch, out=Path(args.out),
        consumers=max(args.consumers, 0), partitions=args.partitions, cluster_replicas=args.cluster_replicas,
        peer_job=args.peer_job, producers=args.producers if args.mode in WITH_PRODUCERS else 0,
        rate=args.rate if args.mode == "jobs-steady" else 0.0, tail=args.tail,
    )  # fmt: skip
    if ON_CLUSTER in strategies and not args.private:
        print(
            f"recheck bench: {ON_CLUSTER} starts a Redis Cluster of its own: add --private", file=sys.stderr
        )
        return 2
    if args.mysql_core is not None:
        if not args.private:
            print("recheck bench: --mysql-core places the private MariaDB: add --private", file=sys.stderr)
            return 2
        try:
            split_cores(os.sched_getaffinity(0), args.mysql_core)
        except ValueError as error:
            print(f"recheck bench: --mysql-core {args.mysql_core}: {error}", file=sys.stderr)
            return 2
    return launch(
        "bench",
        lambda settings: bench(
            settings.default_workload(),
            config,
            sizes,
            args.polls,
            args.private,
            args.mysql_core,
            args.rounds,
            args.workloads,
            args.jobs,
        ),
    )


def bench(
    settings: Workload,
    config: BenchConfig,
    sizes: list[int],
    polls: int,
    private: bool,
    mysql_core: int | None = None,
    rounds: int = 5,
    workloads: int = 10,
    jobs: int = 40,
) -> int:
    servers: list = []
    folder = Path(tempfile.mkdtemp(prefix="recheck-servers-")) if private else None
    restore = stop_on_sigterm()
    try:
        if folder is not None:
            settings = private_servers(settings, folder, servers, print, mysql_core)
            if ON_CLUSTER in config.strategies:
                from tests.support.servers import RedisCluster

                cluster = RedisCluster(folder / "redis-cluster", replicas=config.cluster_replicas)
                servers.append(cluster)
                cluster.start()
                config.cluster_url = cluster.url()
                print(f"private redis cluster: 3 masters, {config.cluster_replicas} replicas each, "
                      f"from :{cluster.nodes[0].port}")  # fmt: skip
        if config.mode == "poll":
            from bench.pollcost import run_poll_bench

            run_poll_bench(settings, sizes, polls, config.out)
        elif config.mode == "groups":
            from bench.rediscost.groupcost import run_group_bench

            run_group_bench(settings, sizes, config.rows, polls, config.batch, config.out)
        elif config.mode == "idle":
            from bench.idlecost.idle import run_idle_bench

            run_idle_bench(settings, workloads, config.workers, config.seconds, jobs, config.out)
        elif config.mode == "scripts":
            from bench.rediscost.scriptcost import run_script_bench

            run_script_bench(settings, config.rows, rounds, config.batch, config.out)
        else:
            run_bench(settings, config)
    finally:
        release = hold_interrupts_now()  # nothing interrupts the clean-up
        try:
            for server in servers:
                server.kill()
            if folder is not None:  # the private servers' data: over 1 GB a run, of no use afterwards
                shutil.rmtree(folder, ignore_errors=True)
        finally:
            release()
            restore()
    return 0


def _interrupt(signum: int, frame: object) -> None:
    """Raise KeyboardInterrupt in the main thread, and again every INTERRUPT_AGAIN seconds until the
    process ends: an exception raised while the interpreter runs a __del__ (a Redis client
    collected at that moment) is printed and dropped, and the benchmark went on to exit 0."""
    if not _interrupted.is_set():
        _interrupted.set()
        _again.append(threading.Thread(target=_interrupt_again, daemon=True))
        _again[-1].start()
    raise KeyboardInterrupt(f"signal {signum}")


INTERRUPT_AGAIN = 0.5
_interrupted = threading.Event()


def _interrupt_again() -> None:
    while not _cleaning.wait(INTERRUPT_AGAIN):
        # _interrupt again, in the main thread at its next instruction: as a simulated SIGTERM, not
        # SIGINT, which a process started in the background (`&`) ignores from the start, and a
        # simulated signal that is ignored does nothing.
        _thread.interrupt_main(signal.SIGTERM)


_cleaning = threading.Event()
_again: list[threading.Thread] = []  # the thread interrupting again, once started


def hold_interrupts() -> Callable[[], object]:
    """While a benchmark stops its servers and removes their data: Ctrl-C, SIGTERM and the
    repeated interrupts above are ignored (a pending one too: Python skips an ignored signal).
    Returns what puts the handlers back. Nothing to do outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    _cleaning.set()
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    for thread in _again:
        thread.join()
    _again.clear()

    def release() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _cleaning.clear()
        _interrupted.clear()

    return release


def hold_interrupts_now() -> Callable[[], object]:
    """hold_interrupts, even if an interrupt already on its way lands while it runs."""
    while True:
        try:
            return hold_interrupts()
        except KeyboardInterrupt:
            continue


def stop_on_sigterm() -> Callable[[], object]:
    """SIGTERM (`timeout`, `kill`, a CI job cancelled) stops a benchmark as Ctrl-C does, through
    its `finally`: its private servers stopped and their gigabyte of data removed, where the
    default action ended the process on the spot and left the data behind. Returns what puts the
    previous handler back; nothing to do outside the main thread (signals reach only that one)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, _interrupt)
    return lambda: signal.signal(signal.SIGTERM, previous)
