"""`recheck soak`: run the pipeline for a long time and watch memory stay flat.

Every --every seconds: the resident memory (RSS) of the dispatcher and each worker, of
redis-server and mariadbd if they run on this machine, and Redis's own used_memory. At the
end: first, last and peak per process, and the growth after warm-up (read through psutil).
Not part of the test suite: it takes minutes by design.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import redis

from bench.procs import pids_named, rss_mb
from recheck.commands.launch import launch, positive_float, positive_int
from recheck.commands.run import Runner
from recheck.shared.config import Settings
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.schema import require_table
from recheck.shared.redis.connection import connect_redis

WARM_UP_SAMPLES = 2  # growth is measured from the third sample on: caches and pools fill first


class MemoryWatch:
    """Called by the runner every second; samples every `every` seconds."""

    def __init__(self, client: redis.Redis, every: float, out):
        self.client = client
        self.every = every
        self.out = out
        self.next_sample = 0.0
        self.samples: dict[str, list[float]] = {}

    def __call__(self, elapsed: float, children) -> None:
        if elapsed < self.next_sample:
            return
        self.next_sample = elapsed + self.every
        sizes: dict[str, float] = {}
        for child in children:
            if child.process is not None and child.process.poll() is None:
                size = rss_mb(child.process.pid)
                if size is not None:
                    sizes[f"{child.role}{child.index if child.role == 'worker' else ''}"] = size
        for server in ("redis-server", "mariadbd"):
            pids = pids_named(server)
            if pids:
                sizes[server] = sum(rss_mb(pid) or 0 for pid in pids)
        with contextlib.suppress(redis.RedisError):
            sizes["redis used_memory"] = int(self.client.info("memory")["used_memory"]) / 2**20
        for name, size in sizes.items():
            self.samples.setdefault(name, []).append(size)
        line = " | ".join(f"{name} {size:.1f}" for name, size in sizes.items())
        self.out.write(f"[{elapsed:6.0f}s] MB: {line}\n")
        self.out.flush()

    def summary(self) -> str:
        lines = ["memory (MB)                 first     last     peak   growth after warm-up"]
        for name, values in self.samples.items():
            base = values[min(WARM_UP_SAMPLES, len(values) - 1)]
            growth = (values[-1] - base) / base * 100 if base else 0.0
            lines.append(
                f"  {name:<22} {values[0]:8.1f} {values[-1]:8.1f} {max(values):8.1f}   {growth:+6.1f}%"
            )
        return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="recheck soak", description="Run like `recheck run` for minutes and print memory as it goes."
    )
    parser.add_argument("--minutes", type=positive_float, default=10.0, help="how long (default 10)")
    parser.add_argument("--workers", type=positive_int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--every", type=positive_float, default=30.0, help="seconds between samples (default 30)"
    )
    args = parser.parse_args(argv)
    return launch("soak", lambda settings: soak(settings, args.minutes, args.workers, args.every))


def soak(settings: Settings, minutes: float, workers: int, every: float) -> int:
    workload = settings.default_workload()
    db = Database(workload)
    require_table(workload, db)
    db.close()
    watch = MemoryWatch(connect_redis(workload.deployment), every, sys.stdout)
    code = Runner(settings, workers, minutes * 60, on_tick=watch).run()
    print(watch.summary())
    return code
