"""The typed records that cross a module or a process boundary.

A worker's heartbeat (in Redis, read by status, the dashboard and other workers), a dispatcher's,
the freshness sample processes share, an error group, and the status facts every screen shows.
Each is a dataclass whose field names ARE the JSON keys users see (`recheck status --json`, the
dashboard's /api/status, the heartbeat values in Redis): `as_json()` writes them, `from_json()`
reads them back and tolerates a record of another version (a missing key takes its default, a
value of the wrong type too, an unknown key is ignored), so a rolling upgrade never breaks a
reader. Renaming a field is a type error in every module that reads it, not a grep.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

R = TypeVar("R", bound="Record")


def _coerce(value: Any, kind: Any) -> tuple[bool, Any]:
    """(ok, value as `kind`) for the simple kinds records use: int, float, str, bool, None,
    unions of them, lists and tuples of them. Not ok: the caller keeps the field's default."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(kind):
            return True, None
        for option in typing.get_args(kind):
            if option is not type(None):
                ok, coerced = _coerce(value, option)
                if ok:
                    return True, coerced
        return False, None
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            return False, None
        (inner, *_) = typing.get_args(kind) or (Any,)
        items = []
        for item in value:
            ok, coerced = _coerce(item, inner)
            if not ok:
                return False, None
            items.append(coerced)
        return True, list(items) if origin is list else tuple(items)
    if kind is Any:
        return True, value
    if kind is bool:
        return (True, value) if isinstance(value, bool) else (False, None)
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return (True, value) if ok else (False, None)
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return (True, float(value)) if ok else (False, None)
    if kind is str:
        return (True, value) if isinstance(value, str) else (False, None)
    return (True, value) if isinstance(value, kind) else (False, None)


class Record:
    """JSON in and out for a dataclass of simple fields (see the module's docstring)."""

    def as_json(self) -> dict[str, Any]:
        return {name: _plain(getattr(self, name)) for name in _field_names(type(self))}

    @classmethod
    def from_json(cls: type[R], data: object, **given: Any) -> R:
        """The record `data` describes (anything not a dict: every field's default); `given`
        values win (e.g. the registry member a heartbeat belongs to)."""
        source = data if isinstance(data, dict) else {}
        hints = _field_types(cls)
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in given:
                values[f.name] = given[f.name]
            elif f.name in source:
                ok, coerced = _coerce(source[f.name], hints[f.name])
                if ok:
                    values[f.name] = coerced
        return cls(**values)


_FIELD_TYPES: dict[type, dict[str, Any]] = {}


def _field_types(cls: type) -> dict[str, Any]:
    """A record class's field types, resolved once: get_type_hints evaluates every annotation
    (strings, with `from __future__ import annotations`) each time, about 100 us per heartbeat read."""
    if cls not in _FIELD_TYPES:
        _FIELD_TYPES[cls] = typing.get_type_hints(cls)
    return _FIELD_TYPES[cls]


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_SCALARS = frozenset({int, float, str, bool, type(None)})


def _field_names(cls: type) -> tuple[str, ...]:
    """A record class's field names, read once (every heartbeat writes its record)."""
    if cls not in _FIELD_NAMES:
        _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return _FIELD_NAMES[cls]


def _plain(value: Any) -> Any:
    if type(value) in _SCALARS:  # most values: nothing to convert
        return value
    if isinstance(value, list | tuple) and all(type(item) in _SCALARS for item in value):
        return list(value)
    if isinstance(value, Record):
        return value.as_json()
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


