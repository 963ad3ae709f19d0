"""Fixtures: real MariaDB and Redis for the session, a fresh database and empty Redis per test."""

from __future__ import annotations

import itertools
import os
import re
import subprocess

import pytest

from recheck.commands.init_db import init_db
from recheck.shared.config import ENV_PREFIX, Settings, Workload
from tests.support.processes import TEST_TIMINGS, Processes
from tests.support.servers import MariaDBServer, RedisServer

_databases = itertools.count(1)


def pytest_configure(config):
    # A developer's own RECHECK_* variables must not leak into tests.
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            del os.environ[name]


LAYERS = ("unit", "scripts", "integration", "chaos", "bench", "containers")
SERIAL_LAYERS = ("chaos",)


def pytest_collection_modifyitems(items):
    """Each test is marked by its folder: `-m unit`, `-m "not bench"` and so on select layers.
    `make test` runs `-m "not serial"` in four processes, then `-m "serial and not alone"` in two,
    then `-m alone` one at a time (alone implies serial), then
    `make test-compose` (tests/containers: Podman, images, compose) by itself."""
    for item in items:
        layer = item.path.parent.name
        if layer in LAYERS:
            item.add_marker(getattr(pytest.mark, layer))
        # Bounds on lateness and rates: never beside the parallel part.
        if layer in SERIAL_LAYERS or item.get_closest_marker("alone"):
            item.add_marker(pytest.mark.serial)
        if layer == "containers":  # image builds: 3 minutes on a slow VM; each step has its own timeout
            item.add_marker(pytest.mark.timeout(900))


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
    """make_settings(**overrides) -> the default Workload (and its Deployment) of this test's own
    database (table created) and an empty Redis; overrides of either kind."""
    name = re.sub(r"\W", "_", request.node.name)[:40]
    number = next(_databases)
    database = f"t{number}_{name}"
    redis_server.client().flushall()

    def make(**overrides) -> Workload:
        values = {
            "mysql_url": mariadb.url(database),
            "redis_url": redis_server.url(),
            "key_prefix": f"t{number}",  # isolation even from a previous test's stray threads
            **TEST_TIMINGS,
            **overrides,
        }
        workload = Settings(_env_file=None, **values).default_workload()
        assert init_db(workload, apply=False, say=lambda _: None) == 0  # idempotent
        return workload

    yield make
    with mariadb.connect() as conn, conn.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")


@pytest.fixture
def settings(make_settings) -> Workload:
    return make_settings()


@pytest.fixture
def make_worker():
    """make_worker(settings, check) -> an in-process Worker, started; closed after the test."""
    from recheck.workers.worker import Worker

    made = []

    def make(settings: Workload, check, start: bool = True) -> Worker:
        worker = Worker([settings], checks={settings.name: check})
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


@pytest.fixture
def procs(tmp_path, request):
    processes = Processes(tmp_path)
    yield processes
    # SIGTERM first: a `recheck run` stops its children (in sessions of their own) on its way out;
    # whatever is still there after that is killed.
    live = [process for process, _ in processes.started if process.poll() is None]
    for process in live:
        process.terminate()
    for process in live:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
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
