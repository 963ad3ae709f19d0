"""Every Redis key recheck uses, built in one place.

All keys of one workload share one hash tag, so they land in the same Redis Cluster slot and
the Lua scripts (which touch several keys at once) also run on a cluster: ``{prefix}`` for the
`default` workload (the keys of a deployment without a workloads file, as before workloads
existed), ``{prefix:NAME}`` for any other, so workloads spread over a cluster's slots. A
workload with several partitions (shared/core/partitions.py) has one such set of keys per partition,
tagged ``{prefix/pN}`` or ``{prefix:NAME/pN}`` ('/' cannot occur in a workload name), so one
table's work spreads over a cluster's masters too. Partition N of K gets a hash tag whose slot
lies in the N-th K-th of the 16,384 slots (``{prefix/pN.J}`` with the first J that does): a
cluster's masters own contiguous slot ranges, so K partitions spread evenly over them, not as
CRC-16 happens to scatter K names.
"""

from __future__ import annotations

from functools import cache

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from recheck.shared.config import DEFAULT_WORKLOAD, Workload

EVEN_SPREAD_UP_TO = 256  # partitions; beyond, plain names scatter evenly enough (and J is slow to find)


@cache
def partition_tag(name: str, partition: int, partitions: int) -> str:
    """The hash tag of one partition: in its own share of the slots (see the module's note)."""
    plain = f"{name}/p{partition}"
    if partitions > EVEN_SPREAD_UP_TO:
        return "{" + plain + "}"
    low = partition * REDIS_CLUSTER_HASH_SLOTS // partitions
    high = (partition + 1) * REDIS_CLUSTER_HASH_SLOTS // partitions
    for salt in range(100 * partitions):
        tag = plain if salt == 0 else f"{plain}.{salt}"
        if low <= key_slot(tag.encode()) < high:
            return "{" + tag + "}"
    return "{" + plain + "}"  # not reached in practice: each try lands in the range with p = 1/K