# -- heartbeats (Redis: one JSON value per live process and workload) ----------------------------
@dataclass(frozen=True)
class WorkerBeat(Record):
    """What one worker lane publishes every beat."""

    id: str = "?"  # the worker process (host-pid-random)
    host: str = ""
    pid: int = 0
    started: float = 0.0  # Unix time
    kind: str = ""  # "batch" or "row"
    workload: str = ""
    checked: int = 0
    failed: int = 0
    stale: int = 0
    rate: float = 0.0  # checks per second lately
    take: int = 0  # ids a take asks for now
    lateness_buckets: list[int] = field(default_factory=list)  # per SECONDS_BUCKETS bucket, since start
    lateness_max: float = 0.0  # seconds, in the last 2 s
    # Due times (ms) of the due rows this worker is checking: status tells those rows (in flight)
    # from overdue rows waiting for a worker.
    overdue_in_hand: list[int] = field(default_factory=list)
    abandoned: int = 0  # checks past their timeout whose threads still run
    recent_checked: int = 0  # the last minute's, for "checks failing"
    recent_failed: int = 0
    last_error: str | None = None
    # Seconds its MySQL has worked since its last outage (0: down now), and since a write of this
    # worker last succeeded there (answering is not the same as taking writes).
    mysql_up_for: float = 0.0
    mysql_wrote_ago: float = 0.0
    limited: str = ""  # "rate", "in_flight", "backoff" or "group NAME" when its takes were held back lately
    conflicts: int = 0  # deadlocks and lock wait timeouts retried (the benchmark's queue-table workers)


@dataclass(frozen=True)
class DispatcherBeat(Record):
    """What one dispatcher lane publishes every beat."""

    id: str = "?"
    host: str = ""
    pid: int = 0
    started: float = 0.0
    role: str = ""  # "leader" or "standby" of this workload
    workload: str = ""
    dispatched: int = 0
    pages: int = 0


# -- status ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Freshness(Record):
    """One pass over the due index (shared by the deployment's samplers for a moment)."""

    due_now: int = 0  # exactly min(true count, count_cap)
    overdue_1s: int = 0
    count_cap: int = 0
    oldest_lateness_s: float = 0.0
    # The oldest overdue rows: (due_ms, late_us, own interval_us) each.
    overdue_detail: list[list[int]] = field(default_factory=list)
    db_epoch: float = 0.0  # the database clock, Unix seconds (error groups are stamped on it)


@dataclass(frozen=True)
class Overdue(Record):
    """Overdue rows waiting (for a worker, or for rate-limit tokens) apart from rows in flight."""

    overdue_in_flight: int = 0
    overdue_waiting: int = 0
    oldest_waiting_s: float = 0.0
    waiting_intervals: float = 0.0  # lateness in each row's own interval, the most of them
    overdue_interval: int = 0  # rows waiting longer than their own interval


@dataclass(frozen=True)
class ErrorGroup(Record):
    error: str = ""
    count: int = 0
    examples: list[str] = field(default_factory=list)
    first_seen: float | None = None
    last_seen: float | None = None


@dataclass
class OneShotFacts(Record):
    """A one-shot workload's section (once = true): rows still to do (capped like the other
    counts), and dead ones (failed max_attempts times) with the first few of them."""

    pending: int | None = None
    dead: int = 0
    dead_ids: list[dict[str, Any]] = field(default_factory=list)  # {"id", "fails", "error"}

    def flat(self, present: bool = True) -> dict[str, Any]:
        return {
            "once": present,
            "pending": self.pending,
            "dead": self.dead,
            "dead_ids": _plain(self.dead_ids),
        }


@dataclass
class PriorityFacts(Record):
    """A priority ordering's section (docs/priorities.md)."""

    column: str = ""  # rows whose column is 1 go first
    share: float = 0.0  # of each take, kept for the rest while both wait
    depth: int = 0  # of queue_depth, priority rows' entries

    def flat(self) -> dict[str, Any]:
        return {"priority_depth": self.depth, "priority_column": self.column, "priority_share": self.share}


@dataclass
class GroupFacts(Record):
    """A grouped ordering's section (group_column, docs/groups.md): its limits per group, the
    groups with rows waiting, how many of them their own limits hold back, and the biggest of those."""

    column: str = ""
    rate_limit: float = 0.0
    max_in_flight: int = 0
    waiting: int = 0
    at_rate: int = 0
    at_room: int = 0
    held: list[dict[str, Any]] = field(default_factory=list)  # {"group", "waiting"}
    open: int = 0  # groups whose breaker is open (group_breaker_failures)
    open_names: list[str] = field(default_factory=list)  # the first few of them

    def flat(self) -> dict[str, Any]:
        return {
            "group_column": self.column, "group_rate_limit": self.rate_limit,
            "group_max_in_flight": self.max_in_flight, "groups_waiting": self.waiting,
            "groups_at_rate": self.at_rate, "groups_at_room": self.at_room, "groups_held": _plain(self.held),
            "groups_open": self.open, "groups_open_names": list(self.open_names),
        }  # fmt: skip


