"""Test settings and the recheck processes a test starts, as compose would start them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from recheck.shared.config import ENV_PREFIX, Workload
from tests.support.helpers import REPO

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
    "idle_poll_interval": 0.02,  # test_idle runs the default
    "shutdown_timeout": 5.0,
    "retry_base": 0.2,
    "retry_max": 2.0,
    "metrics_port": 0,  # tests that want them choose free ports
    "dashboard_port": 0,
}

# What a bound on a takeover or a recovery adds for the processes themselves: on a 2-core CI
# machine with neighbours, a dispatcher's heartbeat thread woke 0.35 s past a 1.75 s bound that
# had 0.5 s for this (2026-11-28). A broken takeover (a lease never taken, or only at its second
# expiry) still fails it.
SCHEDULING_SLACK_S = 1.5


class Processes:
    """Starts recheck roles exactly as compose does (`python -m recheck.dispatcher|recheck.workers`)."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.started: list[tuple[subprocess.Popen, Path]] = []

    def start(self, role: str, settings: Workload, *args: str, env: dict | None = None) -> subprocess.Popen:
        module = {"dispatcher": "recheck.dispatcher", "worker": "recheck.workers"}.get(role, role)
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

    def wait_started(self, process: subprocess.Popen, timeout: float = 30) -> None:
        """Until the process has logged its start (imports done, servers reached): on a busy
        machine that can take seconds, which a test's own short waits must not include."""
        deadline = time.monotonic() + timeout
        while " started: " not in self.log_of(process):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{process.args} did not start:\n{self.log_of(process)[-2000:]}")
            time.sleep(0.05)

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
