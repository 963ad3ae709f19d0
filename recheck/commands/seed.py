"""`recheck seed` (demo rows, fast, due times spread evenly over one interval) and `recheck spread`
(every row's due time spread over one interval from now: after a bulk import)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from recheck.commands.base import TABLE, Command, ProgressLine, add_workload, one_workload
from recheck.commands.init_db import is_recheck_table, spread
from recheck.commands.launch import positive_int
from recheck.shared.config import Settings, Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.mysql.schema import require_table


def seed(
    workload: Workload,
    db: Database,
    rows: int,
    *,
    due_now: bool = False,
    truncate: bool = False,
    progress: Callable[[int, int], None] | None = None,
    start_in_s: float = 0.0,
) -> tuple[int, int]:
    """Insert `rows` rows after the current highest id. Returns (first id, last id).

    Due times start `start_in_s` seconds from now (negative: already overdue)."""
    table = Rows(workload, db)
    return table.seed(rows, due_now=due_now, truncate=truncate, start_in_s=start_in_s, progress=progress)


def run_seed(settings: Settings, args: argparse.Namespace) -> int:
    workload = one_workload(settings, args)
    where = f"{workload.mysql.database}.{workload.table}"
    db = Database(workload)
    require_table(workload, db)
    if not is_recheck_table(workload, db):
        print(
            f"recheck seed: {where} was not created by `recheck init-db` and has columns of its own: seed "
            "writes demo rows only into recheck's own table (point RECHECK_TABLE at one, or make one with "
            "`recheck init-db --create`)",
            file=sys.stderr,
        )
        return 1
    first, last = seed(
        workload,
        db,
        args.rows,
        due_now=args.due_now,
        truncate=args.truncate,
        progress=ProgressLine("seeding"),
    )
    spread_over = "all due now" if args.due_now else f"due times spread over {workload.interval:g} s"
    print(f"inserted ids {first:,}..{last:,} into {where} ({spread_over})")
    return 0


def run_spread(settings: Settings, args: argparse.Namespace) -> int:
    workload = one_workload(settings, args)
    db = Database(workload)
    require_table(workload, db)
    rows = spread(workload, db, ProgressLine("spreading due times:"))
    print(f"spread the due times of {rows:,} rows of {workload.mysql.database}.{workload.table} "
          f"over {workload.interval:g} s")  # fmt: skip
    return 0


def seed_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=positive_int, required=True, help="how many rows to insert")
    parser.add_argument("--due-now", action="store_true", help="make every row due now (default: spread)")
    parser.add_argument("--truncate", action="store_true", help="empty the table first")
    add_workload(parser, "the workload whose table gets the rows (needed when there are several)")


def spread_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload(parser, "the workload whose table is spread (needed when there are several)")


COMMANDS = [
    Command("seed", "insert demo rows into recheck's own table", f"{TABLE}, RECHECK_INTERVAL", run_seed,
            seed_arguments),
    Command("spread", "spread every row's due time over one interval from now", f"{TABLE}, RECHECK_INTERVAL",
            run_spread, spread_arguments,
            epilog="For rows that all got one due time: a new due column, a bulk import."),
]  # fmt: skip
