"""`recheck dispatcher` and `recheck worker`: the two roles, exactly as `python -m
recheck.dispatcher` and `python -m recheck.workers` run them (what compose runs)."""

from __future__ import annotations

import argparse

from recheck.commands.base import SERVED, Command
from recheck.shared.config import Settings


def run_dispatcher(settings: Settings, _args: argparse.Namespace) -> int:
    from recheck.dispatcher.service import serve

    return serve(settings)


def run_worker(settings: Settings, args: argparse.Namespace) -> int:
    from recheck.workers.worker import overrides, serve

    return serve(settings, args.workloads, overrides(args))


def worker_arguments(parser: argparse.ArgumentParser) -> None:
    from recheck.workers.worker import add_arguments

    add_arguments(parser)


COMMANDS = [
    Command("dispatcher", "run the dispatcher and its reconciler jobs", f"{SERVED}, RECHECK_LEADER_TTL",
            run_dispatcher),
    Command("worker", "run one worker process", f"{SERVED}, RECHECK_CHECK, RECHECK_WORKER_BATCH", run_worker,
            worker_arguments),
]  # fmt: skip