class Keys:
    @classmethod
    def of(cls, workload: Workload, partition: int | None = None) -> Keys:
        """The keys of the workload these workload describe (of one of its partitions, when it
        has several: partition None is then a mistake)."""
        if workload.partitions > 1 and partition is None:
            raise ValueError(f"workload {workload.name} has {workload.partitions} partitions: name one")
        if workload.partitions == 1:
            return cls(workload.deployment.key_prefix, workload.name)
        return cls(workload.deployment.key_prefix, workload.name, partition, workload.partitions)

    @classmethod
    def every_partition(cls, workload: Workload) -> list[Keys]:
        """The keys of each of the workload's partitions (one set when it is not partitioned)."""
        if workload.partitions == 1:
            return [cls.of(workload)]
        return [cls.of(workload, p) for p in range(workload.partitions)]

    def __init__(
        self, prefix: str, workload: str = DEFAULT_WORKLOAD, partition: int | None = None, partitions: int = 1
    ):
        name = prefix if workload == DEFAULT_WORKLOAD else f"{prefix}:{workload}"
        tag = "{" + name + "}" if partition is None else partition_tag(name, partition, partitions)
        self._tag = tag
        self.tag = tag
        self.queue = f"{tag}:queue"  # LIST of "id:due_ms" entries waiting for a worker
        # LIST of the priority rows' entries (priority_column), taken before the queue's
        self.priority_queue = f"{tag}:queue:priority"
        self.turns = f"{tag}:turns"  # STRING: the rest's share of takes carried over (take_priority.lua)
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
        # The asked job's (`now`): set before it reads, kept GUARD_TTL after its push, so that a
        # page that read the same rows before that push finds what completed after it.
        self.asked_guard = f"{tag}:guard:asked"  # STRING with a TTL
        # HASH id -> due_ms completed during a guarded pass, one per 10 s window of the Redis
        # clock: completed:<unix seconds // 10>, gone when the window after next ends (_lib.lua)
        self.completed = f"{tag}:completed"
        self.errors = f"{tag}:errors"  # HASH normalised error -> JSON {count, first, last, examples}
        self.errors_seen = f"{tag}:errors:seen"  # ZSET normalised error -> last seen (eviction order)
        self.freshness = f"{tag}:freshness"  # STRING JSON: the latest freshness sample, with a TTL
        self.writers_freed = f"{tag}:writers:freed"  # LIST: a write slot was given back (waiters block on it)
        self.asked = f"{tag}:asked"  # LIST of ids asked to be checked now (the dispatcher reads them)
        self.again = f"{tag}:again"  # HASH id -> 1: asked while in flight, asked again once released
        # SET of entries a take must drop, not start: superseded by a `now` (pushed again at the
        # head with the row's new due time) or of rows paused while queued (_take_drops.lua)
        self.dropped = f"{tag}:dropped"
        self.cancelled = f"{tag}:cancelled"  # SET ids whose running per-row checks are cancelled
        self.changed = f"{tag}:changed"  # STREAM: the change feed has news (readers block on it)
        # STREAM, one per deployment (in the default workload's slot): an application asked for ids
        # of some workload (ask): the dispatchers wake and read the asked lists (dispatcher/asked.py)
        self.asked_bell = "{" + prefix + "}:asked:bell"
        self.rate = f"{tag}:rate"  # STRING: the rate limit's arrival time, us on the Redis clock (takes)
        # STRING: the ordering the leader settled the lists for (settle.lua; empty takes read it)
        self.ordering = f"{tag}:ordering"
        self.running = f"{tag}:running"  # HASH worker -> checks it may be running (max_in_flight)
        # Groups (group_column, docs/groups.md; _lib.lua describes each): a group's entries wait
        # in LIST group:<hex name>
        self.group_prefix = f"{tag}:group:"
        # HASH group -> its group_rate_limit's arrival time, us on the Redis clock (takes); the
        # field '~' makes it a hash table (_lib.lua HASHTABLE); it expires once all could have
        # passed. ZSET group -> that time, of the groups whose lists a take emptied: takes delete
        # their times once passed (_group_rounds.lua forget_rates)
        self.group_rates = f"{tag}:groups:rates"
        self.group_rates_emptied = f"{tag}:groups:rates:emptied"
        self.group_ring = f"{tag}:groups:ring"  # LIST of groups taken in turn
        self.groups_sleeping = f"{tag}:groups:sleeping"  # ZSET group -> ms its next token is due
        self.groups_full = f"{tag}:groups:full"  # SET of groups at group_max_in_flight
        self.groups_running = f"{tag}:groups:running"  # HASH group -> checks running
        self.group_of = f"{tag}:groups:of"  # HASH entry -> group of entries workers hold
        self.groups_waiting = f"{tag}:groups:waiting"  # STRING: entries in the group lists
        # Groups with priority (priority_column too, docs/groups.md): a group's priority rows wait
        # in LIST group:!<hex name>, taken before its list; SET of the groups whose such list
        # holds entries, and STRING: how many entries those lists hold (of groups:waiting's)
        self.groups_urgent = f"{tag}:groups:urgent"
        self.groups_urgent_waiting = f"{tag}:groups:urgent:waiting"
        # The breaker per group (group_breaker_failures, docs/groups.md): HASH group -> "next probe
        # ms:open ms:probe entry" of the groups it opened, HASH group -> checks failed in a row
        self.groups_open = f"{tag}:groups:open"
        self.groups_failing = f"{tag}:groups:failing"
        # HASH group -> "rate:in flight:weight" ('' for the workload's) of the groups the group
        # limits table names (docs/groups.md), copied from MySQL by the dispatcher's leader
        self.groups_limits = f"{tag}:groups:limits"
        # STRING "fraction of its share left:group": the group whose turn a take's end cut short
        # goes on with the rest of its share at the next take (_take_groups.lua)
        self.groups_cut = f"{tag}:groups:cut"
        self.wake = f"{tag}:wake"  # LIST of tokens idle workers block on (one wakes per token)

    def group_keys(self) -> list[str]:
        """The group keys in the order the scripts name them (_lib.lua group_keys)."""
        return [
            self.group_prefix,
            self.group_ring,
            self.groups_sleeping,
            self.groups_full,
            self.groups_running,
            self.group_of,
            self.groups_waiting,
            self.wake,
            self.groups_urgent,
            self.groups_urgent_waiting,
            self.groups_open,
            self.groups_failing,
            self.groups_limits,
            self.groups_cut,
        ]

    def group_list(self, name: bytes) -> str:
        """LIST of one group's waiting entries (`name`: the group's value in hex)."""
        return self.group_prefix + name.decode()

    def group_urgent_list(self, name: bytes) -> str:
        """LIST of one group's waiting priority entries (groups with priority), taken first."""
        return self.group_prefix + "!" + name.decode()

    def processing(self, worker_id: str) -> str:
        """SET of entries a worker holds; an ack only counts for entries still in it."""
        return f"{self._tag}:processing:{worker_id}"

    def landing(self, worker_id: str) -> str:
        """LIST a blocked worker's BLMOVE delivered into before the wake tokens (2026-11-28); still
        part of what a worker holds, read while an upgrade may leave entries there."""
        return f"{self._tag}:landing:{worker_id}"

    def stopping(self, worker_id: str) -> str:
        """LIST holding a token while a worker stops: its lanes' blocking waits watch it beside
        `wake` (same slot), so an idle lane ends its wait at once, not at the wait's timeout."""
        return f"{self._tag}:stopping:{worker_id}"

    def write_slot(self, number: int) -> str:
        """STRING: the worker holding write slot `number` (1..RECHECK_WRITE_SLOTS), with a TTL."""
        return f"{self._tag}:writers:{number}"

    def heartbeat(self, worker_id: str) -> str:
        """STRING with a short TTL, refreshed while the worker lives; JSON facts for status."""
        return f"{self._tag}:worker:{worker_id}"

    def dispatcher_heartbeat(self, dispatcher_id: str) -> str:
        return f"{self._tag}:dispatcher:{dispatcher_id}"

    def all_prefixed(self) -> str:
        """A SCAN pattern matching every key recheck owns (used by tests and `reset`)."""
        return f"{self._tag}:*"
