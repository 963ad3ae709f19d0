"""Heartbeats: a process shows it is alive with a short-TTL key plus an entry in a registry set.

The reclaimer treats a registered worker without its key as dead; `recheck status` lists the
live ones with the facts each put in its key.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from collections.abc import Callable, Sequence

from recheck.shared.core.records import DispatcherBeat, WorkerBeat
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.redis.store import Store, by_client

REGISTER_EVERY = 10  # beats between two that add the member to its registry whatever its key said
# A quiet member (a worker lane holding nothing, whose last take found nothing; a standby, or a
# leader whose last poll read nothing) publishes one heartbeat in QUIET_EVERY, its key living
# (QUIET_EVERY - 1) heartbeat intervals longer: the same margin against a late beat, a third of
# the SETs of an idle deployment. Its death is seen that much later, and it holds nothing then.
QUIET_EVERY = 3


def make_process_id() -> str:
    """host-pid-random: unique across containers, restarts and machines."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


class Presence:
    def __init__(
        self, store: Store, role: str, member: str, ttl_seconds: float, count: bool = False,
        interval_seconds: float = 0.0, quiet: Callable[[], bool] | None = None,
        published: Callable[[], None] | None = None,
    ):  # fmt: skip
        """role: "worker" or "dispatcher" (which registry and heartbeat keys); count: read how
        many members the registry holds (`registered`, every REGISTER_EVERY beats); quiet: whether
        the member holds nothing now and expects nothing (QUIET_EVERY; None: never quiet), with
        interval_seconds the heartbeat's; published: called once a beat that due() asked for is
        in Redis (not after one whose round trip failed)."""
        self.store = store
        self.count = count
        self.role = role
        self.member = member
        self.ttl_ms = round(ttl_seconds * 1000)
        self.quiet = quiet
        self.quiet_ttl_ms = round((ttl_seconds + (QUIET_EVERY - 1) * interval_seconds) * 1000)
        self.started = time.time()
        self.host = socket.gethostname()  # read once: a beat a second per workload asked the kernel
        self.registered = 0  # members of the role's registry at the last beat (this one included)
        self.beats = 0
        self.skipped = 0  # quiet heartbeats not published since the last one that was
        self.long_lived = False  # the key was last set with quiet_ttl_ms
        self.on_published = published
        self.asked_long = False  # the beat due() last asked for is a quiet one (quiet_ttl_ms)

    def due(self) -> int:
        """One heartbeat: the TTL in ms to publish it with, or 0 if a quiet member skips it. A
        skip counts at once (it sends nothing); a beat to publish counts once it is in Redis
        (published): one lost with its round trip is asked for again at the next heartbeat, not
        taken for a quiet beat that landed."""
        if self.quiet is None or not self.quiet():
            self.asked_long = False
            return self.ttl_ms
        if self.long_lived and self.skipped + 1 < QUIET_EVERY:  # (its first quiet beat is published)
            self.skipped += 1
            return 0
        self.asked_long = True
        return self.quiet_ttl_ms

    def published(self) -> None:
        """The beat due() asked for is in Redis, with the TTL it said."""
        self.skipped, self.long_lived = 0, self.asked_long
        if self.on_published is not None:
            self.on_published()

    def busy_again(self) -> None:
        """The member holds something again (a take returned entries): if its key was set to
        live through quiet beats, it goes back to the short TTL at once, so that a death now is
        seen within HEARTBEAT_TTL as ever (one round trip, once per quiet spell). A quiet beat
        decided just before the take and landing just after it sets the long TTL again; the
        lane's early beat (the take set `took`: workers/worker.py EARLY_BEAT) replaces it within
        half a second."""
        if self.long_lived:
            self.long_lived = False
            with contextlib.suppress(*REDIS_DOWN):  # (the take just worked: Redis away now is rare)
                self.store.shorten_heartbeat(self.role, self.member, self.ttl_ms)

    @property
    def key(self) -> str:
        """The heartbeat key (of the first partition, when the workload has several)."""
        return self.store.presence_keys(self.role, self.member)[0]

    def identity(self) -> dict[str, str | int | float]:
        """The fields every heartbeat starts with: who beats (WorkerBeat, DispatcherBeat)."""
        return {
            "id": self.member,
            "host": self.host,
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


Beat = WorkerBeat | DispatcherBeat


def publish_together(beats: Sequence[tuple[Presence, Beat | Callable[[], Beat]]]) -> None:
    """Publish several heartbeats (a process's, one per workload) in one round trip per Redis
    client, plus one more only when an expired key's member must register again: ten workloads
    cost a process one round trip a beat, not ten. A Redis away raises for all of its beats. A
    beat given as a callable is made only if it is published (a quiet member skips two in three:
    an idle worker made ten records a second to send three)."""
    for group in by_client(beats, lambda pair: pair[0].store):
        client = group[0][0].store.client
        pipe = client.pipeline(transaction=False)
        staged = []
        for presence, beat in group:
            ttl_ms = presence.due()
            if not ttl_ms:
                continue
            count, register = presence.flags()
            role, member = presence.role, presence.member
            made = beat() if callable(beat) else beat
            replies = presence.store.stage_heartbeat(pipe, role, member, made, ttl_ms, count, register)
            staged.append((presence, count, register, replies))
        if not staged:
            continue
        replies = pipe.execute()
        again = client.pipeline(transaction=False)
        at = 0
        for presence, count, register, many in staged:
            presence.published()
            mine, at = replies[at : at + many], at + many
            counted = presence.store.heartbeat_replies(
                again, mine, presence.role, presence.member, count, register
            )
            if count:
                presence.registered = counted
            presence.beats += 1
        if len(again):
            again.execute()
