"""Fixtures: real MariaDB and Redis for the session, a fresh database and empty Redis per test."""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared.config import ENV_PREFIX, Settings
from shared.localservers import MariaDBServer, RedisServer
from shared.schema import init_db
from tests.helpers import REPO

# Short timings so recovery paths run in seconds. Production defaults are in shared/config.py.
TEST_TIMINGS = {
    "interval": 2.0,
    "heartbeat_interval": 0.25,
    "heartbeat_ttl": 1.0,
    "reclaim_interval": 0.25,
    "sweep_interval": 0.5,
    "sweep_grace": 1.5,
    "orphan_interval": 1.0,
    "orphan_after": 10.0,
    "poll_interval": 0.02,
    "shutdown_timeout": 5.0,
    "retry_base": 0.2,
    "retry_max": 2.0,
    "metrics_port": 0,  # tests that want them choose free ports
    "dashboard_port": 0,
}

_databases = itertools.count(1)


def pytest_configure(config):
    # A developer's own RECHECK_* variables must not leak into tests.
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            del os.environ[name]


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory):
    server = MariaDBServer(tmp_path_factory.mktemp("mariadb"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def make_settings(mariadb, redis_server, request):
    """make_settings(**overrides) -> Settings for this test's own database (table created), empty Redis."""
    name = re.sub(r"\W", "_", request.node.name)[:40]
    number = next(_databases)
    database = f"t{number}_{name}"
    redis_server.client().flushall()

    def make(**overrides) -> Settings:
        values = {
            "mysql_url": mariadb.url(database),
            "redis_url": redis_server.url(),
            "key_prefix": f"t{number}",  # isolation even from a previous test's stray threads
            **TEST_TIMINGS,
            **overrides,
        }
        settings = Settings(_env_file=None, **values)
        assert init_db(settings, apply=False, say=lambda _: None) == 0  # idempotent
        return settings

    yield make
    with mariadb.connect() as conn, conn.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")


@pytest.fixture
def settings(make_settings) -> Settings:
    return make_settings()


@pytest.fixture
def make_worker():
    """make_worker(settings, check) -> an in-process Worker, started; closed after the test."""
    from workers.worker import Worker

    made = []

    def make(settings: Settings, check, start: bool = True) -> Worker:
        worker = Worker(settings, check=check)
        made.append(worker)
        if start:
            worker.startup()
        return worker

    yield make
    for worker in made:
        worker.stop()
        worker.close()


@pytest.fixture
def sql(settings, mariadb):
    """A plain autocommit connection to the test's database (the test's own eyes, not recheck's)."""
    conn = mariadb.connect(settings.mysql.database)
    yield conn
    conn.close()


@pytest.fixture
def rds(redis_server):
    return redis_server.client()


class Processes:
    """Starts recheck roles exactly as compose does (`python -m dispatcher|workers`)."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.started: list[tuple[subprocess.Popen, Path]] = []

    def start(self, role: str, settings: Settings, *args: str, env: dict | None = None) -> subprocess.Popen:
        module = {"dispatcher": "dispatcher", "worker": "workers"}.get(role, role)
        environment = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        environment.update(settings.env_overrides())
        environment["PYTHONPATH"] = str(REPO)
        environment.update(env or {})
        log_path = self.log_dir / f"{role}-{len(self.started)}.log"
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                env=environment,
                cwd=REPO,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        self.started.append((process, log_path))
        return process

    def log_of(self, process: subprocess.Popen) -> str:
        for started, path in self.started:
            if started is process:
                return path.read_text(errors="replace")
        return ""

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}" for _, path in self.started
        )

    def stop_all(self, timeout: float = 15) -> dict[int, int]:
        """SIGTERM every live process and wait; returns pid -> exit code."""
        for process, _ in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = {}
        deadline = time.monotonic() + timeout
        for process, _ in self.started:
            try:
                codes[process.pid] = process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                process.kill()
                codes[process.pid] = process.wait()
        return codes


@pytest.fixture
def procs(tmp_path, request):
    processes = Processes(tmp_path)
    yield processes
    for process, _ in processes.started:
        if process.poll() is None:
            process.kill()
            process.wait()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(processes.logs())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report
