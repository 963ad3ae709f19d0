"""`recheck health`: is the recheck process of this container alive and heartbeating?

A process started with RECHECK_HEALTH_FILE set writes its role, pid and heartbeat key there
once it is up, and removes the file when it begins to stop. The health command, run by the
container engine in the same container and environment, answers from two facts: the pid still
exists, and the heartbeat key (refreshed every RECHECK_HEARTBEAT_INTERVAL, expiring after
RECHECK_HEARTBEAT_TTL) is still in Redis. A process that is stopped, killed, paused or cut off
from Redis fails the check within the TTL.

One file per process: compose runs one process per container; `recheck run` gives each of its
children a file of its own next to RECHECK_HEALTH_FILE, and the check then covers all of them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recheck.shared.redis.connection import REDIS_DOWN


@dataclass(frozen=True)
class HealthRecord:
    role: str
    process_id: str
    pid: int
    heartbeat_keys: tuple[str, ...]  # one per workload the process serves: all must be alive

    @classmethod
    def parse(cls, text: str) -> HealthRecord:
        data = json.loads(text)
        keys = data["keys"] if "keys" in data else [data["key"]]  # "key": a file of 0.1 (one workload)
        record = cls(data["role"], data["id"], data["pid"], tuple(keys))
        valid = isinstance(record.pid, int) and record.heartbeat_keys
        if not (valid and all(isinstance(key, str) for key in record.heartbeat_keys)):
            raise ValueError("pid must be a number and keys a list of strings")
        return record

    def dump(self) -> str:
        keys = list(self.heartbeat_keys)
        fields = {"role": self.role, "id": self.process_id, "pid": self.pid, "keys": keys}
        return json.dumps(fields)


STARTED = ".started"  # beside the health file: the process got past its start (kept when it stops)


def started_marker(path: str | Path) -> Path:
    """Where a process notes that it started working (`recheck run` reads it: an exit code 2
    means "bad configuration" only from a child that never got that far)."""
    path = Path(path)
    return path.with_name(path.name + STARTED)


class HealthFile:
    def __init__(self, path: str):
        self.path = Path(path) if path else None

    def write(self, record: HealthRecord) -> None:
        if self.path is None:
            return
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(record.dump())
        partial.replace(self.path)  # atomic: the check never reads half a file
        started_marker(self.path).touch()

    def remove(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def health_files(path: Path) -> list[Path]:
    """The file itself (one process per container, as compose runs it), or else the files of the
    processes `recheck run` started here (`PATH.dispatcher-0`, `PATH.worker-0`, ...)."""
    if path.exists():
        return [path]
    return sorted(
        p for p in path.parent.glob(f"{path.name}.*") if p.suffix not in (".partial", STARTED) and p.is_file()
    )


def check_all(path: Path, client: Any) -> list[tuple[bool, str]]:
    """(healthy, one line saying why) for every recheck process of this container."""
    return [check_health(file, client) for file in health_files(path) or [path]]


def check_health(path: Path, client: Any) -> tuple[bool, str]:
    """(healthy, one line saying why)."""
    try:
        record = HealthRecord.parse(path.read_text())
    except FileNotFoundError:
        return False, f"no recheck process is running here ({path} is missing: not started yet, or stopping)"
    except (OSError, ValueError, KeyError, TypeError) as error:
        return False, f"cannot read {path}: {error}"
    who = f"{record.role} {record.process_id} (pid {record.pid})"
    if not pid_exists(record.pid):
        return False, f"{who} is gone"
    try:
        ttl_ms = min(client.pttl(key) for key in record.heartbeat_keys)  # every workload's lane beats
    except REDIS_DOWN as error:
        return False, f"{who}: cannot ask Redis for its heartbeat ({type(error).__name__}: {error})"
    if ttl_ms < 0:
        return False, f"{who} has not heartbeaten in time: stuck, paused or cut off from Redis"
    return True, f"{who} is alive, heartbeat fresh ({ttl_ms / 1000:.1f} s left)"
