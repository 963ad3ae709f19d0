"""What every `recheck` subcommand is made of: its name and help, its arguments, and the function
that runs it with the environment's settings (recheck/cli.py builds the parser from these).

Exit codes: 0 ok, 1 failure (a server unreachable, a table that needs `init-db`), 2 bad
configuration or usage, 3 not fresh (`status`, `run --duration`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from recheck.shared.config import ConfigError, Settings, Workload
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import Store, open_store
from recheck.shared.workloads import read_workloads, select_workloads

TABLE = "RECHECK_MYSQL_URL, RECHECK_TABLE and the RECHECK_*_COLUMN names"
SERVED = f"{TABLE}, RECHECK_REDIS_URL"


@dataclass(frozen=True)
class Command:
    name: str
    summary: str  # one line, lower case: the `recheck --help` list and the start of `--help`
    uses: str  # the variables that matter to it
    run: Callable[[Settings, argparse.Namespace], int]
    arguments: Callable[[argparse.ArgumentParser], None] = field(default=lambda parser: None)
    epilog: str | None = None


def add_workload(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--workload", metavar="NAME", help=text)


def workloads_of(settings: Settings, args: argparse.Namespace) -> list[Workload]:
    """The workloads a command applies to: the one --workload names, or all of them."""
    return select_workloads(read_workloads(settings), getattr(args, "workload", None))


def one_workload(settings: Settings, args: argparse.Namespace) -> Workload:
    """The workload a command that writes rows applies to: --workload, or the only one."""
    chosen = workloads_of(settings, args)
    if len(chosen) > 1:
        names = ", ".join(w.name for w in chosen)
        raise ConfigError(f"there are several workloads ({names}): say which with --workload NAME")
    return chosen[0]


def store_for(workload: Workload) -> Store:
    return open_store(connect_redis(workload.deployment), workload)


def column_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("name at least one column")
    return names


class ProgressLine:
    """`seeding 450,000/1,000,000 rows (45%), 210,000 rows/s` on one updating line."""

    def __init__(self, label: str, stream=sys.stderr):
        self.stream = stream
        self.label = label
        self.started = time.monotonic()
        self.interactive = stream.isatty()
        self.last_decile = -1

    def count(self, done: int) -> None:
        """`retry: 3,000 rows, 2,100 rows/s` for a walk whose total is not known in advance."""
        elapsed = max(time.monotonic() - self.started, 1e-6)
        line = f"{self.label} {done:,} rows, {done / elapsed:,.0f} rows/s"
        if self.interactive:
            self.stream.write("\r" + line)
        elif done // 10_000 != self.last_decile:  # a line per 10,000 rows in a log
            self.last_decile = done // 10_000
            self.stream.write(line + "\n")
        self.stream.flush()

    def __call__(self, done: int, total: int) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        line = f"{self.label} {done:,}/{total:,} rows ({100 * done // total}%), {done / elapsed:,.0f} rows/s"
        if self.interactive:
            self.stream.write("\r" + line + ("\n" if done == total else ""))
        elif done * 10 // total != self.last_decile:
            self.last_decile = done * 10 // total
            self.stream.write(line + "\n")
        self.stream.flush()
