"""What users deploy, brought up for real (issue 31): the image built from deploy/Dockerfile and
both compose files run by the Compose v2 binary on Podman (tests/support/podman.py says how; no
Docker engine runs on these machines). `make test-compose` runs this module alone; `make test`
runs it last.

1. compose.yaml with 4 workers: `recheck seed` and `recheck status` inside containers, every row
   checked and fresh, the dashboard on its published ports, one worker SIGKILLed (no row later
   than the README's bound), scaled down to 2 (the removed workers exit 0 after writing back
   what they held; nothing reclaimed), `down -v` (nothing left).
2. deploy/app/compose.yaml, copied out of the checkout as a user would, beside an "application's"
   MariaDB container with its own table: the preflight, `init-db` (prints, changes nothing),
   `init-db --apply`, up, every row checked by the example check (aiohttp from its own lock).

Whatever happens, each project is removed at the end (containers, networks, volumes), and a
previous run's leftovers at the start. Each phase prints its time (pytest -s).
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pymysql
import pytest
from dotenv import dotenv_values

from tests.support.helpers import REPO, query, scalar
from tests.support.podman import HERE, ApiService, Compose, HealthPump, Podman, phase, reclaims_since
from tests.support.servers import wait_for

DEMO = "recheck-ci"
APP = "recheck-ci-app"
KILLED_WORKER_BOUND_S = 7.0  # README: "its rows are late by at most 7 s plus checking them"
CHECKING_S = 1.0  # the demo check is instant: one take, check and write-back, with room for the machine


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    root = tmp_path_factory.mktemp("podman")
    podman = Podman(root)
    with phase("base images (built from Debian's packages once per machine, then cached)"):
        podman.base_images()
    with ApiService(podman, root / "api.sock") as api:
        yield api


def write_env(path: Path, example: Path, **values: str) -> dict[str, str]:
    """A .env from an .env.example, every password replaced by a fresh random one."""
    variables = {k: v or "" for k, v in dotenv_values(example).items()}
    for name in variables:
        if "PASSWORD" in name:
            variables[name] = secrets.token_hex(12)
    variables.update(values)
    path.write_text("".join(f"{name}={value}\n" for name, value in variables.items()))
    return variables


class Lateness(threading.Thread):
    """Samples, every 0.2 s, how far past its due time the most overdue row is (0 if none)."""

    def __init__(self, connect, table: str):
        super().__init__(daemon=True)
        self.connect, self.table = connect, table
        self.samples: list[tuple[float, float]] = []
        self.error: Exception | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            self.sample()
        except Exception as error:  # recorded: worst() fails with it instead of a thread's warning
            self.error = error

    def sample(self) -> None:
        sql = (
            f"SELECT COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, next_check_at, NOW(3))), 0) / 1e6 "
            f"FROM {self.table} WHERE next_check_at < NOW(3)"
        )
        with self.connect() as conn:
            while not self.stopping.wait(0.2):
                self.samples.append((time.monotonic(), float(scalar(conn, sql))))

    def back_on_time(self, since: float) -> bool:
        """A sample taken after `since` found no row more than CHECKING_S overdue."""
        return any(at > since and late <= CHECKING_S for at, late in list(self.samples))

    def worst(self) -> float:
        self.stopping.set()
        self.join(timeout=10)
        if self.error is not None:
            raise AssertionError(f"lost sight of the rows: {self.error}")
        return max((late for _, late in self.samples), default=0.0)


@pytest.fixture
def cleanup(engine):
    """Projects named here are removed before the test and after it, whatever happens; the test
    fails if it leaves anything behind (anonymous volumes included)."""
    names: list[str] = []
    volumes = engine.podman.volumes()

    def register(project: str) -> None:
        names.append(project)
        engine.podman.remove_project(project)

    yield register
    for project in names:
        engine.podman.remove_project(project)
        assert engine.podman.project_leftovers(project) == {"containers": [], "networks": [], "volumes": []}
    assert engine.podman.volumes() - volumes == set()


def dispatcher_logs(compose: Compose) -> str:
    return compose("logs", "--no-color", "dispatcher", "dispatcher-standby").stdout


def show_logs(compose: Compose) -> None:
    logs = compose("logs", "--no-color", "--tail", "60", check=False)
    print(logs.stdout[-20000:], logs.stderr[-3000:])


def frozen_holder(compose, podman) -> tuple[str, str, datetime] | None:
    """(the name, the host name, the UTC time just before its pause) of worker 1 or 2, frozen
    (`podman pause`) while it holds rows (its processing set in Redis is not empty), or None.
    Frozen, it can finish nothing: what it held when seen is what it holds when killed (a worker
    seen holding rows, then killed a moment later, could have acknowledged them all in between
    and been killed holding none, which tests nothing; so Podman.kill_frozen). One of the two
    that scaling down to 2 keeps (compose removes the highest numbers): the next phase stops the
    other two gracefully. A worker's id starts with its hostname, the container's short id."""
    for container in sorted(compose.containers("worker"), key=lambda c: c["Name"])[:2]:
        name, host = container["Name"], container["ID"][:12]
        script = f"for k in $(redis-cli --scan --pattern '*processing:{host}*'); do redis-cli scard $k; done"
        frozen_at = datetime.now(UTC)
        podman("pause", name)
        holds = False
        try:
            holds = any(
                count != "0" for count in compose("exec", "-T", "redis", "sh", "-c", script).stdout.split()
            )
        finally:
            if not holds:
                podman("unpause", name)
        if holds:
            return name, host, frozen_at
    return None


def test_compose_yaml_up_scaled_killed_scaled_down_and_torn_down(engine, cleanup, tmp_path):
    podman = engine.podman
    cleanup(DEMO)
    # A per-row check that takes 0.1 s (compose.podman.yaml), so every worker holds rows when one is killed.
    env = write_env(tmp_path / ".env", REPO / ".env.example", RECHECK_CHECK="recheck.workers.demo:sleepy")
    compose = Compose(DEMO, [REPO / "compose.yaml", HERE / "compose.podman.yaml"], tmp_path / ".env", engine)
    pump = HealthPump(podman, DEMO)
    pump.start()
    try:
        with phase("image (deploy/Dockerfile, the example check built in)"):
            podman.build_recheck("localhost/recheck:local", REPO / "deploy" / "example-check")
        assert (
            podman("image", "inspect", "--format", "{{.Config.User}}", "recheck:local").strip() == "recheck"
        )

        with phase("up with 4 workers, every service healthy"):
            compose(
                "up",
                "-d",
                "--no-build",
                "--scale",
                "worker=4",
                "--wait",
                "--wait-timeout",
                "240",
                timeout=300,
            )
        workers = compose.containers("worker")
        assert len(workers) == 4 and {w["Health"] for w in workers} == {"healthy"}, workers
        assert {
            c["Health"] for name in ("dispatcher", "dispatcher-standby") for c in compose.containers(name)
        } == {"healthy"}

        def connect(user: str = "root", password: str = env["MYSQL_ROOT_PASSWORD"]):
            port = compose.port("mysql", 3306)
            return pymysql.connect(
                host="127.0.0.1", port=port, user=user, password=password, database="recheck", autocommit=True
            )

        with phase("recheck seed (5,000 rows) in a container, every row checked and fresh"):
            # Due times spread over one interval: a steady 500 checks/s, so workers always hold rows.
            seeded = compose.run("--no-deps", "init", "seed", "--rows", "5000")
            assert "inserted ids 1..5,000" in seeded.stdout, seeded.stdout + seeded.stderr
            with connect() as conn:
                unchecked = "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0"
                wait_for(lambda: scalar(conn, unchecked) == 0, 60, "every row checked once", interval=0.5)
            # The dispatchers and workers log in as init's least-privilege user: SELECT and UPDATE only.
            with connect("recheck", env["RECHECK_MYSQL_PASSWORD"]) as conn, conn.cursor() as cursor:
                cursor.execute("SELECT COUNT(*) FROM user_block_status")
                with pytest.raises(pymysql.err.OperationalError, match="denied"):
                    cursor.execute("DELETE FROM user_block_status")

            def fresh() -> bool:
                return compose("exec", "-T", "dispatcher", "recheck", "status", check=False).returncode == 0

            wait_for(fresh, 60, "`recheck status` in a container to say fresh (exit 0)", interval=1)
            status = compose("exec", "-T", "dispatcher", "recheck", "status").stdout
            assert "5,000" in status and "workers" in status, status

        with phase("the dashboard on 127.0.0.1:8080 and :8081"):
            for port in (8080, 8081):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
                    assert page.status == 200 and b"recheck" in page.read()

        with phase("one worker killed with SIGKILL: its rows reclaimed, none later than the bound"):
            watch = Lateness(connect, "user_block_status")
            watch.start()
            time.sleep(2)
            victim, host, frozen_at = wait_for(
                lambda: frozen_holder(compose, podman), 20, "a worker holding rows", interval=0.2
            )
            podman.kill_frozen(victim)  # killed holding what it was seen holding
            reclaims = wait_for(
                lambda: reclaims_since(dispatcher_logs(compose), host, frozen_at),
                30,
                "the reconciler to reclaim the killed worker's ids",
                interval=1,
            )
            assert reclaims[0] > 0, reclaims  # it held rows: the bound below is about them
            # Until every reclaimed row is checked again: their lateness only grows until then, so
            # the samples have seen its worst. A row never checked again fails this wait.
            since = time.monotonic()
            wait_for(lambda: watch.back_on_time(since), KILLED_WORKER_BOUND_S + CHECKING_S,
                     "every reclaimed row checked again", interval=0.2)  # fmt: skip
            worst = watch.worst()
            print(
                f"[compose test] worst lateness around the kill: {worst:.2f} s ({len(watch.samples)} samples)"
            )
            assert worst <= KILLED_WORKER_BOUND_S + CHECKING_S, worst

        with phase("scaled down to 2: the removed workers stop gracefully"):
            before = {c["Name"] for c in compose.containers("worker")}
            follow = {name: podman.attach_output(name, tmp_path / f"{name}.log") for name in before}
            time.sleep(1)  # attached before the stop
            since = time.time()
            watch = Lateness(connect, "user_block_status")
            watch.start()
            compose("up", "-d", "--no-build", "--scale", "worker=2", "--no-recreate", "--wait", timeout=180)
            removed = before - {c["Name"] for c in compose.containers("worker")}
            assert len(removed) == 2, removed
            exits = podman.exit_codes(since, removed)
            for name, process in follow.items():  # an attach ends with its container, after its last line
                try:
                    process.wait(timeout=10 if name in removed else 0)
                except subprocess.TimeoutExpired:
                    process.terminate()
                    process.wait(timeout=30)
            logs = "".join((tmp_path / f"{name}.log").read_text() for name in sorted(removed))
            time.sleep(3)  # a sweep or a reclaim of what they held would show by now
            worst = watch.worst()
            print(f"[compose test] worst lateness while scaling down: {worst:.2f} s; exit codes {exits}")
            assert exits == dict.fromkeys(removed, 0), (exits, logs[-5000:])
            # Each wrote back what it had checked and handed back what it had not ("returned": to the
            # head of the queue at once, not after a heartbeat expires). Stale writes are expected
            # here: the killed worker's reclaimed rows include ones it had written but not yet
            # acknowledged, checked again and fenced out (at-least-once, written once).
            stopped = re.findall(
                r"worker \S+ stopped: \d+ checked, (\d+) failed, \d+ stale, \d+ returned", logs
            )
            assert stopped == ["0", "0"], logs[-5000:]
            dispatchers = dispatcher_logs(compose)
            assert len(reclaims_since(dispatchers, host, frozen_at)) == 1, dispatchers[-5000:]  # once
            assert "were not in flight; dispatched them again" not in dispatchers  # no sweep needed
            assert worst < 2.0, worst
            with connect() as conn:
                assert scalar(conn, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0") == 0

        all_logs = compose("logs", "--no-color").stdout
        for name, value in env.items():
            if "PASSWORD" in name:
                assert value not in all_logs, name

        with phase("down -v"):
            compose("down", "-v", "--timeout", "30", timeout=120)
        assert podman.project_leftovers(DEMO) == {"containers": [], "networks": [], "volumes": []}
    except BaseException:
        show_logs(compose)
        raise
    finally:
        pump.stop()


def test_the_application_compose_beside_an_applications_own_mariadb(engine, cleanup, tmp_path):
    podman = engine.podman
    cleanup(APP)
    folder = tmp_path / "app"  # a copy of deploy/app, as in an application's repository
    shutil.copytree(REPO / "deploy" / "app", folder)
    for name in ("app.podman.yaml", "app-db.sql"):
        shutil.copy(HERE / name, folder / name)
    write_env(
        folder / ".env",
        REPO / "deploy" / "app" / ".env.example",
        RECHECK_SOURCE=str(REPO),
        RECHECK_MYSQL_URL="mysql://recheck:recheck-app-pw@db:3306/app",
        RECHECK_INTERVAL="5",
    )
    compose = Compose(APP, [folder / "compose.yaml", folder / "app.podman.yaml"], folder / ".env", engine)
    pump = HealthPump(podman, APP)
    pump.start()
    try:
        with phase("image (deploy/Dockerfile with the example application's checks and their lock)"):
            podman.build_recheck("localhost/recheck-app:local", folder / "example")
        with phase("the application's MariaDB, Redis and the monitored target up"):
            compose("up", "-d", "--wait", "db", "redis", "target", timeout=300)

        def connect():
            return pymysql.connect(
                host="127.0.0.1",
                port=compose.port("db", 3306),
                user="root",
                password="app-root-pw",
                database="app",
                autocommit=True,
            )

        def table() -> str:
            with connect() as conn:
                return str(query(conn, "SHOW CREATE TABLE monitors")[0][1])

        with phase("init-db (prints only), preflight, init-db --apply (makes the user), preflight"):
            admin = "RECHECK_MYSQL_URL=mysql://root:app-root-pw@db:3306/app"
            original = table()
            shown = compose.run("--no-deps", "-e", admin, "recheck", "init-db", check=False)
            assert shown.returncode == 1 and "ALTER TABLE `monitors`" in shown.stdout, (
                shown.stdout + shown.stderr
            )
            assert table() == original  # printed, nothing changed
            before = compose.run("--no-deps", "recheck", check=False)  # .env's user: not there yet
            assert before.returncode == 1 and "Access denied" in before.stdout, before.stdout
            assert "the check imports: a per-row check (async)" in before.stdout  # aiohttp from its lock
            user = ("-e", "RECHECK_APP_USER=recheck", "-e", "RECHECK_APP_PASSWORD=recheck-app-pw")
            compose.run("--no-deps", "-e", admin, *user, "recheck", "init-db", "--apply")
            assert table() != original and "next_check_at" in table()
            ready = compose.run("--no-deps", "recheck")
            assert "every server reachable, every table ready" in ready.stdout, ready.stdout

        with phase("up with 2 workers, every monitor probed by the example check"):
            compose(
                "up",
                "-d",
                "--no-build",
                "--scale",
                "worker=2",
                "--wait",
                "--wait-timeout",
                "240",
                timeout=300,
            )
            with connect() as conn:
                done = "SELECT COUNT(*) FROM monitors WHERE check_count >= 1"
                wait_for(lambda: scalar(conn, done) == 30, 60, "every monitor probed", interval=0.5)
                with conn.cursor() as cursor:
                    cursor.execute("SELECT id, CONCAT(recheck_status, '|', status) FROM monitors")
                    rows = dict(cursor.fetchall())
            assert {rows[i] for i in range(1, 31) if i % 3} == {"up|active"}
            assert {rows[i] for i in range(3, 31, 3)} == {"down: HTTP 404|active"}  # its own column untouched

        with phase("down -v"):
            compose("down", "-v", "--timeout", "30", timeout=120)
        assert podman.project_leftovers(APP) == {"containers": [], "networks": [], "volumes": []}
    except BaseException:
        show_logs(compose)
        raise
    finally:
        pump.stop()
