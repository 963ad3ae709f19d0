"""`recheck status`: is every row fresh, and if not, why? (`--watch`: the dashboard's facts in
the terminal, refreshed every second; `--json` for scripts.)"""

from __future__ import annotations

import argparse
import json
import signal
import threading

from rich.console import Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from recheck.commands.base import SERVED, Command, add_workload, workloads_of
from recheck.shared.config import Settings, Workload
from recheck.shared.core.records import StatusFacts
from recheck.shared.mysql.db import Database, DatabaseDown
from recheck.shared.redis.connection import REDIS_DOWN, connect_redis
from recheck.shared.redis.store import open_store
from recheck.shared.views.status import (
    DEAD_ROWS,
    NOT_FRESH,
    Sampler,
    exit_code,
    gather,
    headline,
    render,
    rhythm,
    verdict,
)
from recheck.shared.workloads import deployment_of


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def number(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def view(facts: StatusFacts, workload: str | None = None) -> Group:
    fresh = facts.fresh
    named = f"{workload} · " if workload else ""
    head = Panel(
        Text(f"{headline(facts)}\n", style="bold") + Text(verdict(facts)),
        title=f"recheck · {named}{facts.table} {rhythm(facts)}",
        border_style="green" if fresh else "red",
    )
    figures = Table.grid(padding=(0, 3))
    for _ in range(4):
        figures.add_column(justify="right")
        figures.add_column()
    figures.add_row(
        number(facts.checks_per_second), "checks/s",
        seconds(facts.lateness_p99_s), "lateness p99",
        seconds(facts.oldest_waiting_s), "oldest waiting",
        number(facts.overdue_interval), "overdue > own interval",
    )  # fmt: skip
    figures.add_row(
        number(facts.queue_depth), "queue depth",
        number(facts.in_flight), "in flight",
        f"{facts.live_workers}", "live workers",
        number(facts.overdue_in_flight), "past due, being checked",
    )  # fmt: skip
    figures.add_row(
        number(facts.failing_rows), "failing rows",
        number(facts.recent_checks), "checks last min",
        number(facts.recent_failed), "failed last min",
        number(facts.quarantined), "quarantined",
    )  # fmt: skip
    figures.add_row("", "", "", "", "", "", number(facts.paused), "paused")
    workers = Table("worker", "checks/s", "checked", "failed", "stale", box=None, header_style="dim")
    for worker in facts.workers:
        workers.add_row(
            worker.id,
            number(worker.rate),
            number(worker.checked),
            number(worker.failed),
            number(worker.stale),
        )
    parts: list[RenderableType] = [head, figures, Text(""), workers]
    problems = [f"quarantined {q['id']}: {q['reason']}" for q in facts.quarantined_ids[:5]]
    problems += [f"{g.count:,}x in the last hour: {g.error} (e.g. {', '.join(g.examples[:3])})"
                 for g in facts.errors[:5]]  # fmt: skip
    if problems:
        parts += [Text(""), Text("\n".join(problems), style="yellow")]
    return Group(*parts)


def watch(workloads: list[Workload], every: float = 1.0) -> int:
    """Every workload's view, one under the other, refreshed every second until Ctrl-C."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    client = connect_redis(deployment_of(workloads))
    samplers = [(w.name, Sampler(w, Database(w), open_store(client, w))) for w in workloads]
    named = len(samplers) > 1
    with Live(Text("sampling…"), refresh_per_second=4, transient=False) as live:
        while not stop.is_set():
            views: list[RenderableType] = []
            for name, sampler in samplers:
                try:
                    views.append(view(sampler.sample(), name if named else None))
                except (DatabaseDown, *REDIS_DOWN) as error:
                    views.append(Panel(Text(f"unreachable: {error}; retrying"), border_style="red"))
            live.update(Group(*views))
            stop.wait(every)
    return 0


def run(settings: Settings, args: argparse.Namespace) -> int:
    workloads = workloads_of(settings, args)
    if args.watch:
        return watch(workloads)
    client = connect_redis(deployment_of(workloads))
    every = {w.name: gather(w, Database(w), open_store(client, w)) for w in workloads}
    fresh = all(facts.fresh for facts in every.values())
    # Rows overdue anywhere is the more urgent answer; then dead rows anywhere.
    code = NOT_FRESH if not fresh else max((exit_code(facts) for facts in every.values()), default=0)
    if args.json:  # one shape whatever the number of workloads: each under its name
        shown = {name: facts.as_json() for name, facts in every.items()}
        dead = sum(facts.dead for facts in every.values())
        print(json.dumps({"fresh": fresh, "dead": dead, "workloads": shown}, indent=2))
    else:
        named = len(every) > 1
        print("\n\n".join(render(facts, workload=name if named else None) for name, facts in every.items()))
    return code


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_workload(parser, "only this workload (default: every workload; --watch: the first)")
    parser.add_argument(
        "--watch", action="store_true", help="a live view, refreshed every second (Ctrl-C ends)"
    )


COMMANDS = [
    Command(
        "status",
        "is every row fresh? rows, lateness, failures, queue, workers",
        f"{SERVED}, RECHECK_FAILING_THRESHOLD",
        run,
        arguments,
        epilog=f"Exit code: 0 fresh, {NOT_FRESH} not fresh (rows overdue or checks failing), "
        f"{DEAD_ROWS} fresh but a one-shot workload has dead rows (retry or delete them), "
        "1 a server unreachable.",
    )
]
