"""deploy/kubernetes/base run for real with `podman kube play` (issue 49), beside a MariaDB and a
Redis container on a network of the test's own. `make test-compose` runs it with the compose test.

What Podman 4.3 runs of the base, and what it cannot (tests/support/kube.py's `for_podman` says
why each): the init-db Job's pod as a Pod; both Deployments with their replicas (two dispatchers,
two workers), their ConfigMap and Secrets as environment, the liveness probe as a Podman health
check, the read-only root with its emptyDir, restartPolicy Always; not the init containers (run
by themselves here), containerPorts, readiness, Services, budgets or autoscalers.

1. The init containers' wait, started before the table exists, keeps waiting; the init-db Job's
   pod creates the table and the least-privilege user; the wait then ends 0.
2. The Deployments played: every pod's liveness probe passes, rows seeded in a container are all
   checked.
3. A worker's process killed (SIGKILL from outside, as an OOM kill would) while it holds rows:
   the dispatcher reclaims them, no row is later than the README's bound, and the container is
   started again by its restart policy and is healthy.
4. A worker stopped as Kubernetes stops a pod (SIGTERM, the pod's grace period): exit 0, having
   written back what it held.
5. `podman kube down`, the servers, the network and the secrets removed: nothing left.
"""

from __future__ import annotations

import re
import secrets
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pymysql
import pytest
import yaml

from tests.containers.test_compose_up import CHECKING_S, KILLED_WORKER_BOUND_S, Lateness
from tests.support.helpers import REPO, scalar
from tests.support.kube import for_podman, podman_secret, render, wait_container
from tests.support.podman import MARIADB, REDIS, Podman, phase, reclaims_since
from tests.support.servers import wait_for

IMAGE = "localhost/recheck:local"
NETWORK = "recheck-ci-kube"
SERVERS = ("recheck-ci-kube-mysql", "recheck-ci-kube-redis")
WAIT = "recheck-ci-kube-wait"
SECRETS = ("recheck", "recheck-admin")
ROWS = 2000


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    podman = Podman(tmp_path_factory.mktemp("podman"))
    with phase("base images (built from Debian's packages once per machine, then cached)", "kube test"):
        podman.base_images()
    with phase("image (deploy/Dockerfile, the example check built in)", "kube test"):
        podman.build_recheck(IMAGE, REPO / "deploy" / "example-check")
    return podman


def remove_everything(podman: Podman, played: list[Path]) -> None:
    """Whatever this test (or a killed run of it) left: pods, containers, network, secrets."""
    for path in played:
        if path.exists():
            podman("kube", "down", str(path), check=False)
    pods = podman("pod", "ps", "-q", "--filter", "name=^recheck-", check=False).split()
    if pods:
        podman("pod", "rm", "-f", "-t", "0", *pods, check=False)
    podman("rm", "-f", "-v", "-t", "0", WAIT, *SERVERS, check=False)
    podman("network", "rm", "-f", NETWORK, check=False)
    for name in SECRETS:
        podman("secret", "rm", name, check=False)


def leftovers(podman: Podman) -> dict[str, list[str]]:
    return {
        "pods": podman("pod", "ps", "-q", "--filter", "name=^recheck-").split(),
        "containers": [
            name
            for name in podman("ps", "-a", "--format", "{{.Names}}").split()
            if name.startswith("recheck-")
        ],
        "networks": [
            name for name in podman("network", "ls", "--format", "{{.Name}}").split() if name == NETWORK
        ],
        "secrets": [
            name for name in podman("secret", "ls", "--format", "{{.Name}}").split() if name in SECRETS
        ],
    }


def exited(podman: Podman, container: str) -> int | None:
    """The container's exit code once it has exited, else None."""
    state = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", container).split()
    return int(state[1]) if state[0] in ("exited", "stopped") else None


def exit_code(podman: Podman, container: str, timeout: float, what: str) -> int:
    """The container's exit code, once it has exited within timeout seconds."""
    box = wait_for(
        lambda: (code,) if (code := exited(podman, container)) is not None else None, timeout, what, 0.5
    )
    return box[0]


def holding_worker(podman: Podman, redis_password: str) -> tuple[str, datetime] | None:
    """(name, the UTC time just before its pause) of a worker container frozen (`podman pause`)
    while it holds rows (its processing set in Redis is not empty), else None; see
    test_compose_up.frozen_holder for why frozen. A worker's id starts with its hostname, the
    pod's name."""
    for index in (0, 1):
        name, host = f"recheck-worker-pod-{index}-worker", f"recheck-worker-pod-{index}"
        script = f"for k in $(redis-cli --scan --pattern '*processing:{host}-*'); do redis-cli scard $k; done"
        frozen_at = datetime.now(UTC)
        podman("pause", name)
        holds = False
        try:
            counts = podman("exec", "-e", f"REDISCLI_AUTH={redis_password}", SERVERS[1], "sh", "-c", script)
            holds = any(count != "0" for count in counts.split())
        finally:
            if not holds:
                podman("unpause", name)
        if holds:
            return name, frozen_at
    return None


