"""Heartbeats: a process shows it is alive with a short-TTL key plus an entry in a registry set.

The reclaimer treats a registered worker without its key as dead; `recheck status` lists the
live ones with the facts each put in its key.
"""

from __future__ import annotations

import os
import secrets
import socket
import time

from recheck.shared.core.records import DispatcherBeat, WorkerBeat
from recheck.shared.redis.store import Store


def make_process_id() -> str:
    """host-pid-random: unique across containers, restarts and machines."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


class Presence:
    def __init__(self, store: Store, role: str, member: str, ttl_seconds: float):
        """role: "worker" or "dispatcher" (which registry and heartbeat keys)."""
        self.store = store
        self.role = role
        self.member = member
        self.ttl_ms = round(ttl_seconds * 1000)
        self.started = time.time()
        self.registered = 0  # members of the role's registry at the last beat (this one included)

    @property
    def key(self) -> str:
        """The heartbeat key (of the first partition, when the workload has several)."""
        return self.store.presence_keys(self.role, self.member)[0]

    def identity(self) -> dict[str, str | int | float]:
        """The fields every heartbeat starts with: who beats (WorkerBeat, DispatcherBeat)."""
        return {
            "id": self.member,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": round(self.started, 3),
        }

    def publish(self, beat: WorkerBeat | DispatcherBeat) -> None:
        self.registered = self.store.publish_heartbeat(self.role, self.member, beat, self.ttl_ms)

    def withdraw(self) -> None:
        self.store.withdraw_heartbeat(self.role, self.member)
