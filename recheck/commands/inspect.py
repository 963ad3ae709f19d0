"""`recheck inspect ID`: one row's story from MySQL and Redis together (shared/views/rowstory.py)."""

from __future__ import annotations

import argparse
import json
import sys

from recheck.commands.base import SERVED, Command, add_workload, one_workload, store_for
from recheck.shared.config import Settings
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.schema import describe_table
from recheck.shared.views.rowstory import render_story, row_story


def run(settings: Settings, args: argparse.Namespace) -> int:
    workload = one_workload(settings, args)
    db = Database(workload)
    keys = describe_table(workload, db).keys
    try:
        key = keys.from_text(args.id)
    except ValueError as error:
        print(f"recheck inspect: {error}", file=sys.stderr)
        return 2
    story = row_story(workload, db, store_for(workload), keys, key)
    if story is None:
        print(f"recheck inspect: no row with id {args.id!r} in {workload.mysql.database}.{workload.table}",
              file=sys.stderr)  # fmt: skip
        return 1
    print(json.dumps(story.as_json(), indent=2) if args.json else render_story(story))
    return 0


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="the row's key as the id column holds it (binary: hex)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_workload(parser, "the workload the row belongs to (needed when there are several)")


COMMANDS = [
    Command("inspect", "one row's story: due time, last check, result, errors, where it is now", SERVED, run,
            arguments, epilog="Exit code: 0, or 1 if the table has no such row."),
]  # fmt: skip
