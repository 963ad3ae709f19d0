"""The `recheck` command. Exit codes: 0 ok, 1 failure, 2 bad configuration or usage."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from shared.config import Settings, load_settings

log = logging.getLogger("recheck")

MYSQL_HINTS = {
    1049: "; run `recheck init-db` to create it",
    1146: "; run `recheck init-db` to create it",
    1045: "; check the user and password in RECHECK_MYSQL_URL",
    1142: "; the MySQL user lacks a privilege recheck needs (see README, least-privilege user)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recheck",
        description="Keep every row of a MySQL table freshly checked. "
        "Configuration comes from RECHECK_* environment variables and .env (see README).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    init = commands.add_parser("init-db", help="create the database and table, or check an existing one")
    init.add_argument("--apply", action="store_true", help="apply the ALTER TABLE an existing table needs")

    seed = commands.add_parser("seed", help="insert demo rows, due times spread over one interval")
    seed.add_argument("--rows", type=positive_int, required=True, help="how many rows to insert")
    seed.add_argument("--due-now", action="store_true", help="make every row due now instead")
    seed.add_argument("--truncate", action="store_true", help="empty the table first")

    commands.add_parser("dispatcher", help="run the dispatcher (and its reconciler jobs)")

    worker = commands.add_parser("worker", help="run one worker process")
    worker.add_argument("--concurrency", type=positive_int, help="rows checked at once (per-row checks)")
    worker.add_argument("--batch", type=positive_int, help="ids taken from Redis at a time")

    run = commands.add_parser("run", help="run a dispatcher and N workers here, with a live status line")
    run.add_argument("--workers", type=positive_int, default=2, help="worker processes (default 2)")
    run.add_argument("--duration", type=positive_float, help="stop gracefully after this many seconds")
    run.add_argument(
        "--concurrency", type=positive_int, help="rows checked at once per worker (per-row checks)"
    )

    soak = commands.add_parser("soak", help="run like `run` for minutes and print memory as it goes")
    soak.add_argument("--minutes", type=positive_float, default=10.0, help="how long (default 10)")
    soak.add_argument("--workers", type=positive_int, default=2, help="worker processes (default 2)")
    soak.add_argument(
        "--every", type=positive_float, default=30.0, help="seconds between samples (default 30)"
    )

    bench = commands.add_parser("bench", help="measure recheck beside the MySQL queue-table strategies")
    bench.add_argument(
        "--mode", choices=("drain", "steady", "poll"), default="drain",
        help="drain: all rows overdue; steady: rows due over --interval; poll: dispatcher cost per poll",
    )  # fmt: skip
    bench.add_argument(
        "--sizes", default="1000000,10000000", help="poll: table sizes to measure at (comma-separated)"
    )
    bench.add_argument("--polls", type=positive_int, default=200, help="poll: polls measured per size")
    bench.add_argument("--rows", type=positive_int, default=1_000_000)
    bench.add_argument("--workers", type=positive_int, default=4, help="worker processes per strategy")
    bench.add_argument("--seconds", type=positive_float, default=20.0, help="measured time per strategy")
    bench.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="unmeasured start (default: 5 s drain; steady 90 s, enough for a freshly seeded table "
        "to settle and any start-up backlog to clear near full load)",
    )
    bench.add_argument(
        "--interval", type=positive_float, default=10.0, help="steady: seconds between checks of a row"
    )
    every = "recheck,for_update,skip_locked,update_limit,last_insert_id"
    bench.add_argument("--strategies", default=every, help=f"comma-separated, from {every}")
    bench.add_argument("--check", default="workers.demo:noop", help="the check every strategy runs")
    bench.add_argument("--concurrency", type=positive_int, default=50, help="per-row checks: rows at once")
    bench.add_argument("--batch", type=positive_int, default=500, help="ids a worker takes at a time")
    bench.add_argument("--out", default="bench-results", help="where JSON and PNG go")
    bench.add_argument(
        "--private",
        action="store_true",
        help="start tuned MariaDB and Redis of its own (see docs/performance.md)",
    )

    status = commands.add_parser("status", help="is every row fresh? rows, lateness, queue, workers")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument(
        "--watch", action="store_true", help="a live view, refreshed every second (Ctrl-C ends)"
    )

    commands.add_parser("health", help="exit 0 if this container's recheck process is alive and heartbeating")

    release = commands.add_parser("release", help="put quarantined rows back into rotation")
    release.add_argument("ids", nargs="+", type=non_negative_int, metavar="ID")
    return parser


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    overrides = {}
    for option, setting in (("concurrency", "concurrency"), ("batch", "worker_batch")):
        if getattr(args, option, None) is not None:
            overrides[setting] = getattr(args, option)
    settings = load_settings(**overrides)

    from shared.logs import setup_logging

    setup_logging(args.command, settings.log_level, settings.log_format)
    handler = COMMANDS[args.command]
    import pymysql

    from shared.config import redact_url
    from shared.db import DatabaseDown
    from shared.redisconn import REDIS_DOWN
    from shared.schema import SchemaProblem
    from workers.checks import CheckLoadError

    try:
        return handler(settings, args)
    except pymysql.err.MySQLError as error:
        code = error.args[0] if error.args else None
        log.error("mysql error %s%s", error, MYSQL_HINTS.get(code, ""))
        return 1
    except DatabaseDown as error:
        log.error("mysql at %s unreachable: %s", redact_url(settings.mysql_url), error)
        return 1
    except REDIS_DOWN as error:
        log.error("redis at %s unreachable: %s", redact_url(settings.redis_url), error)
        return 1
    except SchemaProblem as problem:
        log.error("%s", problem)
        return 1
    except CheckLoadError as error:
        log.error("RECHECK_CHECK=%s: %s", settings.check, error)
        return 2


def cmd_init_db(settings: Settings, args) -> int:
    from shared.schema import create_app_user, init_db

    code = init_db(settings, args.apply, print)
    if code == 0 and settings.app_user:
        create_app_user(settings, print)
    return code


def cmd_seed(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.schema import require_table
    from shared.seed import ProgressLine, seed

    db = Database(settings)
    require_table(settings, db)
    progress = ProgressLine(sys.stderr, "seeding")
    first, last = seed(
        settings, db, args.rows, due_now=args.due_now, truncate=args.truncate, progress=progress
    )
    spread = "all due now" if args.due_now else f"due times spread over {settings.interval:g} s"
    print(f"inserted ids {first:,}..{last:,} into {settings.mysql.database}.{settings.table} ({spread})")
    return 0


def cmd_dispatcher(settings: Settings, _args) -> int:
    from dispatcher.service import DispatcherService

    service = DispatcherService(settings)
    service.install_signal_handlers()
    service.run()
    return 0


def cmd_worker(settings: Settings, _args) -> int:
    from workers.worker import Worker

    worker = Worker(settings)
    worker.install_signal_handlers()
    worker.run()
    return 1 if worker.fatal else 0


def cmd_run(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.runner import Runner
    from shared.schema import require_table

    db = Database(settings)
    require_table(settings, db)
    db.close()
    return Runner(settings, args.workers, args.duration).run()


def cmd_soak(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.redisconn import connect_redis
    from shared.runner import Runner
    from shared.schema import require_table
    from shared.soak import MemoryWatch

    db = Database(settings)
    require_table(settings, db)
    db.close()
    watch = MemoryWatch(connect_redis(settings), args.every, sys.stdout)
    code = Runner(settings, args.workers, args.minutes * 60, on_tick=watch).run()
    print(watch.summary())
    return code


def cmd_bench(settings: Settings, args) -> int:
    import tempfile
    from pathlib import Path

    from shared.bench import ALL_STRATEGIES, BenchConfig, private_servers, run_bench

    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    unknown = [s for s in strategies if s not in ALL_STRATEGIES]
    if unknown or not strategies:
        print(
            f"recheck bench: unknown strategies {unknown}; choose from {', '.join(ALL_STRATEGIES)}",
            file=sys.stderr,
        )
        return 2
    if args.mode == "poll":
        try:
            sizes = [positive_int(size.replace("_", "")) for size in args.sizes.split(",")]
        except (ValueError, argparse.ArgumentTypeError) as error:
            print(f"recheck bench: --sizes {args.sizes!r}: {error}", file=sys.stderr)
            return 2
    warmup = args.warmup if args.warmup is not None else (5.0 if args.mode == "drain" else 90.0)
    config = BenchConfig(
        mode=args.mode, rows=args.rows, workers=args.workers, seconds=args.seconds, warmup=warmup,
        interval=args.interval, strategies=strategies, check=args.check, concurrency=args.concurrency,
        batch=args.batch, out=Path(args.out),
    )  # fmt: skip
    servers = ()
    if args.private:
        settings, servers = private_servers(
            settings, Path(tempfile.mkdtemp(prefix="recheck-servers-")), print
        )
    try:
        if args.mode == "poll":
            from shared.pollcost import run_poll_bench

            run_poll_bench(settings, sizes, args.polls, Path(args.out))
        else:
            run_bench(settings, config)
    finally:
        for server in servers:
            server.kill()
    return 0


def cmd_status(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.redisconn import connect_redis
    from shared.status import gather, render

    if args.watch:
        from shared.watch import watch

        return watch(settings)
    facts = gather(settings, Database(settings), connect_redis(settings))
    print(json.dumps(facts, indent=2) if args.json else render(facts))
    return 0


def cmd_release(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.keys import Keys
    from shared.redisconn import connect_redis
    from shared.sql import Queries

    released = Database(settings).execute(Queries(settings).release, {"ids": tuple(args.ids)})
    keys = Keys(settings.key_prefix)
    connect_redis(settings).hdel(keys.reclaims, *[str(i) for i in args.ids])
    print(f"released {released} of {len(args.ids)} ids: due now (the others were not quarantined)")
    return 0


def cmd_health(settings: Settings, _args) -> int:
    from pathlib import Path

    from shared.health import check_health
    from shared.redisconn import connect_redis

    if not settings.health_file:
        print("recheck health: RECHECK_HEALTH_FILE is not set (the image sets it)", file=sys.stderr)
        return 2
    healthy, why = check_health(Path(settings.health_file), connect_redis(settings))
    print(f"{'healthy' if healthy else 'unhealthy'}: {why}")
    return 0 if healthy else 1


COMMANDS = {
    "init-db": cmd_init_db,
    "seed": cmd_seed,
    "dispatcher": cmd_dispatcher,
    "worker": cmd_worker,
    "run": cmd_run,
    "soak": cmd_soak,
    "bench": cmd_bench,
    "status": cmd_status,
    "release": cmd_release,
    "health": cmd_health,
}


if __name__ == "__main__":
    raise SystemExit(main())
