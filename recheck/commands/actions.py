"""`recheck now`, `pause`, `resume`, `release` and `retry ID...`: what the application's Client
does (recheck/client.py), putting quarantined rows back and dead one-shot rows in line again,
from the command line."""

from __future__ import annotations

import argparse
import sys

from recheck.client import Client
from recheck.commands.base import SERVED, Command, ProgressLine, add_workload, one_workload
from recheck.shared.config import Settings
from recheck.shared.views.status import shown_key


def act(settings: Settings, args: argparse.Namespace) -> int:
    """now, pause, resume or release: exit 0, or 1 naming the ids the table does not have."""
    if getattr(args, "all_dead", False) or args.command == "discard":
        return act_on_dead(settings, args)
    if not args.ids:
        print(f"recheck {args.command}: name the ids, or --all-dead", file=sys.stderr)
        return 2
    client = Client(settings=one_workload(settings, args))
    try:
        acted = getattr(client, args.command)(args.ids)
    except ValueError as error:  # an id the key column cannot hold
        print(f"recheck {args.command}: {error}", file=sys.stderr)
        return 2
    finally:
        client.close()
    shown = ", ".join(str(shown_key(key)) for key in acted.done) or "none"
    print(f"{DONE[args.command]}: {shown}")
    if acted.skipped:
        skipped = ", ".join(str(shown_key(key)) for key in acted.skipped)
        print(f"left alone ({LEFT_ALONE[args.command]}): {skipped}")
    if acted.missing:
        print(f"recheck {args.command}: no such row: {', '.join(str(shown_key(k)) for k in acted.missing)}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def act_on_dead(settings: Settings, args: argparse.Namespace) -> int:
    """`retry --all-dead` and `discard --all-dead`, with their filters: exit 0 with the count."""
    if args.ids or not args.all_dead:
        why = (
            "ids or --all-dead, not both"
            if args.command == "retry"
            else "it takes --all-dead (and filters), no ids"
        )
        print(f"recheck {args.command}: {why}", file=sys.stderr)
        return 2
    client = Client(settings=one_workload(settings, args))
    line = ProgressLine(f"{args.command}:")
    try:
        bulk = client.actions.retry_dead if args.command == "retry" else client.actions.discard_dead
        count = bulk(args.error, args.older_than, progress=lambda n: line.count(n))
    finally:
        client.close()
    what = "back in line, due now" if args.command == "retry" else "taken as done (kept, never run)"
    print(f"{count:,} dead rows {what}")
    return 0


DONE = {"now": "due now", "pause": "paused", "resume": "resumed, due now", "release": "released, due now",
        "retry": "back in line, due now", "cancel": "cancelled"}  # fmt: skip
LEFT_ALONE = {"now": "paused, quarantined or dead", "pause": "quarantined, dead or done",
              "resume": "not paused", "release": "not quarantined", "retry": "not dead",
              "cancel": "quarantined, dead or done"}  # fmt: skip


def ids_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="+", metavar="ID", help="ids as the key column holds them (binary: hex)")
    add_workload(parser, "the workload the rows belong to (needed when there are several)")


def dead_arguments(parser: argparse.ArgumentParser) -> None:
    """retry's and discard's: ids, or every dead row (filtered)."""
    parser.add_argument("ids", nargs="*", metavar="ID", help="ids as the key column holds them (binary: hex)")
    parser.add_argument("--all-dead", action="store_true", help="every dead row (with the filters below)")
    parser.add_argument(
        "--error", metavar="TEXT", help="--all-dead: only rows whose last error contains TEXT"
    )
    parser.add_argument("--older-than", type=float, metavar="S",
                        help="--all-dead: only rows last attempted more than S seconds ago")  # fmt: skip
    add_workload(parser, "the workload the rows belong to (needed when there are several)")


COMMANDS = [
    Command("now", "check these rows now, even if due later (one in flight: again right after)", SERVED, act,
            ids_arguments, epilog="Exit code: 0, or 1 naming ids the table does not have."),
    Command("pause", "stop checking these rows until resumed (kept in MySQL: survives any restart)", SERVED,
            act, ids_arguments, epilog="Exit code: 0, or 1 naming ids the table does not have."),
    Command("cancel", "stop these rows: never started if queued, a running per-row check cancelled; then "
            "paused, done or deleted (on_cancel)", SERVED, act, ids_arguments,
            epilog="Exit code: 0, or 1 naming ids the table does not have."),
    Command("resume", "check paused rows again, starting now", SERVED, act, ids_arguments,
            epilog="Exit code: 0, or 1 naming ids the table does not have."),
    Command("release", "put quarantined rows back into rotation (due now)", SERVED, act, ids_arguments,
            epilog="Exit code: 0, or 1 naming ids the table does not have."),
    Command("retry", "run dead one-shot rows again (due now, max_attempts more): ids, or --all-dead", SERVED,
            act, dead_arguments, epilog="Exit code: 0, or 1 naming ids the table does not have."),
    Command("discard", "take dead one-shot rows as done (kept, never run again): --all-dead", SERVED, act,
            dead_arguments, epilog="Exit code: 0 with the count."),
]  # fmt: skip
