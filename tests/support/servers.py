"""Throwaway MariaDB and Redis servers started from the machine's binaries.

Used by the tests (each session gets its own servers on free ports, in a temporary
directory, so a test can kill -9 or restart them without touching the machine's shared
services) and by `recheck bench --private` (reproducible server settings). MariaDB runs with
innodb_flush_log_at_trx_commit=2 unless told otherwise: that only changes what an OS crash
could lose, not any behaviour the tests look at.
"""

from __future__ import annotations

import atexit
import itertools
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pymysql
import redis

MARIADBD = shutil.which("mariadbd", path="/usr/sbin:/usr/bin:/usr/local/sbin") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db") or "mariadb-install-db"
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def die_with_parent() -> None:
    """In the child before exec: the kernel kills this server if the test process dies, so an
    interrupted test run leaves no server behind (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


# Ports for this process's servers, from a block of its own below the kernel's ephemeral range
# (32768-60999 on Linux). A port the kernel picked (bind to port 0) could be picked again, for
# another pytest-xdist worker's server or proxy or an outgoing connection, while a slow mariadbd
# had not bound it yet: whatever took it then answers on our server's port. Below the ephemeral
# range only free_port hands ports out, and each xdist worker (gw0, gw1, ...) has its own block
# of 1,000 from 10000, so that a Redis Cluster node's bus port (its port + 10000) stays below
# the ephemeral range too (gw0-gw9); a random start within the block keeps two test runs side
# by side apart, and a clash is taken care of by the servers' "Address already in use" retry.
_PORT_BLOCK = 1000
_FIRST_PORT = 10000
_BLOCKS = 10  # 10000-19999, their bus ports 20000-29999


def _port_block() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    first = _FIRST_PORT + _PORT_BLOCK * (index % _BLOCKS)
    return range(first, first + _PORT_BLOCK)


_next_port = itertools.count(random.randrange(_PORT_BLOCK))
# Ports Chromium refuses to load pages from (ERR_UNSAFE_PORT; its kRestrictedPorts, those above
# 1024): a dashboard served on one cannot be opened by the browser tests. 10080 is in our blocks.
BROWSER_UNSAFE_PORTS = frozenset({1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566,
                                  6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080})  # fmt: skip


def free_port() -> int:
    """A port nobody listens on now, from this process's block (see above), that a browser may
    open (BROWSER_UNSAFE_PORTS)."""
    block = _port_block()
    for _ in range(_PORT_BLOCK):
        port = block[next(_next_port) % _PORT_BLOCK]
        if port in BROWSER_UNSAFE_PORTS:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use (another run's server, or a connection still closing)
                continue
            return port
    raise RuntimeError(f"no free port in {block.start}-{block.stop - 1} (this test process's block)")


def wait_for(condition, timeout: float, what: str, interval: float = 0.05):
    """Poll condition() until it returns a truthy value; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = "never evaluated"
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
            last = f"returned {value!r}"
        except Exception as error:  # the server may not be up yet; keep the reason
            last = f"raised {type(error).__name__}: {error}"
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:g}s waiting for {what} (last attempt {last})")


_template: Path | None = None
_template_lock = threading.Lock()


def installed_template() -> Path:
    """A data directory mariadb-install-db made, once per process (removed at its exit)."""
    global _template
    with _template_lock:
        if _template is None:
            root = Path(tempfile.mkdtemp(prefix="recheck-mariadb-template-"))
            atexit.register(shutil.rmtree, root, ignore_errors=True)
            command = [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={root / 'data'}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ]
            if os.geteuid() == 0:
                command.append("--user=root")
            # Its own temporary folder: bootstraps running side by side (pytest -n) in one /tmp
            # clash on temporary table names ("Unknown table 'mysql.tmp_user_sys'").
            (root / "tmp").mkdir()
            environment = {**os.environ, "TMPDIR": str(root / "tmp")}
            subprocess.run(command, check=True, capture_output=True, timeout=120, env=environment)
            _template = root / "data"
        return _template


