"""Where a worker's entries come from: take a batch, wait for work, adopt what a lost reply hid.

Everything taken lands in the worker's processing set in Redis first (one pop.lua call per
batch), so that what a worker holds is known even if it dies. Nothing read from Redis is ever
evaluated: entries are parsed by the key kind's strict rules (digits, or hex for text and binary
keys: shared/keytypes.py), anything else is set aside as malformed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from shared.entries import Item
from shared.keytypes import KeyKind
from shared.redisconn import REDIS_DOWN
from shared.store import Store

log = logging.getLogger(__name__)

IDLE_WAIT = 1.0  # seconds a blocking wait for work lasts when the queue is empty


class Intake:
    def __init__(self, store: Store, worker_id: str):
        self.store = store
        self.worker_id = worker_id
        self._resync = False

    def take(self, limit: int, in_hand: Callable[[], set[bytes]] = frozenset) -> list[bytes]:
        """Up to `limit` entries, now held in our processing set (0: only what a wait delivered).

        in_hand: the entries the caller is still working on, asked only when a lost reply
        means the processing set must be read back."""
        try:
            entries = self.store.take(self.worker_id, limit).entries
        except REDIS_DOWN:
            # The script may have run and only its reply been lost: entries would then sit in our
            # processing set unseen. The reclaimer leaves a live worker's set alone, so adopt them.
            self._resync = True
            raise
        if self._resync:
            entries = entries + self.adopt_unseen(entries, in_hand())
            self._resync = False
        return entries

    def adopt_unseen(self, just_taken: list[bytes], in_hand: set[bytes]) -> list[bytes]:
        """Entries in our processing set that we neither just took nor have in hand."""
        known = set(just_taken) | in_hand
        unseen = [e for e in self.store.held(self.worker_id) if e not in known]
        if unseen:
            log.warning(
                "adopted %d held entries whose delivery was cut off by a lost connection", len(unseen)
            )
        return unseen

    def wait_for_work(self, timeout: float = IDLE_WAIT) -> bool:
        """Block until the queue has an entry (delivered to our landing list); False on timeout."""
        return self.store.wait_for_work(self.worker_id, timeout)

    def held_count(self) -> int:
        return self.store.held_count(self.worker_id)


def split(entries: list[bytes], keys: KeyKind) -> tuple[list[Item], list[bytes]]:
    """Well-formed items and malformed entries (logged once per batch)."""
    items, malformed = keys.parse(entries)
    if malformed:
        log.warning("dropped %d malformed queue entries (e.g. %r)", len(malformed), malformed[0][:40])
    return items, malformed
