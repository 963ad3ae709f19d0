"""compose.yaml, checked without a container engine (none runs on these machines).

The file must validate against the Compose Specification schema, and every recheck service's
command must work when run as a local process with that service's own environment, the
service host names pointing at local servers.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from shared.localservers import MariaDBServer, RedisServer, wait_for
from tests.helpers import REPO

# The machine's copy if this clone sits next to it, else the copy kept in tests/data.
SCHEMA = next(
    path
    for path in (
        REPO.parent / "shared" / "schemas" / "compose-spec.json",
        REPO / "tests" / "data" / "compose-spec.json",
    )
    if path.exists()
)
RECHECK_SERVICES = ("init", "dispatcher", "worker")


def compose() -> dict:
    return yaml.safe_load((REPO / "compose.yaml").read_text())


def dotenv(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def interpolate(text: str, variables: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error} forms, and $$ for a literal $."""

    def replace(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        value = variables.get(name, "")
        if op == ":-" and not value:
            return arg
        if op == ":?" and not value:
            raise ValueError(f"{name}: {arg}")
        return value

    text = re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", replace, text)
    return text.replace("$$", "$")


def test_compose_file_is_valid_against_the_compose_spec():
    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(compose())


def test_workers_can_be_scaled():
    services = compose()["services"]
    assert "version" not in compose()
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert worker["depends_on"]["init"]["condition"] == "service_completed_successfully"
    grace = int(worker["stop_grace_period"].rstrip("s"))
    assert grace > 10  # longer than the default RECHECK_SHUTDOWN_TIMEOUT
    for name in RECHECK_SERVICES:
        assert services[name]["command"][0] in {"init-db", "dispatcher", "worker"}


@pytest.fixture
def stand_ins(tmp_path):
    """Local servers standing in for the compose mysql and redis services."""
    variables = dotenv(REPO / ".env.example")
    mysql = MariaDBServer(tmp_path / "mysql")
    mysql.start()
    with mysql.connect() as conn, conn.cursor() as cursor:  # as the mysql image would set it up
        cursor.execute(
            "SELECT Host FROM mysql.user WHERE User = 'root' AND Host IN ('localhost', '127.0.0.1', '::1')"
        )
        for (host,) in cursor.fetchall():
            cursor.execute("ALTER USER 'root'@%s IDENTIFIED BY %s", (host, variables["MYSQL_ROOT_PASSWORD"]))
    cache = RedisServer(tmp_path / "redis")
    cache.start()
    yield variables, mysql, cache
    cache.kill()
    mysql.kill()


def service_environment(name: str, variables: dict[str, str], mysql, cache) -> dict[str, str]:
    environment = {}
    for key, value in compose()["services"][name]["environment"].items():
        value = interpolate(str(value), variables)
        value = value.replace("@mysql:3306/", f"@127.0.0.1:{mysql.port}/")
        value = value.replace("redis://redis:6379/", f"redis://127.0.0.1:{cache.port}/")
        environment[key] = value
    return environment


def run_service(name: str, variables, mysql, cache, log_path: Path) -> subprocess.Popen:
    command = compose()["services"][name]["command"]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RECHECK_")}
    environment.update(service_environment(name, variables, mysql, cache))
    environment["PYTHONPATH"] = str(REPO)
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "shared.cli", *command], env=environment, cwd=REPO, stdout=log, stderr=log
        )


def test_every_recheck_service_command_runs_with_its_compose_environment(stand_ins, tmp_path):
    variables, mysql, cache = stand_ins
    init = run_service("init", variables, mysql, cache, tmp_path / "init.log")
    assert init.wait(timeout=60) == 0, (tmp_path / "init.log").read_text()
    assert "created table recheck.user_block_status" in (tmp_path / "init.log").read_text()

    long_running = {name: run_service(name, variables, mysql, cache, tmp_path / f"{name}.log")
                    for name in ("dispatcher", "worker")}  # fmt: skip
    try:
        for name, process in long_running.items():
            log = tmp_path / f"{name}.log"
            wait_for(lambda log=log: "started" in log.read_text(), 20, f"{name} to start")
            assert process.poll() is None, log.read_text()
            assert variables["MYSQL_ROOT_PASSWORD"] not in log.read_text()  # no secret in logs
    finally:
        for name, process in long_running.items():
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0, (tmp_path / f"{name}.log").read_text()
