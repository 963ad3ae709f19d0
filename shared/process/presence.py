"""Heartbeats: a process shows it is alive with a short-TTL key plus an entry in a registry set.

The reclaimer treats a registered worker without its key as dead; `recheck status` lists the
live ones with the facts each put in its key.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Sequence

from recheck.shared.core.records import DispatcherBeat, WorkerBeat
from recheck.shared.redis.store import Store, by_client

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
        publish_together([(self, beat)])

    def flags(self) -> tuple[bool, bool]:
        """(count, register) for the next beat."""
        # Registered on the first beat and every REGISTER_EVERY; between them only where the key
        # had expired (Store.heartbeat_replies): a SADD per workload per process per beat saved.
        # The registry's size (the write slots' writers) is read on every beat of the first
        # REGISTER_EVERY (workers starting together see each other at once), then on the
        # registering ones: a worker more or less is seen within REGISTER_EVERY beats.
        register = self.beats % REGISTER_EVERY == 0
        return self.count and (register or self.beats < REGISTER_EVERY), register

    def withdraw(self) -> None:
        self.store.withdraw_heartbeat(self.role, self.member)


def publish_together(beats: Sequence[tuple[Presence, WorkerBeat | DispatcherBeat]]) -> None:
    """Publish several heartbeats (a process's, one per workload) in one round trip per Redis
    client, plus one more only when an expired key's member must register again: ten workloads
    cost a process one round trip a beat, not ten. A Redis away raises for all of its beats."""
    for group in by_client(beats, lambda pair: pair[0].store):
        client = group[0][0].store.client
        pipe = client.pipeline(transaction=False)
        staged = []
        for presence, beat in group:
            count, register = presence.flags()
            store = presence.store
            replies = store.stage_heartbeat(pipe, presence.role, presence.member, beat, presence.ttl_ms,
                                            count, register)  # fmt: skip
            staged.append((presence, count, register, replies))
        replies = pipe.execute()
        again = client.pipeline(transaction=False)
        at = 0
        for presence, count, register, many in staged:
            mine, at = replies[at : at + many], at + many
            counted = presence.store.heartbeat_replies(
                again, mine, presence.role, presence.member, count, register
            )
            if count:
                presence.registered = counted
            presence.beats += 1
        if len(again):
            again.execute()
