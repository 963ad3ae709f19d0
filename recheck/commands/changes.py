"""`recheck changes [--follow] [--json] [--since POS]`: the change feed of a workload with
`changes = true`: every transition of a row's stored result, oldest first."""

from __future__ import annotations

import argparse
import json
import signal

from recheck.client import Change, Client
from recheck.commands.base import SERVED, Command, add_workload, one_workload
from recheck.shared.config import Settings


def line(change: Change) -> str:
    def shown(value: str | None, failing: bool) -> str:
        return f"{value!r} (failing)" if failing else repr(value)

    text = f"{change.pos:>8}  {change.at:%Y-%m-%d %H:%M:%S.%f}"[:-3]
    text += (
        f"  {change.id}: {shown(change.old, change.old_failing)} -> {shown(change.new, change.new_failing)}"
    )
    return text + (f"  {change.error}" if change.error else "")


def run(settings: Settings, args: argparse.Namespace) -> int:
    client = Client(settings=one_workload(settings, args))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        for change in client.changes(args.since, follow=args.follow):
            print(json.dumps(change.as_json()) if args.json else line(change), flush=True)
    except KeyboardInterrupt:  # Ctrl-C ends a --follow
        pass
    finally:
        client.close()
    return 0


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--follow", action="store_true", help="keep printing changes as they come (Ctrl-C ends)"
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per line (id, old, new, at, pos, ...)"
    )
    parser.add_argument("--since", type=int, default=0, metavar="POS",
                        help="start after this position (default: the oldest kept)")  # fmt: skip
    add_workload(parser, "the workload whose changes to show (needed when there are several)")


COMMANDS = [
    Command("changes", "the change feed: every transition of a row's stored result, oldest first", SERVED,
            run, arguments, epilog="The workload needs changes = true (and `recheck init-db --apply`)."),
]  # fmt: skip