@dataclass
class StatusFacts(Record):
    """Every fact `recheck status`, the dashboard and `recheck run`'s live line show of one
    workload (views/status.py gathers them; the figures a sample refreshes less often are None
    until read)."""

    workload: str = ""
    table: str = ""
    mysql: str = ""
    redis: str = ""
    interval_s: float = 0.0
    interval_range_s: list[float] | None = None  # (shortest, longest) with an interval column
    failing_threshold: float = 0.0
    rows: int | None = None
    # Freshness (see Freshness) and its split (see Overdue).
    due_now: int = 0
    overdue_1s: int = 0
    count_cap: int = 0
    oldest_lateness_s: float = 0.0
    db_epoch: float = 0.0
    overdue_in_flight: int = 0
    overdue_waiting: int = 0
    oldest_waiting_s: float = 0.0
    waiting_intervals: float = 0.0
    overdue_interval: int = 0
    quarantined: int = 0
    paused: int = 0
    schedule: str = ""  # a scheduled workload's rhythm as its start line says it (docs/schedules.md)
    # The sections of its policies (shared/policies): a one-shot lifecycle's, a priority
    # ordering's, a grouped one's; None where the workload has no such policy. as_json writes
    # their fields flat, under the names they always had (once, pending, priority_column, ...).
    one_shot: OneShotFacts | None = None
    failing_rows: int | None = None
    due_ahead_unchecked: int | None = None  # never checked, due beyond their interval
    quarantined_ids: list[dict[str, Any]] = field(default_factory=list)  # {"id", "reason"}
    failing: list[dict[str, Any]] = field(default_factory=list)  # {"id", "fails", "error"} (sampled)
    queue_depth: int = 0
    priority: PriorityFacts | None = None
    groups: GroupFacts | None = None
    suspects: int = 0
    in_flight: int = 0
    live_workers: int = 0
    live_dispatchers: int = 0
    leader: str | None = None
    dispatchers: list[DispatcherBeat] = field(default_factory=list)
    checks_per_second: float = 0.0
    workers: list[WorkerBeat] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    checks_past_timeout: int = 0
    recent_checks: int = 0  # the last minute's, all live workers
    recent_failed: int = 0
    checks_failing: bool = False
    last_error: str | None = None
    errors: list[ErrorGroup] = field(default_factory=list)
    fresh: bool = False
    rate_limit: float = 0.0
    max_in_flight: int = 0
    # "backoff", "rate", "in_flight" or "group NAME" when a live worker's takes were held back lately
    limited_by: str = ""
    needed_rate: float | None = None  # checks/s the table asks
    lateness_p50_s: float | None = None  # sampled: rows written since the previous sample
    lateness_p99_s: float | None = None
    sampled_at: float | None = None  # Unix time of a sample

    @property
    def dead(self) -> int:
        """Dead rows (a one-shot workload's; 0 for any other)."""
        return self.one_shot.dead if self.one_shot else 0

    def as_json(self) -> dict[str, Any]:
        """As users see it: each policy's section flat under its fields' JSON names (defaults
        where the workload has no such policy), a sample's workers without their bulky histograms."""
        sections = {
            "one_shot": (self.one_shot or OneShotFacts()).flat(present=self.one_shot is not None),
            "priority": (self.priority or PriorityFacts()).flat(),
            "groups": (self.groups or GroupFacts()).flat(),
        }
        data: dict[str, Any] = {}
        for name, value in super().as_json().items():
            if name in sections:
                data.update(sections[name])
            else:
                data[name] = value
        if self.sampled_at is not None:
            for worker in data["workers"]:
                worker.pop("lateness_buckets", None)
                worker.pop("overdue_in_hand", None)
        return data
