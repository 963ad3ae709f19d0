"""`recheck soak`: run the pipeline for a long time and watch memory stay flat.

Every --every seconds: the resident memory (RSS) of the dispatcher and each worker, of
redis-server and mariadbd if they run on this machine, and Redis's own used_memory. At the
end: first, last and peak per process, and the growth after warm-up. Read from /proc, so
Linux only. Not part of the test suite: it takes minutes by design.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import redis

WARM_UP_SAMPLES = 2  # growth is measured from the third sample on: caches and pools fill first


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def pids_named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


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
