"""`recheck dispatcher` and `recheck worker`: the two roles, exactly as `python -m
recheck.dispatcher` and `python -m recheck.workers` run them (what compose runs)."""

from __future__ import annotations

import argparse

from recheck.commands.base import SERVED, Command
from recheck.commands.launch import positive_int
from recheck.shared.config import Settings


def run_dispatcher(settings: Settings, _args: argparse.Namespace) -> int:
    from recheck.dispatcher.service import serve

    return serve(settings)


def run_worker(settings: Settings, args: argparse.Namespace) -> int:
    from recheck.workers.worker import serve

    return serve(settings, args.workloads, overrides(args))


def worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--concurrency", type=positive_int, help="rows checked at once (per-row checks)")
    parser.add_argument("--batch", type=positive_int, help="ids taken from Redis at a time")
    parser.add_argument(
        "--workloads", metavar="NAME[,NAME]", help="serve only these workloads (default: every one)"
    )


def overrides(args: argparse.Namespace) -> dict:
    """The command-line options as settings (they win over RECHECK_CONCURRENCY/_WORKER_BATCH and
    the workloads file, for every workload this worker serves)."""
    chosen = {"concurrency": args.concurrency, "worker_batch": args.batch}
    return {name: value for name, value in chosen.items() if value is not None}


COMMANDS = [
    Command("dispatcher", "run the dispatcher and its reconciler jobs", f"{SERVED}, RECHECK_LEADER_TTL",
            run_dispatcher),
    Command("worker", "run one worker process", f"{SERVED}, RECHECK_CHECK, RECHECK_WORKER_BATCH", run_worker,
            worker_arguments),
]  # fmt: skip
