"""Helpers for tests: the audit trail that checks the guarantees, seeding, small queries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pymysql
import redis

from recheck.commands.init_db import init_db
from recheck.commands.seed import seed
from recheck.dispatcher.dispatcher import Dispatcher, DuePusher
from recheck.dispatcher.lease import Lease
from recheck.shared.config import ENV_PREFIX, Workload
from recheck.shared.mysql.db import Database
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import Store, open_store
from tests.support.servers import wait_for

TEST_LEADER = "test-leader"
REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"  # the docs site's pages (mkdocs.yml); the README is only the front door


def docs_text(page: str) -> str:
    """The text of one page of the docs site, e.g. docs_text("security.md")."""
    return (DOCS / page).read_text()


def recheck(
    *args: str, settings=None, env: dict | None = None, timeout: float = 60, cwd: Path = REPO
) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    if settings is not None:
        environment.update(settings.env_overrides())
    environment["PYTHONPATH"] = str(REPO)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "recheck", *args],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def make_store(settings: Workload) -> Store:
    return open_store(connect_redis(settings.deployment), settings)


def take_lease(settings: Workload, owner: str = TEST_LEADER) -> Lease:
    lease = Lease(make_store(settings), owner, ttl_seconds=3600)
    assert lease.hold()
    return lease


def make_pusher(settings: Workload, owner: str = TEST_LEADER) -> DuePusher:
    """A pusher whose owner holds the leader lease, as the leading dispatcher's does."""
    take_lease(settings, owner)
    pusher = DuePusher(settings, Database(settings), make_store(settings), owner)
    pusher.learn_keys()  # as a dispatcher does at start (the id column's type, from the table)
    return pusher


def make_dispatcher(settings: Workload, owner: str = TEST_LEADER) -> Dispatcher:
    return Dispatcher(settings, make_pusher(settings, owner))


def dispatch_all(settings: Workload) -> int:
    """Dispatch every due row now; returns how many ids were pushed."""
    dispatcher = make_dispatcher(settings)
    while dispatcher.poll() == 0:
        pass
    return dispatcher.dispatched


def run_sql(settings: Workload, *statements: str) -> None:
    """Statements on the workload's database (the application's own changes to its table)."""
    db = Database(settings)
    try:
        for statement in statements:
            db.execute(statement)
    finally:
        db.close()


def seed_rows(settings: Workload, rows: int, *, due_now: bool = False) -> None:
    db = Database(settings)
    try:
        seed(settings, db, rows, due_now=due_now)
    finally:
        db.close()


def query(conn: pymysql.connections.Connection, sql: str, args=None) -> tuple:
    with conn.cursor() as cursor:
        cursor.execute(sql, args)
        return cursor.fetchall()


def scalar(conn: pymysql.connections.Connection, sql: str, args=None):
    rows = query(conn, sql, args)
    return rows[0][0] if rows else None


def install_audit(conn: pymysql.connections.Connection, settings: Workload, audit: str = "audit") -> None:
    """Record every UPDATE of the table: the due time it had, the new one, and when.

    The key is kept as text (the audit of a table with text or binary keys too)."""
    t, due, count = settings.table, settings.due_column, settings.count_column
    with conn.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {audit} (row_id VARBINARY(1020), old_due DATETIME(3), new_due DATETIME(3), "
            "old_count INT UNSIGNED, new_count INT UNSIGNED, written_at DATETIME(3), KEY (row_id, old_due))"
        )
        cursor.execute(
            f"CREATE TRIGGER {audit}_update AFTER UPDATE ON `{t}` FOR EACH ROW "
            f"INSERT INTO {audit} VALUES (OLD.`{settings.id_column}`, OLD.`{due}`, NEW.`{due}`, "
            f"OLD.`{count}`, NEW.`{count}`, NOW(3))"
        )


def audit_violations(conn: pymysql.connections.Connection, audit: str = "audit") -> dict[str, int]:
    """Writes that break the guarantees, counted from the audit table.

    premature: a result written for a due time that had not come yet, i.e. a stale worker
      overwrote a newer cycle (what fencing prevents);
    double: one (row, due time) written as checked more than once.
    """
    with conn.cursor() as cursor:
        checked = f"FROM {audit} WHERE new_count = old_count + 1"
        cursor.execute(f"SELECT COUNT(*) {checked} AND written_at < old_due")
        premature = cursor.fetchone()[0]
        cursor.execute(
            f"SELECT COUNT(*) FROM (SELECT row_id FROM {audit} WHERE new_count = old_count + 1 "
            "GROUP BY row_id, old_due HAVING COUNT(*) > 1) AS d"
        )
        double = cursor.fetchone()[0]
        cursor.execute(f"SELECT COUNT(*) FROM {audit} WHERE new_count = old_count + 1")
        writes = cursor.fetchone()[0]
    return {"premature": premature, "double": double, "writes": writes}


