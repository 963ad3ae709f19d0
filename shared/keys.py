"""Every Redis key recheck uses, built in one place.

All keys of one workload share one hash tag, so they land in the same Redis Cluster slot and
the Lua scripts (which touch several keys at once) also run on a cluster: ``{prefix}`` for the
`default` workload (the keys of a deployment without a workloads file, as before workloads
existed), ``{prefix:NAME}`` for any other, so workloads spread over a cluster's slots.
"""

from __future__ import annotations

from shared.config import DEFAULT_WORKLOAD, Settings


class Keys:
    @classmethod
    def of(cls, settings: Settings) -> Keys:
        """The keys of the workload these settings describe."""
        return cls(settings.key_prefix, settings.workload)

    def __init__(self, prefix: str, workload: str = DEFAULT_WORKLOAD):
        tag = "{" + (prefix if workload == DEFAULT_WORKLOAD else f"{prefix}:{workload}") + "}"
        self._tag = tag
        self.queue = f"{tag}:queue"  # LIST of "id:due_ms" entries waiting for a worker
        self.suspects = f"{tag}:suspects"  # LIST of groups of reclaimed entries, each one batch
        self.inflight = f"{tag}:inflight"  # HASH id -> due_ms of the entry holding it; the dedup set
        self.workers = f"{tag}:workers"  # SET of registered worker ids
        self.reclaims = f"{tag}:reclaims"  # HASH id -> times reclaimed from a dead worker
        self.quarantine = f"{tag}:quarantine"  # HASH id -> reason, until written to MySQL
        self.stats = f"{tag}:stats"  # HASH of counters (dispatched, checked, failed, ...)
        self.leader = f"{tag}:leader"  # STRING: the dispatcher holding the lease, with a TTL
        self.dispatchers = f"{tag}:dispatchers"  # SET of dispatcher ids (for status)
        self.epoch = f"{tag}:epoch"  # STRING set by the dispatcher; missing = Redis lost its data
        # A pass rereading rows that may be in flight (the sweep; the dispatcher after a rewind)
        # holds its guard key; meanwhile acks record what they completed, and pushes skip it.
        self.sweep_guard = f"{tag}:guard:sweep"  # STRING with a TTL
        self.dispatch_guard = f"{tag}:guard:dispatch"  # STRING with a TTL
        self.completed = f"{tag}:completed"  # HASH id -> due_ms completed during a guarded pass
        self.errors = f"{tag}:errors"  # HASH normalised error -> JSON {count, first, last, examples}
        self.freshness = f"{tag}:freshness"  # STRING JSON: the latest freshness sample, with a TTL

    def processing(self, worker_id: str) -> str:
        """SET of entries a worker holds; an ack only counts for entries still in it."""
        return f"{self._tag}:processing:{worker_id}"

    def landing(self, worker_id: str) -> str:
        """LIST a blocked worker's BLMOVE delivers into; part of what the worker holds."""
        return f"{self._tag}:landing:{worker_id}"

    def heartbeat(self, worker_id: str) -> str:
        """STRING with a short TTL, refreshed while the worker lives; JSON facts for status."""
        return f"{self._tag}:worker:{worker_id}"

    def dispatcher_heartbeat(self, dispatcher_id: str) -> str:
        return f"{self._tag}:dispatcher:{dispatcher_id}"

    def all_prefixed(self) -> str:
        """A SCAN pattern matching every key recheck owns (used by tests and `reset`)."""
        return f"{self._tag}:*"
