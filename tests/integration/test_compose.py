"""compose.yaml, deploy/app/compose.yaml and deploy/Dockerfile read as files, in seconds and
without a container engine. What they do when run is tests/containers/test_compose_up.py: the
image built and both files brought up on Podman (`make test-compose`).

- both compose files validate against the Compose Specification schema and follow the rules a
  scalable production file needs (health checks, conditions, grace periods, no fixed names,
  ports on 127.0.0.1 and no host port ranges);
- the worker's health check command fails when its process is paused or killed, and the
  example check package runs from the folder the image copies (each service's command run as
  a local process with the environment its container would have);
- the Dockerfile follows the image rules: slim base by default, non-root, exec-form entrypoint,
  every dependency pinned.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pymysql
import pytest
import yaml
from dotenv import dotenv_values  # python-dotenv: pydantic-settings' own .env reader

from tests.support.helpers import REPO, scalar
from tests.support.servers import MariaDBServer, RedisServer, wait_for

# The machine's copy if this clone sits next to it, else the copy kept in tests/data.
SCHEMA = next(
    path
    for path in (
        REPO.parent / "shared" / "schemas" / "compose-spec.json",
        REPO / "tests" / "data" / "compose-spec.json",
    )
    if path.exists()
)
RECHECK_SERVICES = ("init", "dispatcher", "dispatcher-standby", "worker")
LONG_RUNNING = ("mysql", "redis", "dispatcher", "dispatcher-standby", "worker", "prometheus", "grafana")
DOCKERFILE = REPO / "deploy" / "Dockerfile"
DEMO_COMPOSE = REPO / "compose.yaml"  # the demo: its own MySQL and table
APP_COMPOSE = REPO / "deploy" / "app" / "compose.yaml"  # beside an application's own MySQL


def compose(path: Path = DEMO_COMPOSE) -> dict:
    return yaml.safe_load(path.read_text())


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


def seconds(duration: str) -> float:
    return float(duration.rstrip("s"))


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined, current = [], ""
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        current += line.rstrip("\\").strip() + " " if line.rstrip().endswith("\\") else line.strip()
        if not line.rstrip().endswith("\\"):
            if current.strip():
                joined.append(current.strip())
            current = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in joined]


def package_name(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503: case and -_. folded)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def image_environment() -> dict[str, str]:
    env = {}
    for instruction, arguments in dockerfile_instructions(DOCKERFILE):
        if instruction == "ENV":
            env.update(pair.split("=", 1) for pair in arguments.split())
    return env


# -- the file itself ----------------------------------------------------------------------------
@pytest.mark.parametrize("path", [DEMO_COMPOSE, APP_COMPOSE], ids=["demo", "application"])
def test_compose_file_is_valid_against_the_compose_spec(path):
    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(compose(path))


def test_workers_scale_and_stop_gracefully():
    spec = compose()
    assert "version" not in spec
    services = spec["services"]
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert not any("container_name" in service for service in services.values())
    shutdown_timeout = 10.0  # RECHECK_SHUTDOWN_TIMEOUT's default; compose does not change it
    assert "RECHECK_SHUTDOWN_TIMEOUT" not in worker["environment"]
    assert seconds(worker["stop_grace_period"]) > shutdown_timeout
    # A leader and a standby, as two services with a fixed dashboard port each.
    assert services["dispatcher-standby"]["command"] == services["dispatcher"]["command"] == ["dispatcher"]
    assert "deploy" not in services["dispatcher"]
    for name in RECHECK_SERVICES:
        assert services[name]["command"][0] in {"init-db", "dispatcher", "worker"}


def test_start_order_health_checks_and_restart_policies():
    services = compose()["services"]
    assert services["init"]["depends_on"]["mysql"]["condition"] == "service_healthy"
    assert services["init"]["restart"] == "no"
    for name in ("dispatcher", "dispatcher-standby", "worker"):
        assert services[name]["depends_on"]["init"]["condition"] == "service_completed_successfully"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
        assert services[name]["healthcheck"]["test"] == ["CMD", "recheck", "health"]
    for name in LONG_RUNNING:
        assert services[name]["restart"] == "unless-stopped", name
        assert services[name]["healthcheck"]["test"], name
    assert services["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"


def test_passwords_come_only_from_env_and_ports_stay_local():
    text = (REPO / "compose.yaml").read_text()
    variables = dict(dotenv_values(REPO / ".env.example"))
    for name, value in variables.items():
        if "PASSWORD" in name:
            assert value not in text, name  # the example's values never leak into the file
            assert f"${{{name}:?" in text, name  # required: compose refuses to start without it
    assert not (REPO / ".env").exists() or ".env" in (REPO / ".gitignore").read_text().split()
    for path in (DEMO_COMPOSE, APP_COMPOSE):
        for service in compose(path)["services"].values():
            for port in service.get("ports", []):
                assert port.startswith("127.0.0.1:"), port  # published on this machine only
                assert "-" not in port, port  # a range of host ports: Podman's API refuses it


def test_monitoring_profile_mounts_the_provisioned_files():
    services = compose()["services"]
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"]
        for volume in services[name]["volumes"]:
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (REPO / source).exists(), source
    prometheus = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    assert prometheus["rule_files"] == ["/etc/prometheus/alerts.yml"]
    assert prometheus["scrape_configs"][0]["dns_sd_configs"][0]["names"] == [
        "dispatcher",
        "dispatcher-standby",
        "worker",
    ]
    provider = yaml.safe_load((REPO / "deploy/grafana/provisioning/dashboards/recheck.yml").read_text())
    dashboards = provider["providers"][0]["options"]["path"]
    assert f"./deploy/grafana/dashboards:{dashboards}:ro" in services["grafana"]["volumes"]
    datasource = yaml.safe_load((REPO / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"


# -- the Dockerfiles ----------------------------------------------------------------------------
def test_dockerfile_follows_the_image_rules():
    instructions = dockerfile_instructions(DOCKERFILE)
    kinds = [kind for kind, _ in instructions]
    # The base is a build argument (the compose test names a local one), the slim image by default.
    assert re.fullmatch(r"BASE=python:3\.\d+-slim", instructions[0][1]) and instructions[0][0] == "ARG"
    assert [arguments for kind, arguments in instructions if kind == "FROM"][-1] == "${BASE}"
    users = [arguments for kind, arguments in instructions if kind == "USER"]
    assert users and users[-1] not in {"root", "0"}  # the image runs as a non-root user
    assert kinds.index("ENTRYPOINT") > max(i for i, kind in enumerate(kinds) if kind == "USER")
    entrypoint = dict(instructions)["ENTRYPOINT"]
    assert json.loads(entrypoint) == ["recheck"]  # exec form: SIGTERM reaches Python
    assert image_environment()["PYTHONUNBUFFERED"] == "1"
    installs = [arguments for kind, arguments in instructions if kind == "RUN" and "pip install" in arguments]
    assert installs and all("--no-deps" in command for command in installs)  # only what is pinned
    assert any("-r /app/deploy/requirements.lock" in command for command in installs)


def test_the_image_ships_the_product_and_not_the_benchmark():
    copied = set()
    for kind, arguments in dockerfile_instructions(DOCKERFILE):
        if kind == "COPY":
            copied |= {source.split("/")[0] for source in arguments.split()[:-1]}
    assert {"shared", "dispatcher", "workers", "recheck"} <= copied
    assert not copied & {"bench", "tests", "docs"}, copied
    # What is copied must not need what is not: the product imports bench nowhere (the command
    # loads it by name for `recheck bench` only; tests/unit/test_architecture.py checks imports).
    for package in ("shared", "dispatcher", "workers", "recheck"):
        for path in (REPO / package).rglob("*.py"):
            assert not re.search(r"^\s*(from|import) bench\b", path.read_text(), re.MULTILINE), path


def test_every_runtime_dependency_is_pinned_in_the_lock():
    lines = [
        line
        for line in (REPO / "deploy/requirements.lock").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    pinned = {}
    for line in lines:
        # name==version, with an environment marker for what only some Pythons need
        assert re.fullmatch(
            r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9.]*( ; python_full_version < \"[0-9.]+\")?", line
        ), line
        name, version = line.split(" ;")[0].split("==")
        pinned[package_name(name)] = version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        name = package_name(re.match(r"[A-Za-z0-9_.-]+", requirement).group())
        assert name in pinned, requirement
    for extra in ("hiredis", "cryptography"):  # redis[hiredis], PyMySQL[rsa]
        assert extra in pinned


def test_the_checks_and_their_pinned_libraries_go_into_the_image_in_one_build():
    instructions = dockerfile_instructions(DOCKERFILE)
    # A stage named `checks` holds the example; a build context of that name (compose's
    # build.additional_contexts, `docker build --build-context checks=DIR`) takes its place.
    assert ("FROM", "scratch AS checks") in instructions
    assert ("COPY", "deploy/example-check/ /") in instructions
    assert ("COPY", "--from=checks / /opt/checks/") in instructions
    after = instructions[instructions.index(("COPY", "--from=checks / /opt/checks/")) :]
    assert any(kind == "RUN" and "pip install --no-deps -r /opt/checks/requirements.lock" in arguments
               for kind, arguments in after)  # fmt: skip
    assert image_environment()["PYTHONPATH"] == "/opt/checks"
    for path in (DEMO_COMPOSE, APP_COMPOSE):
        for name, service in compose(path)["services"].items():
            if "build" in service:
                assert service["build"]["additional_contexts"]["checks"], (path, name)
                assert not any("/opt/checks" in volume for volume in service.get("volumes", [])), name


def test_the_example_applications_lock_is_made_by_a_real_tool_and_agrees_with_recheck_s():
    folder = REPO / "deploy" / "app" / "example"
    text = (folder / "requirements.lock").read_text()
    assert text.startswith("# This file was autogenerated by uv via the following command:")
    assert "uv pip compile requirements.in -c ../../requirements.lock" in text.splitlines()[1]
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, re.MULTILINE))
    hashes = re.findall(r"^\s+--hash=sha256:[0-9a-f]{64}", text, re.MULTILINE)
    assert pins and len(hashes) >= len(pins)  # every pin hashed: pip installs in hash-checking mode
    lines = (folder / "requirements.in").read_text().splitlines()
    wanted = [line for line in lines if line and line[0] != "#"]
    assert all(re.match(r"[A-Za-z0-9_.-]+", line).group() in pins for line in wanted), wanted
    ours = dict(line.split("==") for line in (REPO / "deploy/requirements.lock").read_text().splitlines()
                if "==" in line and not line.startswith("#"))  # fmt: skip
    ours = {package_name(name): version for name, version in ours.items()}
    for name, version in pins.items():
        assert ours.get(package_name(name), version) == version, (name, version, ours[package_name(name)])


# -- every recheck service, run as a local process ---------------------------------------------
class Stack:
    """Local servers standing in for the compose `mysql` (or the application's own MySQL) and
    `redis` services; path: the compose file whose services run as local processes, with the
    variables of its folder's .env (as `docker compose` reads them)."""

    def __init__(self, root: Path, path: Path = DEMO_COMPOSE, variables: dict[str, str] | None = None):
        self.root = root
        self.path = path
        self.variables = variables or dict(dotenv_values(REPO / ".env.example"))
        self.mysql = MariaDBServer(root / "mysql")
        password = self.variables["REDIS_PASSWORD"]
        self.redis = RedisServer(root / "redis", extra=("--requirepass", password))
        self.redis.password = password

    def start(self) -> None:
        self.mysql.start()
        root_password = self.variables.get("MYSQL_ROOT_PASSWORD")
        if root_password:  # as the mysql image sets it up
            with self.mysql.connect() as conn, conn.cursor() as cursor:
                hosts = "('localhost', '127.0.0.1', '::1')"
                cursor.execute(f"SELECT Host FROM mysql.user WHERE User = 'root' AND Host IN {hosts}")
                for (host,) in cursor.fetchall():
                    cursor.execute("ALTER USER 'root'@%s IDENTIFIED BY %s", (host, root_password))
        self.redis.start()

    def stop(self) -> None:
        self.redis.kill()
        self.mysql.kill()

    def environment(self, name: str, overrides: dict[str, str] | None = None) -> dict[str, str]:
        """What the container of service `name` would have (the image's ENV, its env_file, its
        `environment`), pointed at the local servers."""
        service = compose(self.path)["services"][name]
        environment = {k: v for k, v in os.environ.items() if not k.startswith("RECHECK_")}
        environment.update(image_environment())
        if "env_file" in service:  # compose reads it relative to the compose file's folder
            assert service["env_file"] == ".env", service["env_file"]
            environment.update(self.variables)
        environment.update(
            {k: interpolate(str(v), self.variables) for k, v in service.get("environment", {}).items()}
        )
        environment.update(overrides or {})
        for key, value in environment.items():
            value = value.replace("@mysql:3306/", f"@127.0.0.1:{self.mysql.port}/")
            environment[key] = value.replace("@redis:6379/", f"@127.0.0.1:{self.redis.port}/")
        # The container's own /tmp, and the checks the image has at /opt/checks.
        environment["RECHECK_HEALTH_FILE"] = str(self.root / f"{name}.health")
        pythonpath = environment["PYTHONPATH"].replace("/opt/checks", str(self.checks_dir(service)))
        environment["PYTHONPATH"] = os.pathsep.join((pythonpath, str(REPO)))
        environment["RECHECK_METRICS_PORT"] = "0"  # several "containers" share this machine
        environment["RECHECK_DASHBOARD_PORT"] = "0"
        return environment

    def checks_dir(self, service: dict) -> Path:
        """The folder the image build copies to /opt/checks (build.additional_contexts.checks)."""
        build = service["build"]
        assert build["dockerfile"] == "deploy/Dockerfile"
        source = interpolate(build["additional_contexts"]["checks"], self.variables)
        return (self.path.parent / source).resolve()

    def command(self, argv: list[str]) -> list[str]:
        return [sys.executable, "-m", "recheck", *argv]

    def start_service(self, name: str, overrides: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        command = self.command(compose(self.path)["services"][name]["command"])
        return subprocess.Popen(
            command, env=self.environment(name, overrides), cwd=self.root, stdout=log, stderr=log
        )

    def health(self, name: str, overrides: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        test = compose(self.path)["services"][name]["healthcheck"]["test"]
        assert test[0] == "CMD" and test[1] == "recheck"
        return subprocess.run(
            self.command(test[2:]), env=self.environment(name, overrides), cwd=self.root,
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text()

    def insert_due_rows(self, count: int) -> None:
        with self.connect("root", self.variables["MYSQL_ROOT_PASSWORD"]) as conn, conn.cursor() as cursor:
            cursor.execute(
                "INSERT INTO user_block_status (user_id, next_check_at) SELECT seq, NOW(3) "
                f"FROM seq_1_to_{count:d}"  # MariaDB's sequence engine: test data only
            )

    def connect(self, user: str, password: str) -> pymysql.connections.Connection:
        return pymysql.connect(
            host="127.0.0.1", port=self.mysql.port, user=user, password=password, database="recheck",
            autocommit=True,
        )  # fmt: skip


@pytest.fixture
def stack(tmp_path):
    stack = Stack(tmp_path)
    stack.start()
    yield stack
    stack.stop()


def run_init(stack: Stack) -> None:
    init = stack.start_service("init")
    assert init.wait(timeout=60) == 0, stack.log("init")
    assert "created table recheck.user_block_status" in stack.log("init")
    assert "user 'recheck'@'%' may SELECT and UPDATE recheck.user_block_status" in stack.log("init")


def test_worker_health_fails_when_killed_or_paused(stack):
    run_init(stack)
    worker = stack.start_service("worker")
    try:
        wait_for(lambda: stack.health("worker").returncode == 0, 30, "worker healthy")
        worker.send_signal(signal.SIGSTOP)  # alive but stuck: its heartbeat key expires
        wait_for(lambda: stack.health("worker").returncode == 1, 15, "paused worker unhealthy")
        assert "has not heartbeaten in time" in stack.health("worker").stdout
        worker.send_signal(signal.SIGCONT)
        wait_for(lambda: stack.health("worker").returncode == 0, 15, "resumed worker healthy again")
        worker.kill()  # kill -9: no chance to clean up, the pid is gone
        worker.wait(timeout=10)
        dead = stack.health("worker")
        assert dead.returncode == 1 and "is gone" in dead.stdout, dead.stdout
    finally:
        if worker.poll() is None:
            worker.kill()


def test_the_example_check_package_runs_from_its_mount(stack, tmp_path):
    run_init(stack)
    blocklist = tmp_path / "blocklist.txt"
    blocklist.write_text("2\n4\n")
    stack.insert_due_rows(5)
    overrides = {"RECHECK_CHECK": "acme_checks.blocklist:check", "ACME_BLOCKLIST": str(blocklist)}
    processes = [stack.start_service("dispatcher"), stack.start_service("worker", overrides)]
    try:
        with stack.connect("recheck", stack.variables["RECHECK_MYSQL_PASSWORD"]) as conn:
            done = "SELECT COUNT(*) FROM user_block_status WHERE check_count >= 1"
            wait_for(lambda: scalar(conn, done) == 5, 30, "the example check to run")
            with conn.cursor() as cursor:
                cursor.execute("SELECT user_id, status FROM user_block_status ORDER BY user_id")
                statuses = dict(cursor.fetchall())
        assert statuses == {1: "ok", 2: "blocked", 3: "ok", 4: "blocked", 5: "ok"}
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


# -- recheck beside an application's own MySQL (deploy/app) --------------------------------------
def test_the_application_compose_brings_no_mysql_and_changes_no_table_by_itself():
    spec = compose(APP_COMPOSE)
    services = spec["services"]
    assert set(services) == {"redis", "recheck", "dispatcher", "dispatcher-standby", "worker"}  # no MySQL
    assert services["recheck"]["profiles"] == ["tools"]  # one-off commands: never started by `up`
    for name in ("recheck", "dispatcher", "dispatcher-standby", "worker"):
        assert services[name]["env_file"] == ".env"  # RECHECK_* and the check's own settings, whole
        assert "init" not in services[name].get("depends_on", {}), name
        assert services[name]["command"][0] in {"config", "dispatcher", "worker"}  # never init-db
    for name in ("dispatcher", "dispatcher-standby", "worker"):
        assert services[name]["restart"] == "unless-stopped"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
    text = APP_COMPOSE.read_text()
    example = dict(dotenv_values(APP_COMPOSE.parent / ".env.example"))
    assert "${REDIS_PASSWORD:?" in text and example["REDIS_PASSWORD"] not in text
    assert example["RECHECK_CHECK"] == "uptime_checks.probe:check" and example["RECHECK_COLUMNS"] == "url"
    for service in services.values():
        assert all(port.startswith("127.0.0.1:") for port in service.get("ports", []))
