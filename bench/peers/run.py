"""A peer's run inside `recheck bench`: its workers, its job's process, and its progress.

The workers are Celery's or RQ's own command-line workers (`celery worker --pool solo`, `rq
worker` with SimpleWorker), --workers of them; the job (bench/peers/enqueue.py) waits for
them, and starts its read and enqueue right after the bench's first sample, so that every
figure from that sample on includes the job. With --peer-job first (the default) the workers
are held (SIGSTOP) from then until the job has enqueued every due id, and let go (SIGCONT) the
moment it says so: their drain alone is a pure drain of a full queue, and the read and enqueue
come before it, one after the other (an idle worker's pending pop may still take one task from
Redis while it is held: it runs it once let go). With --peer-job overlap the workers take tasks
while the job is still reading and enqueueing, as beside a periodic job in production.

The peers publish no recheck heartbeat: their progress is the server's count of updated rows
(Handler_update) since the run began, O(1) a sample (server-wide: each of their checks updates
its row once, and nothing else writes during a run on --private servers). The drain figures
come from the table itself after the run, as for every strategy.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

from bench.peers import CELERY_KEY_PREFIX, CELERY_PEERS, QUEUE, RQ_KEY_PREFIX
from bench.peers.enqueue import READY_TIMEOUT
from bench.runs import Run
from recheck.shared.views.buckets import SECONDS_BUCKETS

CHECKOUT = Path(__file__).resolve().parents[2]  # celery -A and rq import bench.peers from here


def worker_command(strategy: str, index: int) -> list[str]:
    if strategy in CELERY_PEERS:  # Celery's defaults otherwise: early ack, prefetch 4 x the CPUs
        return [sys.executable, "-m", "celery", "-A", "bench.peers.celery_app", "worker", "--pool", "solo",
                "--loglevel", "WARNING", "--queues", QUEUE, "--hostname", f"bench{index}@%h"]  # fmt: skip
    return [sys.executable, "-m", "rq.cli", "worker", "--worker-class", "rq.worker.SimpleWorker",
            "--quiet", "--name", f"bench{index}", QUEUE]  # fmt: skip


def clear_peer_keys(client) -> None:
    """Every key of the peers' brokers (theirs alone: their own prefixes), before and after a run."""
    for prefix in (CELERY_KEY_PREFIX, f"{RQ_KEY_PREFIX}:"):
        found = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(found), 1000):
            client.delete(*found[start : start + 1000])


class PeerRun(Run):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines: queue.Queue[str | None] = queue.Queue()  # the job's stdout, line by line
        self.went = False
        self.updated_before = self.rows_updated()

    def rows_updated(self) -> int:
        return int(self.db.query(self.queries.bench_rows_updated)[0][1])

    def start(self) -> None:
        path = os.pathsep.join(p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH", "")) if p)
        brokers = {"RQ_KEY_PREFIX": RQ_KEY_PREFIX, "RQ_REDIS_URL": self.settings.deployment.redis_url}
        env = {**os.environ, **self.settings.env_overrides(), "PYTHONPATH": path, **brokers}
        for index in range(self.config.workers):
            with open(self.log_dir / f"{self.strategy}-worker{index}.log", "wb") as log:
                self.processes[f"worker{index}"] = subprocess.Popen(
                    worker_command(self.strategy, index), env=env, stdout=log, stderr=subprocess.STDOUT
                )
        job = [sys.executable, "-m", "bench.peers.enqueue", self.strategy, str(self.config.workers),
               str(self.config.batch)]  # fmt: skip
        with open(self.log_dir / f"{self.strategy}-enqueuer.log", "wb") as log:
            enqueuer = subprocess.Popen(
                job, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
            )
        self.processes["enqueuer"] = enqueuer
        threading.Thread(target=self._read_lines, args=(enqueuer.stdout,), daemon=True).start()
        said = self._next_line(READY_TIMEOUT + 10)
        if said != "ready":
            self.stop()
            raise RuntimeError(f"{self.strategy}: its workers did not come up ({said!r}); see {self.log_dir}")

    def _read_lines(self, stream) -> None:
        for line in stream:
            said = line.decode().strip()
            if said.startswith("{"):  # the job's report: everything is enqueued
                self._hold(False)
            self.lines.put(said)
        self.lines.put(None)

    def _hold(self, held: bool) -> None:
        """Stop or continue the workers (--peer-job first)."""
        if self.config.peer_job != "first":
            return
        for name, process in self.processes.items():
            if name.startswith("worker") and process.poll() is None:
                os.kill(process.pid, signal.SIGSTOP if held else signal.SIGCONT)

    def _next_line(self, timeout: float) -> str | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def progress(self) -> dict:
        """Rows updated since the run began; no lateness (a drain's is not measured)."""
        return {"takes": [], "checked": self.rows_updated() - self.updated_before, "duplicates": 0,
                "conflicts": 0, "buckets": [0] * (len(SECONDS_BUCKETS) + 1), "lateness_max": 0.0}  # fmt: skip

    def sample(self, started: float) -> dict:
        point = super().sample(started)
        if not self.went:  # the first sample is taken: the job may start its read
            self.went = True
            self._hold(True)
            enqueuer = self.processes["enqueuer"]
            try:
                enqueuer.stdin.write(b"go\n")
                enqueuer.stdin.flush()
            except BrokenPipeError:  # it died: its exit code and log are reported after the run
                pass
        return point

    def stop(self) -> None:
        self._hold(False)  # a stopped worker would not see its SIGTERM
        said = self._next_line(0) if self.went else None
        if said and said.startswith("{"):
            self.job = json.loads(said)
        enqueuer = self.processes.get("enqueuer")
        if enqueuer is not None and enqueuer.stdin and not enqueuer.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                enqueuer.stdin.close()  # it exits by itself on EOF; SIGTERM comes too
        super().stop()
        clear_peer_keys(self.store.client)
