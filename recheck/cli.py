"""The `recheck` command. Exit codes: 0 ok, 1 failure, 2 bad configuration or usage, 3 not
fresh (`status`, and `run --duration` at its end: rows overdue or checks failing).

Each subcommand runs through shared.launch (settings, logging, errors as exit codes). The
roles' subcommands call the same serve() functions as `python -m dispatcher|workers`; the
benchmark tools (`bench`, `soak`) live in the bench package of a source checkout, imported only
when asked for, and are not part of the container image.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import sys

from shared.config import ConfigError, Settings, load_workloads, select_workloads
from shared.launch import launch, positive_float, positive_int
from shared.status import NOT_FRESH
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
    parser.add_argument("--version", action="version", version=f"recheck {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, variables: str, epilog: str | None = None):
        """A subcommand whose --help says what it does and which variables matter to it."""
        description = f"{summary[0].upper()}{summary[1:]}. Uses {variables}."
        return commands.add_parser(name, help=summary, description=description, epilog=epilog)

    table = "RECHECK_MYSQL_URL, RECHECK_TABLE and the RECHECK_*_COLUMN names"
    served = f"{table}, RECHECK_REDIS_URL"
    init = command(
        "init-db",
        "check a table and print what it needs, or create recheck's own table",
        f"{table}, RECHECK_INTERVAL, RECHECK_APP_USER and RECHECK_APP_PASSWORD",
    )
    init.add_argument(
        "--apply", action="store_true", help="apply the ALTER TABLE it needs (then spread due times)"
    )
    init.add_argument(
        "--create", action="store_true", help="create a missing database and table (the demo table: always)"
    )
    add_workload(init, "check or prepare only this workload's table (default: every workload's)")
    init.add_argument(
        "--adopt",
        type=column_list,
        default=(),
        metavar="COLUMN[,COLUMN]",
        help="let recheck write these existing columns (e.g. your own status column for results)",
    )

    seed = command("seed", "insert demo rows into recheck's own table", f"{table}, RECHECK_INTERVAL")
    seed.add_argument("--rows", type=positive_int, required=True, help="how many rows to insert")
    seed.add_argument("--due-now", action="store_true", help="make every row due now (default: spread)")
    seed.add_argument("--truncate", action="store_true", help="empty the table first")
    add_workload(seed, "the workload whose table gets the rows (needed when there are several)")

    spread = command(
        "spread",
        "spread every row's due time over one interval from now",
        f"{table}, RECHECK_INTERVAL",
        epilog="For rows that all got one due time: a new due column, a bulk import.",
    )
    add_workload(spread, "the workload whose table is spread (needed when there are several)")
    command("dispatcher", "run the dispatcher and its reconciler jobs", f"{served}, RECHECK_LEADER_TTL")
    worker = command("worker", "run one worker process", f"{served}, RECHECK_CHECK, RECHECK_WORKER_BATCH")
    add_worker_arguments(worker)

    run = command(
        "run",
        "run a dispatcher and N workers here, with a live status line",
        "what the dispatcher and the workers use",
        epilog=f"With --duration: exit {NOT_FRESH} if rows are overdue or checks failing at the end.",
    )
    run.add_argument("--workers", type=positive_int, default=2, help="worker processes (default 2)")
    run.add_argument("--duration", type=positive_float, help="stop gracefully after this many seconds")
    run.add_argument(
        "--concurrency", type=positive_int, help="rows checked at once per worker (per-row checks)"
    )

    for name, (_, summary) in TOOLS.items():
        commands.add_parser(name, help=f"{summary} (source checkout only; `recheck {name} --help`)")

    status = command(
        "status",
        "is every row fresh? rows, lateness, failures, queue, workers",
        f"{served}, RECHECK_FAILING_THRESHOLD",
        epilog=f"Exit code: 0 fresh, {NOT_FRESH} not fresh (rows overdue or checks failing), "
        "1 a server unreachable.",
    )
    status.add_argument("--json", action="store_true", help="machine-readable output")
    add_workload(status, "only this workload (default: every workload; --watch: the first)")
    status.add_argument(
        "--watch", action="store_true", help="a live view, refreshed every second (Ctrl-C ends)"
    )

    command(
        "health",
        "exit 0 if this container's recheck processes are alive and heartbeating",
        "RECHECK_HEALTH_FILE, RECHECK_REDIS_URL",
    )
    inspect = command(
        "inspect", "one row's story: due time, last check, result, errors, where it is now", served,
        epilog="Exit code: 0, or 1 if the table has no such row.",
    )  # fmt: skip
    inspect.add_argument("id", metavar="ID", help="the row's key as the id column holds it (binary: hex)")
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    add_workload(inspect, "the workload the row belongs to (needed when there are several)")

    config = command(
        "config",
        "print every workload's effective configuration with where each value came from, and check "
        "that its servers are reachable and its table ready",
        "every variable and the workloads file",
        epilog="Exit code: 0 ready, 1 a server or table problem (one line each), 2 bad configuration.",
    )
    config.add_argument("--json", action="store_true", help="machine-readable output")

    release = command("release", "put quarantined rows back into rotation (due now)", served)
    release.add_argument(
        "ids", nargs="+", metavar="ID", help="ids of quarantined rows (`recheck status` lists them)"
    )
    add_workload(release, "the workload the rows belong to (needed when there are several)")
    return parser


def version() -> str:
    try:
        return importlib.metadata.version("recheck")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def add_workload(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--workload", metavar="NAME", help=text)


def workloads_of(settings: Settings, args) -> list[Settings]:
    """The workloads a command applies to: the one --workload names, or all of them."""
    return select_workloads(load_workloads(settings), getattr(args, "workload", None))


def one_workload(settings: Settings, args) -> Settings:
    """The workload a command that writes rows applies to: --workload, or the only one."""
    chosen = workloads_of(settings, args)
    if len(chosen) > 1:
        names = ", ".join(w.workload for w in chosen)
        raise ConfigError(f"there are several workloads ({names}): say which with --workload NAME")
    return chosen[0]


def column_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("name at least one column")
    return names


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
    from recheck.initdb import create_app_user, init_db
    from recheck.seed import ProgressLine

    codes = []
    for workload in workloads_of(settings, args):
        progress = ProgressLine(sys.stderr, "spreading due times:")
        code = init_db(workload, args.apply, print, create=args.create, adopt=args.adopt, progress=progress)
        if code == 0 and workload.app_user:
            create_app_user(workload, print)
        codes.append(code)
    return max(codes)


def cmd_spread(settings: Settings, args) -> int:
    settings = one_workload(settings, args)
    from recheck.initdb import spread
    from recheck.seed import ProgressLine
    from shared.db import Database
    from shared.schema import require_table

    db = Database(settings)
    require_table(settings, db)
    rows = spread(settings, db, ProgressLine(sys.stderr, "spreading due times:"))
    print(f"spread the due times of {rows:,} rows of {settings.mysql.database}.{settings.table} "
          f"over {settings.interval:g} s")  # fmt: skip
    return 0


def cmd_seed(settings: Settings, args) -> int:
    settings = one_workload(settings, args)
    from recheck.initdb import is_recheck_table
    from recheck.seed import ProgressLine, seed
    from shared.db import Database
    from shared.schema import require_table

    db = Database(settings)
    require_table(settings, db)
    if not is_recheck_table(settings, db):
        print(
            f"recheck seed: {settings.mysql.database}.{settings.table} was not created by `recheck init-db` "
            "and has columns of its own: seed writes demo rows only into recheck's own table "
            "(point RECHECK_TABLE at one, or make one with `recheck init-db --create`)",
            file=sys.stderr,
        )
        return 1
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


def cmd_worker(settings: Settings, args) -> int:
    from workers.worker import overrides, serve

    return serve(settings, args.workloads, overrides(args))


def cmd_run(settings: Settings, args) -> int:
    from recheck.run import Runner
    from shared.db import Database
    from shared.schema import require_table

    workloads = load_workloads(settings)
    for workload in workloads:
        db = Database(workload)
        require_table(workload, db)
        db.close()
    worker_args = ["--concurrency", str(args.concurrency)] if args.concurrency else []
    return Runner(settings, args.workers, args.duration, workloads=workloads, worker_args=worker_args).run()


def cmd_status(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.status import gather, render

    workloads = workloads_of(settings, args)
    if args.watch:
        from recheck.watch import watch

        return watch(workloads)
    every = {w.workload: gather(w, Database(w), store_for(w)) for w in workloads}
    fresh = all(facts["fresh"] for facts in every.values())
    if args.json:  # one workload: its facts, as before workloads; several: each under its name
        shown = next(iter(every.values())) if len(every) == 1 else {"fresh": fresh, "workloads": every}
        print(json.dumps(shown, indent=2))
    else:
        named = len(every) > 1
        print("\n\n".join(render(facts, workload=name if named else None) for name, facts in every.items()))
    return 0 if fresh else NOT_FRESH


def cmd_release(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.schema import describe_table
    from shared.sql import Queries

    settings = one_workload(settings, args)
    db = Database(settings)
    keys = describe_table(settings, db).keys
    try:
        ids = [keys.from_text(text) for text in args.ids]
    except ValueError as error:
        print(f"recheck release: {error}", file=sys.stderr)
        return 2
    released = db.execute(Queries(settings).release, {"ids": tuple(ids)})
    store_for(settings).forget_reclaims([keys.encode(i) for i in ids])
    print(f"released {released} of {len(ids)} ids: due now (the others were not quarantined)")
    return 0


def cmd_inspect(settings: Settings, args) -> int:
    from shared.db import Database
    from shared.rowstory import render_story, row_story
    from shared.schema import describe_table

    settings = one_workload(settings, args)
    db = Database(settings)
    keys = describe_table(settings, db).keys
    try:
        key = keys.from_text(args.id)
    except ValueError as error:
        print(f"recheck inspect: {error}", file=sys.stderr)
        return 2
    story = row_story(settings, db, store_for(settings), keys, key)
    if story is None:
        print(f"recheck inspect: no row with id {args.id!r} in {settings.mysql.database}.{settings.table}",
              file=sys.stderr)  # fmt: skip
        return 1
    print(json.dumps(story, indent=2) if args.json else render_story(story))
    return 0


def cmd_config(settings: Settings, args) -> int:
    from recheck.configcheck import describe, problems, render

    workloads = load_workloads(settings)
    described, found = describe(settings, workloads), problems(workloads)
    if args.json:
        print(json.dumps({"workloads": described, "problems": found, "ready": not found}, indent=2))
    else:
        print(render(described, found))
    return 1 if found else 0


def cmd_health(settings: Settings, _args) -> int:
    from pathlib import Path

    from shared.health import check_all
    from shared.redisconn import connect_redis

    if not settings.health_file:
        print("recheck health: RECHECK_HEALTH_FILE is not set (the image sets it)", file=sys.stderr)
        return 2
    results = check_all(Path(settings.health_file), connect_redis(settings))
    for healthy, why in results:
        print(f"{'healthy' if healthy else 'unhealthy'}: {why}")
    return 0 if all(healthy for healthy, _ in results) else 1


def store_for(settings: Settings):
    from shared.partitioned import open_store
    from shared.redisconn import connect_redis

    return open_store(connect_redis(settings), settings)


# The subcommands run here; TOOLS above are the others.
COMMANDS = {
    "init-db": cmd_init_db,
    "seed": cmd_seed,
    "spread": cmd_spread,
    "dispatcher": cmd_dispatcher,
    "worker": cmd_worker,
    "run": cmd_run,
    "status": cmd_status,
    "release": cmd_release,
    "inspect": cmd_inspect,
    "config": cmd_config,
    "health": cmd_health,
}


if __name__ == "__main__":
    raise SystemExit(main())