def logs(podman: Podman, container: str, *options: str) -> str:
    """What the container printed, stdout and stderr together (recheck logs to stderr)."""
    run = ["podman", "logs", *options, container]
    return subprocess.run(
        run, env=podman.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ).stdout


def healthy(podman: Podman, container: str) -> bool:
    """Its liveness probe, run now (Podman runs health checks on a systemd timer; none here).
    One stuck run (seen in CI right after the compose test: 60 s once, 20 s cut short twice in
    one run) counts as a failed attempt after 10 s, so the caller's wait tries again instead of
    spending its budget on it (a run that answers takes a second or two)."""
    run = ["podman", "healthcheck", "run", container]
    try:
        return subprocess.run(run, env=podman.env, capture_output=True, timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        print(f"[kube test] podman healthcheck run {container}: no answer within 10 s")
        return False


def diagnose(podman: Podman, names: list[str]) -> None:
    """What the pods were doing when a wait ran out: their states, and the probe's own words."""
    print(podman("ps", "-a", "--format", "{{.Names}} {{.Status}}", check=False, timeout=60))
    for name in names:
        try:
            print(f"[kube test] {name}: {podman('exec', name, 'recheck', 'health', check=False, timeout=20)}")
        except subprocess.TimeoutExpired:
            print(f"[kube test] {name}: recheck health did not end within 20 s")


def dispatcher_logs(podman: Podman) -> str:
    return "".join(logs(podman, f"recheck-dispatcher-pod-{i}-dispatcher") for i in (0, 1))


def test_the_kubernetes_base_played_on_podman(podman, tmp_path):
    init_yaml, rest_yaml = tmp_path / "init-db.yaml", tmp_path / "recheck.yaml"
    names = [f"recheck-{role}-pod-{i}-{role}" for role in ("dispatcher", "worker") for i in (0, 1)]
    remove_everything(podman, [])
    volumes = podman.volumes()
    root_password, app_password, redis_password = (secrets.token_hex(12) for _ in range(3))
    documents = render(REPO / "deploy" / "kubernetes" / "base")
    for doc in documents:  # the user's settings in the ConfigMap: a per-row check of 0.1 s a row
        if doc["kind"] == "ConfigMap":
            doc["data"].update(RECHECK_CHECK="recheck.workers.demo:sleepy", DEMO_CHECK_SECONDS="0.1")
    init_pod, rest = for_podman(documents, IMAGE)
    init_yaml.write_text(yaml.safe_dump_all([d for d in rest if d["kind"] == "ConfigMap"] + [init_pod]))
    rest_yaml.write_text(yaml.safe_dump_all(rest))
    # The Secrets secret.example.yaml describes, with this run's passwords.
    example = {doc["metadata"]["name"]: doc["stringData"] for doc in yaml.safe_load_all(
        (REPO / "deploy" / "kubernetes" / "base" / "secret.example.yaml").read_text())}  # fmt: skip
    values = {
        "recheck": {
            "RECHECK_MYSQL_URL": f"mysql://recheck:{app_password}@mysql:3306/recheck",
            "RECHECK_REDIS_URL": f"redis://:{redis_password}@redis:6379/0",
        },
        "recheck-admin": {
            "RECHECK_MYSQL_URL": f"mysql://root:{root_password}@mysql:3306/recheck",
            "RECHECK_APP_PASSWORD": app_password,
        },
    }
    assert {name: set(keys) for name, keys in example.items()} == {n: set(v) for n, v in values.items()}
    try:
        with phase("servers: MariaDB and Redis on the test's network", "kube test"):
            podman("network", "create", NETWORK)
            podman("run", "-d", "--name", SERVERS[0], "--network", NETWORK, "--network-alias", "mysql",
                   "-e", f"MYSQL_ROOT_PASSWORD={root_password}", "-e", "MYSQL_DATABASE=recheck",
                   "-p", "127.0.0.1::3306", MARIADB, "--skip-name-resolve")  # fmt: skip
            podman("run", "-d", "--name", SERVERS[1], "--network", NETWORK, "--network-alias", "redis",
                   REDIS, "redis-server", "--requirepass", redis_password, "--save", "")  # fmt: skip
            port = int(podman("port", SERVERS[0], "3306").strip().rsplit(":", 1)[1])

            def connect():
                return pymysql.connect(host="127.0.0.1", port=port, user="root", password=root_password,
                                       database="recheck", autocommit=True)  # fmt: skip

            def answers() -> bool:
                try:
                    connect().close()
                    return True
                except pymysql.err.OperationalError:
                    return False

            wait_for(answers, 120, "MariaDB to accept the root login", interval=0.5)
            for name, data in values.items():
                path = tmp_path / f"{name}.json"
                path.write_text(podman_secret(data))
                podman("secret", "create", name, str(path))

        with phase("the init containers' wait, then the init-db Job's pod, then the wait ends", "kube test"):
            wait = wait_container(documents, "recheck-worker")
            config = next(doc["data"] for doc in rest if doc["kind"] == "ConfigMap")
            env = [
                arg
                for key, value in {**config, **values["recheck"]}.items()
                for arg in ("-e", f"{key}={value}")
            ]
            shell, *script = wait["command"]
            podman(
                "run", "-d", "--name", WAIT, "--network", NETWORK, *env, "--entrypoint", shell, IMAGE, *script
            )
            wait_for(
                lambda: "waiting for the table" in logs(podman, WAIT), 30, "the wait to wait", interval=0.5
            )
            assert exited(podman, WAIT) is None
            podman("kube", "play", "--network", NETWORK, str(init_yaml))
            job = f"{init_pod['metadata']['name']}-init-db"
            code = exit_code(podman, job, 120, "the init-db pod to end")
            printed = logs(podman, job)
            assert code == 0, printed
            assert "user 'recheck'@'%' may SELECT and UPDATE recheck.user_block_status" in printed, printed
            assert exit_code(podman, WAIT, 30, "the wait to end") == 0

        with phase(
            "the Deployments played (2 dispatchers, 2 workers), healthy; 2,000 rows all checked", "kube test"
        ):
            podman("kube", "play", "--network", NETWORK, str(rest_yaml))

            every = "every pod's liveness probe (recheck health) to pass"
            wait_for(lambda: all(healthy(podman, name) for name in names), 120, every, interval=1)
            admin = values["recheck-admin"]["RECHECK_MYSQL_URL"]
            podman("run", "--rm", "--network", NETWORK, "-e", f"RECHECK_MYSQL_URL={admin}", IMAGE, "seed",
                   "--rows", str(ROWS))  # fmt: skip
            with connect() as conn:
                unchecked = "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0"
                wait_for(lambda: scalar(conn, unchecked) == 0, 60, "every row checked once", interval=0.5)

        with phase(
            "a worker's process killed while it holds rows: reclaimed, restarted, healthy", "kube test"
        ):
            watch = Lateness(connect, "user_block_status")
            watch.start()
            wait_for(lambda: len(watch.samples) >= 5, 10, "the lateness watch's first samples", interval=0.2)
            holder = lambda: holding_worker(podman, redis_password)  # noqa: E731
            victim, frozen_at = wait_for(holder, 20, "a worker holding rows", interval=0.2)
            podman.kill_frozen(victim)  # from outside, as the OOM killer would
            host = victim.removesuffix("-worker")  # its worker id starts with the pod's name
            since = lambda: reclaims_since(dispatcher_logs(podman), f"{host}-", frozen_at)  # noqa: E731
            reclaims = wait_for(since, 30, "the reclaim", interval=1)
            assert reclaims[0] > 0, reclaims
            wait_for(lambda: healthy(podman, victim), 30, "the restarted worker to be healthy", interval=1)
            assert int(podman("inspect", "--format", "{{.RestartCount}}", victim).strip()) >= 1
            late = "SELECT COUNT(*) FROM user_block_status WHERE next_check_at < NOW(3) - INTERVAL 1 SECOND"
            with connect() as conn:  # every reclaimed row checked again: none more than 1 s late
                wait_for(lambda: scalar(conn, late) == 0, KILLED_WORKER_BOUND_S + CHECKING_S,
                         "every row back within 1 s of its due time", interval=0.2)  # fmt: skip
            worst = watch.worst()
            print(f"[kube test] worst lateness around the kill: {worst:.2f} s ({len(watch.samples)} samples)")
            assert worst <= KILLED_WORKER_BOUND_S + CHECKING_S, worst

        with phase("a worker stopped as Kubernetes stops a pod: SIGTERM, exit 0", "kube test"):
            other = next(name for name in names if "worker" in name and name != victim)
            podman("stop", "--time", "30", other, timeout=60)
            assert exited(podman, other) == 0
            assert re.search(r"stopped: \d+ checked, .* returned", logs(podman, other))
    except BaseException:
        diagnose(podman, names)
        for name in names:
            print(logs(podman, name, "--tail", "40")[-6000:])
        raise
    finally:
        with phase("kube down, servers, network and secrets removed", "kube test"):
            remove_everything(podman, [rest_yaml, init_yaml])
    assert leftovers(podman) == {"pods": [], "containers": [], "networks": [], "secrets": []}
    assert podman.volumes() - volumes == set()