class MariaDBServer:
    def __init__(self, root: Path, port: int | None = None, extra: tuple[str, ...] = ()):
        self.root = Path(root)
        self.started_once = False
        self.port = port or free_port()
        self.extra = extra
        self.ssl: dict | None = None  # client TLS options, when the server requires TLS
        self.datadir = self.root / "data"
        self.tmpdir = self.root / "tmp"
        self.process: subprocess.Popen | None = None
        # A Unix socket's path may be 107 bytes at most: a deep temporary folder (pytest's numbered
        # ones grow with every run) gets its socket in /tmp instead.
        socket_path = self.root / "mysqld.sock"
        self.socket = socket_path if len(str(socket_path)) <= 100 else Path(f"/tmp/mariadbd-{self.port}.sock")

    def install(self) -> None:
        """A fresh data directory: a copy of this process's one mariadb-install-db (an install takes
        about a second, a copy about 0.3 s: the fault tests start a server each)."""
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(installed_template(), self.datadir)

    def start(self, timeout: float = 60) -> None:
        if not self.datadir.exists():
            self.install()
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        command = [
            MARIADBD,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.socket}",
            f"--tmpdir={self.tmpdir}",
            f"--pid-file={self.root / 'mysqld.pid'}",
            f"--log-error={self.root / 'error.log'}",
            "--skip-log-bin",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=512M",
            "--innodb-log-file-size=256M",
            "--innodb-flush-log-at-trx-commit=2",
            "--max-connections=500",
            *self.extra,
        ]
        if os.geteuid() == 0:
            command.append("--user=root")
        for attempt in range(3):  # the port may be taken before the server binds it (parallel sessions)
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent
            )
            if self._wait_ready(timeout):
                self.started_once = True
                return
            if self.started_once or attempt == 2:  # a restart must keep its port: its clients know it
                raise RuntimeError(f"mariadbd could not listen on {self.port}; see {self.root}/error.log")
            self.port = free_port()
            command = [f"--port={self.port}" if c.startswith("--port=") else c for c in command]

    def _wait_ready(self, timeout: float) -> bool:
        """True once it answers; False if it exited because its port was taken."""
        deadline, last = time.monotonic() + timeout, "never asked"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if "Address already in use" in self._log_tail():
                    return False
                raise RuntimeError(
                    f"mariadbd exited with {self.process.returncode}; see {self.root}/error.log"
                )
            try:
                if self._ready():
                    return True
            except Exception as error:  # not up yet
                last = f"{type(error).__name__}: {error}"
            time.sleep(0.05)
        raise TimeoutError(
            f"timed out after {timeout:g}s waiting for mariadbd on port {self.port} ({last}); "
            f"the end of {self.root}/error.log:\n{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        log = self.root / "error.log"
        return log.read_text(errors="replace")[-3000:] if log.exists() else "(no error.log)"

    def _ready(self) -> bool:
        """It answers, and it is this server (another session's may have taken the port first).

        connect_timeout also bounds the handshake: 5 s, not 1, so a server slow to answer on a
        loaded 2-core machine (four sessions starting theirs at once) is not taken for a stranger."""
        with (
            pymysql.connect(
                host="127.0.0.1", port=self.port, user="root", connect_timeout=5, ssl=self.ssl
            ) as conn,
            conn.cursor() as cursor,
        ):
            cursor.execute("SELECT @@datadir")
            return Path(cursor.fetchone()[0]).resolve() == self.datadir.resolve()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def url(self, database: str, user: str = "root", password: str = "") -> str:
        auth = f"{user}:{password}" if password else user
        return f"mysql://{auth}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str | None = None, **kwargs) -> pymysql.connections.Connection:
        """As root (the tests' administrator); pass ssl=... when the server requires TLS."""
        return pymysql.connect(
            host="127.0.0.1",
            port=self.port,
            user="root",
            database=database,
            autocommit=True,
            ssl=self.ssl,
            **kwargs,
        )


class RedisServer:
    def __init__(self, root: Path, port: int | None = None, extra: tuple[str, ...] = (), pick_port=free_port):
        self.root = Path(root)
        self.pick_port = pick_port  # another port, should the first be taken before the server binds it
        self.port = port or pick_port()
        self.extra = extra
        self.started_once = False
        self.password: str | None = None
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        command = [
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.root),
            "--logfile", str(self.root / "redis.log"),
            *self.extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent
        )
        deadline, last = time.monotonic() + timeout, "never asked"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:  # it could not listen: the port was taken meanwhile
                if self.started_once:  # a restart must keep its port: its clients know it
                    raise RuntimeError(f"redis-server on port {self.port} exited: see {self.root}/redis.log")
                self.port = self.pick_port()
                command[command.index("--port") + 1] = str(self.port)
                self.process = subprocess.Popen(
                    command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent
                )
                continue
            try:  # ours, not another test session's server that took the port first
                if self.client(socket_timeout=1).info("server")["process_id"] == self.process.pid:
                    self.started_once = True
                    return
                last = "another redis-server answers on that port"
            except Exception as error:  # not up yet
                last = f"{type(error).__name__}: {error}"
            time.sleep(0.05)
        raise TimeoutError(
            f"timed out after {timeout:g}s waiting for redis-server on port {self.port} ({last})"
        )

    def client(self, **kwargs) -> redis.Redis:
        """The tests' administrator client (default user, or the password set in .password)."""
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, **kwargs)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def url(self, db: int = 0) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/{db}"


REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    for _ in range(200):
        port = free_port()
        if port + 10_000 > 65_535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 10_000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


class RedisCluster:
    """A real Redis Cluster of `masters` masters with `replicas` replicas each, one redis-server
    per node, created with `redis-cli --cluster create` (short node timeout: failovers in ~2 s)."""

    def __init__(self, root: Path, masters: int = 3, replicas: int = 1, node_timeout_ms: int = 1000):
        self.root = Path(root)
        self.masters = masters
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.nodes: list[RedisServer] = []
        for _ in range(masters * (1 + replicas)):
            port = cluster_port()
            while port in {node.port for node in self.nodes}:  # a port the OS handed out twice:
                port = cluster_port()  # two nodes would share a folder and its nodes.conf lock
            extra = (
                "--cluster-enabled", "yes",
                "--cluster-config-file", f"nodes-{port}.conf",
                "--cluster-node-timeout", str(node_timeout_ms),
            )  # fmt: skip
            self.nodes.append(RedisServer(self.root / f"node-{port}", port, extra, pick_port=cluster_port))

    def start(self, timeout: float = 60) -> None:
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [REDIS_CLI, "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas),
             "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout,
        )  # fmt: skip
        wait_for(self.healthy, timeout, "the redis cluster to be ok on every node")

    def healthy(self) -> bool:
        """Every live node says cluster_state:ok and knows every master."""
        for node in self.live_nodes():
            info = node.client().cluster("info")
            if info.get("cluster_state") != "ok":
                return False
        return True

    def live_nodes(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.process and n.process.poll() is None]

    def masters_now(self) -> list[RedisServer]:
        """The live nodes that are masters at this moment."""
        return [n for n in self.live_nodes() if n.client().info("replication").get("role") == "master"]

    def master_of(self, key: str) -> RedisServer:
        """The live master that owns the slot of `key`."""
        slot = self.live_nodes()[0].client().cluster("keyslot", key)
        for node in self.masters_now():
            for start, end, *_ in node.client().cluster("slots"):
                if start <= slot <= end and _[0][1] == node.port:
                    return node
        raise LookupError(f"no live master owns slot {slot}")

    def url(self) -> str:
        return self.nodes[0].url()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()
