"""The `recheck` command. Exit codes: 0 ok, 1 failure, 2 bad configuration or usage.

Each subcommand runs through shared.launch (settings, logging, errors as exit codes). The
roles' subcommands call the same serve() functions as `python -m dispatcher|workers`; the
benchmark tools (`bench`, `soak`) live in the bench package of a source checkout, imported only
when asked for, and are not part of the container image.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from shared.config import Settings
from shared.launch import launch, non_negative_int, positive_float, positive_int
from workers.worker import add_arguments as add_worker_arguments

# Commands of the source checkout only: name -> module whose main(argv) runs it.
TOOLS = {
    "bench": ("bench.compare", "measure recheck beside the MySQL queue-table strategies"),
    "soak": ("bench.soak", "run like `run` for minutes and print memory as it goes"),
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

    add_worker_arguments(commands.add_parser("worker", help="run one worker process"))

    run = commands.add_parser("run", help="run a dispatcher and N workers here, with a live status line")
    run.add_argument("--workers", type=positive_int, default=2, help="worker processes (default 2)")
    run.add_argument("--duration", type=positive_float, help="stop gracefully after this many seconds")
    run.add_argument(
        "--concurrency", type=positive_int, help="rows checked at once per worker (per-row checks)"
    )

    for name, (_, summary) in TOOLS.items():
        commands.add_parser(name, help=f"{summary} (source checkout only; `recheck {name} --help`)")

    status = commands.add_parser("status", help="is every row fresh? rows, lateness, queue, workers")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument(
        "--watch", action="store_true", help="a live view, refreshed every second (Ctrl-C ends)"
    )

    commands.add_parser("health", help="exit 0 if this container's recheck process is alive and heartbeating")

    release = commands.add_parser("release", help="put quarantined rows back into rotation")
    release.add_argument("ids", nargs="+", type=non_negative_int, metavar="ID")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in TOOLS:
        return run_tool(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    overrides = {}
    for option, setting in (("concurrency", "concurrency"), ("batch", "worker_batch")):
        if getattr(args, option, None) is not None:
            overrides[setting] = getattr(args, option)
    return launch(args.command, lambda settings: COMMANDS[args.command](settings, args), overrides)


def run_tool(name: str, argv: list[str]) -> int:
    module_name = TOOLS[name][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if not (error.name or "").startswith("bench"):
            raise
        print(
            f"recheck {name}: not installed here (a source checkout's tool, not in the image)",
            file=sys.stderr,
        )
        return 2
    return module.main(argv)


def cmd_init_db(settings: Settings, args) -> int:
    from shared.schema import create_app_user, init_db

    code = init_db(settings, args.apply, print)
    if code == 0 and settings.app_user:
        create_app_user(settings, print)
    return code


def cmd_seed(settings: Settings, args) -> int:
    from recheck.seed import ProgressLine, seed
    from shared.db import Database
    from shared.schema import require_table

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
    from dispatcher.service import serve

    return serve(settings)


def cmd_worker(settings: Settings, _args) -> int:
    from workers.worker import serve

    return serve(settings)


def cmd_run(settings: Settings, args) -> int:
    from recheck.run import Runner
    from shared.db import Database
    from shared.schema import require_table

    db = Database(settings)
    require_table(settings, db)
    db.close()
    return Runner(settings, args.workers, args.duration).run()


def cmd_status(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.status import gather, render

    if args.watch:
        from recheck.watch import watch

        return watch(settings)
    facts = gather(settings, Database(settings), store_for(settings))
    print(json.dumps(facts, indent=2) if args.json else render(facts))
    return 0


def cmd_release(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.sql import Queries

    released = Database(settings).execute(Queries(settings).release, {"ids": tuple(args.ids)})
    store_for(settings).forget_reclaims(args.ids)
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


def store_for(settings: Settings):
    from shared.keys import Keys
    from shared.redisconn import connect_redis
    from shared.store import Store

    return Store(connect_redis(settings), Keys(settings.key_prefix))


# The subcommands run here; TOOLS above are the others.
COMMANDS = {
    "init-db": cmd_init_db,
    "seed": cmd_seed,
    "dispatcher": cmd_dispatcher,
    "worker": cmd_worker,
    "run": cmd_run,
    "status": cmd_status,
    "release": cmd_release,
    "health": cmd_health,
}


if __name__ == "__main__":
    raise SystemExit(main())