def run_in_thread(service) -> threading.Thread:
    """A service's whole run() (startup, loop, shutdown) in a daemon thread, as a process would."""
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    return thread


def workload(settings: Workload, name: str, **values) -> Workload:
    """Another workload of the same deployment, as the workloads file would make it (a deployment
    setting among `values` changes the deployment too)."""
    return settings.evolve(name=name, **values)


def prepare(settings, create: str, *rows_sql: str):
    """Create an application's table, let init-db add recheck's columns, insert rows due now."""
    db = Database(settings)
    db.execute(create)
    assert init_db(settings, apply=True, say=lambda _: None) == 0
    for statement in rows_sql:
        db.execute(statement)
    db.execute(f"UPDATE `{settings.table}` SET `{settings.due_column}` = NOW(3) - INTERVAL 1 SECOND")
    db.close()


def drain(worker, settings, rounds: int = 20) -> None:
    """Dispatch every due row of `settings`' workload and let the worker's lane for it take them."""
    dispatch_all(settings)
    lane = worker.lane(settings.name)
    for _ in range(rounds):
        if not lane.store.queue_depth():
            return
        lane.poll()


def next_in(sql, table: str, key: str) -> dict:
    """Seconds from each row's last check to its next due time."""
    gap = "TIMESTAMPDIFF(MICROSECOND, checked_at, next_check_at) / 1e6"
    rows = query(sql, f"SELECT `{key}`, {gap} FROM `{table}` WHERE checked_at IS NOT NULL")
    return {row[0]: float(row[1]) for row in rows}


def only_workload(status_json: str) -> dict:
    """`recheck status --json` of a deployment with one workload: that workload's facts."""
    shown = json.loads(status_json)
    assert len(shown["workloads"]) == 1, list(shown["workloads"])
    (facts,) = shown["workloads"].values()
    assert shown["fresh"] == facts["fresh"]
    return facts


def fresh_status(settings: Workload, env: dict, timeout: float = 15) -> dict:
    """`recheck status --json` once it says the deployment is fresh, polled for up to `timeout` s.

    "Fresh" is an instant's verdict (no row more than 1 s past due and not in a worker's hand). A
    deployment that keeps up says it in nearly every sample, but one sample on a busy CI runner
    can catch a row a moment past the second; one that does not keep up never says it."""
    last: dict = {}

    def fresh() -> bool:
        nonlocal last
        last = json.loads(recheck("status", "--json", settings=settings, env=env).stdout)
        return bool(last["fresh"])

    try:
        wait_for(fresh, timeout, "`recheck status` to say fresh", interval=0.2)
    except TimeoutError as error:
        shown = last.get("workloads", {})  # (none if status never printed its JSON: the error says why)
        waiting = {name: (w["overdue_1s"], w["overdue_waiting"]) for name, w in shown.items()}
        raise AssertionError(f"{error}; (overdue 1 s, waiting) per workload: {waiting}; {last}") from None
    return last


def best_rate(count: Callable[[], int], seconds: float, enough: float, windows: int = 3) -> float:
    """The most `count()` grew per second over up to `windows` windows of `seconds`, one after
    another, stopping at the first that reaches `enough`. For a bound a defect keeps every window
    under (a retry's wait, a slot freed late, a dry workload's turns): a neighbour on a shared
    runner slows a window, not all of them."""
    best = 0.0
    for _ in range(windows):
        begin, done = time.monotonic(), count()
        time.sleep(seconds)  # a sampling period, not a wait for a condition
        best = max(best, (count() - done) / (time.monotonic() - begin))
        if best >= enough:
            break
    return best


def counted_rate(counter, seconds: float, enough: float = 0.0, windows: int = 1) -> float:
    """Checks per second that tests.support.checks:counted_row counted (test:done) over
    `seconds`, after the first 50 (workers started); with `windows` > 1, best_rate's best window."""
    wait_for(lambda: int(counter.get("test:done") or 0) >= 50, 20, "the first checks")
    return best_rate(lambda: int(counter.get("test:done")), seconds, enough, windows)


def round_trips(monkeypatch) -> Callable[[], dict[str, int]]:
    """Round trips every connection of this process sends from now on, as {"mysql": n, "redis":
    n} (a statement; a command or a whole pipeline), to read as often as wanted."""
    sent = {"mysql": 0, "redis": 0}
    for kind, owner, name in (
        ("mysql", pymysql.connections.Connection, "query"),
        ("redis", redis.connection.AbstractConnection, "send_packed_command"),
    ):
        real = getattr(owner, name)

        def counted(*args, kind=kind, real=real, **kwargs):
            sent[kind] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)
    return lambda: dict(sent)
