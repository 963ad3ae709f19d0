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

REGISTER_EVERY = 10  # beats between two that add the member to its registry whatever its key said


def make_process_id() -> str:
    """host-pid-random: unique across containers, restarts and machines."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


class Presence:
    def __init__(self, store: Store, role: str, member: str, ttl_seconds: float, count: bool = False):
        """role: "worker" or "dispatcher" (which registry and heartbeat keys); count: read how
        many members the registry holds (`registered`, every REGISTER_EVERY beats)."""
        self.store = store
        self.count = count
        self.role = role
        self.member = member
        self.ttl_ms = round(ttl_seconds * 1000)
        self.started = time.time()
        self.registered = 0  # members of the role's registry at the last beat (this one included)
        self.beats = 0

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
        # Registered on the first beat and every REGISTER_EVERY; between them only where the key
        # had expired (publish_heartbeat): a SADD per workload per process per beat saved.
        # The registry's size (the write slots' writers) is read on every beat of the first
        # REGISTER_EVERY (workers starting together see each other at once), then on the
        # registering ones: a worker more or less is seen within REGISTER_EVERY beats.
        register = self.beats % REGISTER_EVERY == 0
        count = self.count and (register or self.beats < REGISTER_EVERY)
        counted = self.store.publish_heartbeat(self.role, self.member, beat, self.ttl_ms, count, register)
        if count:
            self.registered = counted
        self.beats += 1

    def withdraw(self) -> None:
        self.store.withdraw_heartbeat(self.role, self.member)
