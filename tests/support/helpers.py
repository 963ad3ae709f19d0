"""Helpers for tests: the audit trail that checks the guarantees, seeding, small queries."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pymysql

from dispatcher.dispatcher import Dispatcher, DuePusher
from dispatcher.lease import Lease
from recheck.seed import seed
from shared.config import ENV_PREFIX, Settings
from shared.db import Database
from shared.partitioned import PartitionedStore, open_store
from shared.redisconn import connect_redis
from shared.store import Store

TEST_LEADER = "test-leader"
REPO = Path(__file__).resolve().parents[2]


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


def make_store(settings: Settings) -> Store | PartitionedStore:
    return open_store(connect_redis(settings), settings)


def take_lease(settings: Settings, owner: str = TEST_LEADER) -> Lease:
    lease = Lease(make_store(settings), owner, ttl_seconds=3600)
    assert lease.hold()
    return lease


def make_pusher(settings: Settings, owner: str = TEST_LEADER) -> DuePusher:
    """A pusher whose owner holds the leader lease, as the leading dispatcher's does."""
    take_lease(settings, owner)
    pusher = DuePusher(settings, Database(settings), make_store(settings), owner)
    pusher.learn_keys()  # as a dispatcher does at start (the id column's type, from the table)
    return pusher


def make_dispatcher(settings: Settings, owner: str = TEST_LEADER) -> Dispatcher:
    return Dispatcher(settings, make_pusher(settings, owner))


def dispatch_all(settings: Settings) -> int:
    """Dispatch every due row now; returns how many ids were pushed."""
    dispatcher = make_dispatcher(settings)
    while dispatcher.poll() == 0:
        pass
    return dispatcher.dispatched


def seed_rows(settings: Settings, rows: int, *, due_now: bool = False) -> None:
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


def install_audit(conn: pymysql.connections.Connection, settings: Settings, audit: str = "audit") -> None:
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


def workload(settings: Settings, name: str, **values) -> Settings:
    """Another workload of the same deployment, as the workloads file would make it."""
    return Settings.model_validate({**settings.model_dump(), "workload": name, **values})
