"""Configuration: RECHECK_* environment variables (and a .env file), in two kinds.

- Deployment: what one deployment shares (Redis, the processes' timings, observability);
- Workload: one table kept fresh (its server, table, columns, schedule, check), with the
  Deployment it belongs to. A deployment may keep several: the workloads file
  (shared/workloads.py) has a table per workload whose keys override the RECHECK_* values.

Settings reads the environment: every variable of both kinds; `deployment()` and
`default_workload()` make the typed settings the code passes around, so a signature says
which kind it needs.

Every value that ends up in SQL (table and column names, the database name) is checked
against a strict identifier pattern here, so the SQL layer can quote it without further
thought. Values are never pasted into SQL otherwise: data travels as query parameters.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import sys
from collections.abc import Iterable
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from dotenv import dotenv_values
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from recheck.shared.core.schedules import ScheduleError, validate, zone_of
from recheck.shared.errors import RecheckError

ENV_PREFIX = "RECHECK_"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_CHECK_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_KEY_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,40}")
_WORKLOAD = re.compile(r"[A-Za-z0-9_-]{1,40}")  # in Redis key tags and metric labels
DEFAULT_WORKLOAD = "default"
CHANGES_SUFFIX = "_recheck_changes"  # the change feed's table: the workload table's name and this
WORKLOADS_FILE = "recheck.toml"
MYSQL_TLS_OPTIONS = ("ssl_ca", "ssl_cert", "ssl_key", "ssl_verify_cert", "ssl_verify_identity")


class ConfigError(RecheckError):
    """A configuration value names something unusable (exit code 2); the message says which,
    one problem per line."""


def _identifier(value: str) -> str:
    if not _IDENTIFIER.fullmatch(value):
        raise ValueError("must be a plain SQL identifier (letters, digits, _; not starting with a digit)")
    return value


def _check_ref(value: str) -> str:
    if not _CHECK_REF.fullmatch(value):
        raise ValueError("must look like package.module:function")
    return value


def _key_prefix(value: str) -> str:
    if not _KEY_PREFIX.fullmatch(value):
        raise ValueError("must be 1-40 characters of letters, digits, '_', '.', '-'")
    return value


def _workload(value: str) -> str:
    if not _WORKLOAD.fullmatch(value):
        raise ValueError("must be 1-40 characters of letters, digits, '_', '-'")
    return value


def _optional_identifier(value: str) -> str:
    return _identifier(value) if value else value


def _names(value: object) -> object:
    """A list of names from a variable ("url, interval_s") or a TOML list."""
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return value


def _identifiers(value: tuple[str, ...]) -> tuple[str, ...]:
    for name in value:
        _identifier(name)
    if len({name.lower() for name in value}) != len(value):
        raise ValueError("names a column twice")
    return value


def _mysql_url(value: str) -> str:
    parse_mysql_url(value)
    return value


def _redis_url(value: str) -> str:
    scheme = urlsplit(value).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise ValueError("must start with redis://, rediss:// or unix://")
    require_unambiguous(value)
    return value


ENCODE_HINT = (
    "percent-encode the special characters of the user and password (# as %23, / as %2F, ? as %3F, "
    "@ as %40, : as %3A, % as %25)"
)


def ambiguous(url: str) -> bool:
    """Whether a URL cannot be split into its parts for sure: a '#', '/', '?' or '@' in an unencoded
    password ends the user part early, so the rest of the password lands in the port, path, query
    or fragment (where it could be printed)."""
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 (raises for a port that is not a number: a password's tail)
    except ValueError:
        return True
    after_host = url[url.find(parts.netloc) + len(parts.netloc) :] if parts.netloc else url
    return "#" in url or ("@" in after_host and "@" not in parts.netloc)


def require_unambiguous(url: str) -> None:
    if ambiguous(url):
        raise ValueError(f"cannot be read for sure: {ENCODE_HINT}")


Identifier = Annotated[str, AfterValidator(_identifier)]
Seconds = Annotated[float, Field(gt=0, le=86_400 * 365)]


class MySQLTarget:
    """The parts of RECHECK_MYSQL_URL that PyMySQL needs."""

    def __init__(
        self,
        host: str,
        port: int,
        user: str,
        password: str,
        database: str,
        unix_socket: str | None,
        tls: dict[str, str],
    ):
        self.host, self.port, self.user, self.password = host, port, user, password
        self.database, self.unix_socket, self.tls = database, unix_socket, tls


def parse_mysql_url(url: str) -> MySQLTarget:
    """mysql://user:password@host:port/database?ssl_ca=...&unix_socket=..."""
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mysql+pymysql", "mariadb"):
        raise ValueError("must start with mysql://")
    require_unambiguous(url)
    database = unquote(parts.path.lstrip("/"))
    if not _IDENTIFIER.fullmatch(database):
        raise ValueError(
            "must name a database that is a plain identifier, e.g. mysql://root@host:3306/recheck"
        )
    options = dict(parse_qsl(parts.query))
    unknown = set(options) - {*MYSQL_TLS_OPTIONS, "unix_socket"}
    if unknown:
        raise ValueError(f"has unknown option(s) {', '.join(sorted(unknown))}")
    try:
        port = parts.port or 3306
    except ValueError:
        raise ValueError("has a port that is not a number") from None
    return MySQLTarget(
        host=parts.hostname or "127.0.0.1",
        port=port,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=database,
        unix_socket=options.pop("unix_socket", None),
        tls=options,
    )


SECRET_OPTIONS = re.compile(r"pass|secret|token|auth", re.IGNORECASE)  # password=, passwd=, ...


def redact_url(url: str) -> str:
    """The URL with every secret replaced by ***: the password of its user part, and the value of
    any query option named like one (redis-py reads ?password=...), safe for logs and status.
    A URL that cannot be split for sure (an unencoded '#', '/', '?' or '@' in its password)
    shows only its scheme: where the password ends cannot be known."""
    if ambiguous(url):
        return f"{urlsplit(url).scheme or 'url'}://*** (not shown: {ENCODE_HINT})"
    parts = urlsplit(url)
    head, mark, rest = url.partition("?")
    if parts.password is not None:
        head = head.replace(parts.netloc, f"{parts.username or ''}:***@{parts.netloc.rsplit('@', 1)[1]}", 1)
    query, hash_mark, fragment = rest.partition("#")
    query = "&".join(
        f"{name}=***" if SECRET_OPTIONS.search(name) else option
        for option in query.split("&")
        for name in [option.partition("=")[0]]
    )
    return head + mark + query + hash_mark + fragment


def as_variable(value: object) -> str:
    """A setting's value as its RECHECK_* variable spells it (for child processes)."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, tuple | list):
        return ",".join(str(item) for item in value)
    return str(value)


class DeploymentFields(BaseModel):
    """What is one per deployment: Redis, the processes' timings, observability. Every field is
    also a RECHECK_* variable (RECHECK_ + the name in upper case)."""

    redis_url: Annotated[str, AfterValidator(_redis_url)] = "redis://127.0.0.1:6379/0"
    key_prefix: Annotated[str, AfterValidator(_key_prefix)] = "recheck"
    config: str = ""  # the workloads file ('' = ./recheck.toml if it exists)

    poll_interval: Seconds = 0.05  # the dispatcher's pause when caught up or at high water
    # A one-shot workload's pause after a page that read rows but was not full (jobs are
    # arriving; at most poll_interval). Lower: jobs start sooner, for more CPU (docs/performance.md).
    busy_poll_interval: Seconds = 0.05
    # The pause between idle probes while no workload this dispatcher leads has a row due (at
    # least poll_interval): a row inserted due now starts within about this long, p99. Work found
    # snaps the loop back to the pauses above. Lower: idle tables' new jobs start sooner, for
    # more of an idle dispatcher's CPU (docs/performance.md).
    idle_poll_interval: Seconds = 0.08

    # Liveness and recovery.
    heartbeat_interval: Seconds = 1.0
    heartbeat_ttl: Seconds = 5.0
    reclaim_interval: Seconds = 1.0
    sweep_interval: Seconds = 2.0
    sweep_grace: Seconds = 3.0
    orphan_after: Seconds = 120.0
    orphan_interval: Seconds = 30.0
    leader_ttl: Seconds = 5.0
    shutdown_timeout: Seconds = 10.0

    # Session time zone for recheck's MySQL connections; '' keeps the server's default.
    db_time_zone: Annotated[str, Field(pattern=r"^$|^[+-]\d{2}:\d{2}$|^[A-Za-z_/]+$")] = "+00:00"

    # Observability: /metrics on every process, the dashboard on each dispatcher (0 = off).
    metrics_host: str = "127.0.0.1"
    metrics_port: Annotated[int, Field(ge=0, le=65535)] = 9464
    dashboard_host: str = "127.0.0.1"
    dashboard_port: Annotated[int, Field(ge=0, le=65535)] = 8080
    # With a token, the dashboard also offers now, pause, resume and release (a POST carrying it).
    dashboard_token: SecretStr = SecretStr("")
    # Host names the dashboard answers to, besides localhost, 127.0.0.1, ::1 and dashboard_host:
    # a request naming any other (a DNS-rebinding page) is refused. Comma-separated.
    dashboard_hosts: str = ""

    # `recheck health`: each process writes its role, pid and heartbeat key here ('' = off).
    health_file: str = ""

    # `recheck init-db` also creates (or updates) this least-privilege MySQL user, with only
    # SELECT and UPDATE on the table, for the dispatcher and workers ('' = don't).
    app_user: Annotated[str, Field(pattern=r"^$|^[A-Za-z0-9_]{1,32}$")] = ""
    app_password: SecretStr = SecretStr("")

    # recheck's own loggers' level (other loggers, a check's libraries', log from WARNING on),
    # the line format, and a logging.config.dictConfig file (JSON or TOML) applied on top.
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    log_config: str = ""
    # OpenTelemetry traces of the workers' work (docs/tracing.md; `pip install 'recheck[otel]'`):
    # a span per take, check call and write-back, per row for per-row checks. Off: nothing of
    # OpenTelemetry is imported.
    tracing: bool = False


class WorkloadFields(BaseModel):
    """What each workload may set (in the workloads file, or as RECHECK_* for the default one):
    its table, its schedule and its check."""

    mysql_url: Annotated[str, AfterValidator(_mysql_url)] = "mysql://root@127.0.0.1:3306/recheck"

    # The table and its columns (see docs/existing-table.md).
    table: Identifier = "user_block_status"
    id_column: Identifier = "user_id"
    due_column: Identifier = "next_check_at"
    checked_column: Identifier = "checked_at"
    result_column: Identifier = "status"
    count_column: Identifier = "check_count"
    fail_column: Identifier = "fail_count"
    error_column: Identifier = "last_error"

    # What to do and how often. A row's next due time is NOW() + interval, or + the seconds in
    # its interval_column (NULL: interval), or + what its check returned as Recheck(after=...),
    # kept within [min_interval, max_interval]; after a failure too, unless retry = "backoff".
    interval: Seconds = 10.0
    interval_column: Annotated[str, AfterValidator(_optional_identifier)] = ""
    # Or a calendar (docs/schedules.md): a row is due at the ticks of a cron expression, its own
    # (schedule_column) or the workload's (schedule), read in its time zone (time_zone_column, an
    # IANA name; NULL or no column: time_zone). `interval` then only sets how late counts as
    # "overdue > own interval" in status and the metrics.
    schedule: str = ""
    schedule_column: Annotated[str, AfterValidator(_optional_identifier)] = ""
    time_zone: str = "UTC"
    time_zone_column: Annotated[str, AfterValidator(_optional_identifier)] = ""
    min_interval: Annotated[float, Field(ge=0, le=86_400 * 365)] = 0.0
    max_interval: Seconds = 86_400 * 365.0
    check: Annotated[str, AfterValidator(_check_ref)] = "recheck.workers.demo:check"
    check_kind: Literal["auto", "batch", "row"] = "auto"
    check_timeout: Seconds = 30.0
    concurrency: Annotated[int, Field(ge=1, le=10_000)] = 50
    # Columns the check gets with each row: they are read for a whole take in one statement and
    # the check receives rows (read-only mappings, the id column included) instead of ids.
    columns: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_names), AfterValidator(_identifiers)] = ()
    # A column holding each row's W3C trace context (`traceparent`), written by the producer with
    # the row (docs/tracing.md): with RECHECK_TRACING, a row's check joins the producer's trace.
    trace_column: Annotated[str, AfterValidator(_optional_identifier)] = ""
    # Next due times come up to this share of the row's interval early, at random, so rows that
    # came due together (after a stop, a bulk import) spread out again by themselves.
    jitter: Annotated[float, Field(ge=0, le=0.5)] = 0.05

    # Its share of a worker's time, and the sets of Redis keys (each its own hash tag: its own
    # Redis Cluster slot) its ids are spread over by a hash of the id (shared/core/partitions.py).
    weight: Annotated[float, Field(gt=0, le=1000)] = 1.0
    partitions: Annotated[int, Field(ge=1, le=1024)] = 1

    # Batching and backpressure.
    dispatch_batch: Annotated[int, Field(ge=1, le=50_000)] = 2000
    worker_batch: Annotated[int, Field(ge=1, le=10_000)] = 500
    # Batch checks: a take grows up to this many ids while the queue is deep and checks are
    # quick, checked in calls of at most worker_batch, written back in one statement
    # (workers/batchsize.py). At or below worker_batch: one call per take, as before.
    worker_take_max: Annotated[int, Field(ge=1, le=20_000)] = 4000
    high_water: Annotated[int, Field(ge=1, le=10_000_000)] = 20_000
    # Write-backs of this workload running at once, over every worker (workers/writing/writeslots.py);
    # 0 = no limit. Many at once contend inside InnoDB; raise it for a MySQL with many cores.
    write_slots: Annotated[int, Field(ge=0, le=64)] = 2

    # A failed check's row is due again after its own interval, as after a success ("interval"),
    # or sooner ("backoff": after retry_base, doubling each time, at most retry_max and never
    # later than its interval).
    retry: Literal["interval", "backoff"] = "interval"
    retry_base: Seconds = 1.0
    retry_max: Seconds = 300.0
    max_reclaims: Annotated[int, Field(ge=1, le=100)] = 3  # reclaims from dead workers before quarantine
    # Share of the last minute's checks that failed above which checks count as failing: rows
    # are not fresh, status says so, workers log a warning, the alert rule fires.
    failing_threshold: Annotated[float, Field(gt=0, le=1)] = 0.1
    # Backing off a failing provider: when at least this share of a worker's checks of the last
    # second failed, its takes stop but for a small probe a second (2 % of its rate before), until
    # a probe mostly succeeds (0: never back off). E.g. 0.9 for a check that calls one API.
    backoff_threshold: Annotated[float, Field(ge=0, le=1)] = 0.0
    # The change feed: every transition of a row's stored result (and between failing and
    # succeeding) recorded in the write-back's own transaction, in a table of the workload
    # table's own (changes_table: `<table>_recheck_changes`), the newest changes_keep kept.
    changes: bool = False
    changes_keep: Annotated[int, Field(ge=1_000, le=1_000_000_000)] = 1_000_000
    # One-shot rows (a job or outbox table: docs/queue-tables.md): a row is handled once. A
    # success is done (its due column cleared; done = "delete": the row deleted by the same
    # fenced write), a Recheck(after=) reschedules it instead; a failure is retried with backoff
    # (retry_base doubling, at most retry_max) up to max_attempts in all, then the row is dead:
    # kept, never dispatched, until `recheck retry`. pending: which rows of an existing table are
    # still to do (an SQL condition such as "status = 0", used once by `init-db --apply`: the
    # others are done). keep_done: done rows older than this many seconds are deleted, in small
    # batches (0: kept).
    once: bool = False
    done: Literal["keep", "delete"] = "keep"
    max_attempts: Annotated[int, Field(ge=1, le=1000)] = 5
    pending: str = ""
    keep_done: Annotated[float, Field(ge=0, le=86_400 * 3650)] = 0.0
    # `recheck cancel` / Client.cancel: what a cancelled row becomes: paused (resume runs it
    # again), done (one-shot rows: never run again) or deleted.
    on_cancel: Literal["pause", "done", "delete"] = "pause"
    # A provider's limits, over every worker of the deployment (0 = none): checks started per
    # second, and checks running at once (shared/core/limits.py and the take scripts keep them,
    # shared/redis/lua/_take_grant.lua).
    rate_limit: Annotated[float, Field(ge=0, le=10_000_000)] = 0.0
    max_in_flight: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    # Priority (docs/priorities.md): rows whose priority_column is 1 (TRUE) are read by a pass of
    # their own into a queue of their own, taken before the rest; while both wait, priority_share
    # of every take still goes to the rest, so they are never starved. Changes nothing while the
    # workers keep up.
    priority_column: Annotated[str, AfterValidator(_optional_identifier)] = ""
    priority_share: Annotated[float, Field(ge=0, le=0.9)] = 0.1
    # Groups (docs/groups.md): rows are grouped by group_column's value (a customer, a host; NULL
    # is one group of its own); while rows wait, groups are served in turn, and each group is held
    # to group_rate_limit checks started per second and group_max_in_flight running at once, over
    # every worker (0 = none). Its rows over a limit wait in Redis. With a priority_column too, a
    # group's priority rows are taken before its other rows, within the group's limits.
    group_column: Annotated[str, AfterValidator(_optional_identifier)] = ""
    group_rate_limit: Annotated[float, Field(ge=0, le=10_000_000)] = 0.0
    group_max_in_flight: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    # A breaker per group (docs/groups.md): after group_breaker_failures checks of one group failed
    # in a row (0 = no breaker), its rows wait in Redis group_breaker_open seconds, then one probe
    # goes; a failed probe doubles the wait (at most group_breaker_open_max), a success closes it.
    group_breaker_failures: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    group_breaker_open: Annotated[float, Field(gt=0, le=86_400)] = 5.0
    group_breaker_open_max: Annotated[float, Field(gt=0, le=86_400)] = 300.0
    # A table of limits and weights per group (docs/groups.md), read again every few seconds by
    # the dispatcher's leader: a group it names has its own rate, room and share of the turns.
    group_limits_table: Annotated[str, AfterValidator(_optional_identifier)] = ""


GROUP_WATER = 10  # a grouped workload keeps up to 10 x high_water entries waiting (Workload.waiting_limit)
WORKLOAD_KEYS = tuple(WorkloadFields.model_fields)  # what a [workloads.NAME] table may set


class Deployment(DeploymentFields):
    """The settings one deployment shares: every process, every workload."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    @model_validator(mode="after")
    def _consistent(self) -> Deployment:
        if self.heartbeat_ttl < 2 * self.heartbeat_interval:
            raise ValueError("heartbeat_ttl: must be at least twice RECHECK_HEARTBEAT_INTERVAL")
        if self.leader_ttl < 2 * self.heartbeat_interval:
            raise ValueError("leader_ttl: must be at least twice RECHECK_HEARTBEAT_INTERVAL")
        if self.app_user and not self.app_password.get_secret_value():
            raise ValueError("app_password: must be set when RECHECK_APP_USER is")
        return self


class Workload(WorkloadFields):
    """One table kept fresh: its own settings, and the deployment it belongs to."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    name: Annotated[str, AfterValidator(_workload)] = DEFAULT_WORKLOAD
    deployment: Deployment = Field(default_factory=Deployment, exclude=True)
    # Where its settings came from, for messages: the workloads file and the keys it set here.
    origin: str = Field(default="", exclude=True)
    file_keys: frozenset[str] = Field(default=frozenset(), exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.retry_max < self.retry_base:
            raise ValueError("retry_max: must not be smaller than RECHECK_RETRY_BASE")
        if self.max_interval < self.min_interval:
            raise ValueError("max_interval: must not be smaller than min_interval")
        columns = [
            self.id_column,
            self.due_column,
            self.checked_column,
            self.result_column,
            self.count_column,
            self.fail_column,
            self.error_column,
            *([self.interval_column] if self.interval_column else []),
            *([self.schedule_column] if self.schedule_column else []),
            *([self.time_zone_column] if self.time_zone_column else []),
            *([self.priority_column] if self.priority_column else []),
            *([self.group_column] if self.group_column else []),
            *([self.trace_column] if self.trace_column else []),
        ]
        if len({c.lower() for c in columns}) != len(columns):
            raise ValueError("id_column: the configured column names must all be different")
        if not self.once and (self.done != "keep" or self.pending or self.keep_done):
            raise ValueError("done: done, pending and keep_done are for one-shot workloads (once = true)")
        if self.on_cancel == "done" and not self.once:
            raise ValueError("on_cancel: only a one-shot row can be done (once = true); pause or delete")
        if self.once and self.changes and self.done == "delete":
            raise ValueError("changes: a row deleted when done has no stored result to compare (done = keep)")
        self._check_schedule()
        if (self.group_rate_limit or self.group_max_in_flight) and not self.group_column:
            raise ValueError("group_rate_limit: group limits need a group_column")
        if self.group_limits_table and not self.group_column:
            raise ValueError("group_limits_table: limits per group need a group_column")
        if self.group_breaker_failures and not self.group_column:
            raise ValueError("group_breaker_failures: a breaker per group needs a group_column")
        if self.group_breaker_open_max < self.group_breaker_open:
            raise ValueError("group_breaker_open_max: must be at least group_breaker_open")
        if self.group_column and self.partitions > 1:
            raise ValueError(
                "group_column: a grouped workload has one partition (each group's limits live in one place)"
            )
        if 0 < self.max_in_flight < self.partitions:
            raise ValueError(
                "max_in_flight: must be at least `partitions` (each partition keeps a share of it)"
            )
        return self

    def _check_schedule(self) -> None:
        if self.schedule and self.schedule_column:
            raise ValueError("schedule: a workload's schedule or a schedule_column per row, not both")
        if not self.scheduled:
            if self.time_zone_column:
                raise ValueError("time_zone_column: a time zone per row needs a schedule or schedule_column")
            return
        if self.once:
            raise ValueError("schedule: one-shot rows run once; a schedule is for recurring rows")
        if self.interval_column:
            raise ValueError("schedule: a row follows its schedule or its interval_column, not both")
        try:
            zone_of(self.time_zone)
            if self.schedule:
                validate(self.schedule, self.time_zone)
        except ScheduleError as error:
            raise ValueError(f"schedule: {error}") from None

    @property
    def read_columns(self) -> tuple[str, ...]:
        """What a take reads of each row for the check (`columns`), and a scheduled workload's
        schedule and time zone columns with them: the write-back then has no read of its own."""
        if not self.columns:
            return ()
        extra = (self.schedule_column, self.time_zone_column)
        return (*self.columns, *(c for c in extra if c and c not in self.columns))

    @property
    def scheduled(self) -> bool:
        """Rows due at calendar ticks (schedule or schedule_column), not every interval."""
        return bool(self.schedule or self.schedule_column)

    @property
    def mysql(self) -> MySQLTarget:
        return parse_mysql_url(self.mysql_url)

    def setting_name(self, field: str) -> str:
        """How the configuration spells one of this workload's settings, for messages: its key in
        the workloads file when it was set there, else its RECHECK_* variable."""
        if field in self.file_keys:
            return f"{self.origin} [workloads.{self.name}] {field}"
        return f"{ENV_PREFIX}{field.upper()}"

    @property
    def changes_table(self) -> str:
        """The change feed's table, beside the workload's table and named after it: one feed per
        table, so positions, trimming and readers never mix two workloads or two deployments.
        A long table name is cut and made unique with a hash (identifiers stop at 64)."""
        name = f"{self.table}{CHANGES_SUFFIX}"
        if len(name) <= 64:
            return name
        digest = hashlib.sha1(self.table.encode()).hexdigest()[:8]
        return f"{self.table[: 64 - len(CHANGES_SUFFIX) - 9]}_{digest}{CHANGES_SUFFIX}"

    @property
    def waiting_limit(self) -> int:
        """How many entries the dispatcher keeps waiting in Redis at most: high_water, or for a
        grouped workload GROUP_WATER times it. A group held back by its own limits keeps its
        backlog there, and the dispatcher must read past it for the other groups' rows to be
        served in turn (docs/groups.md)."""
        return self.high_water * (GROUP_WATER if self.group_column else 1)

    @property
    def log_prefix(self) -> str:
        """What a log line about this workload starts with: nothing for the only (default) one."""
        return "" if self.name == DEFAULT_WORKLOAD else f"[{self.name}] "

    def evolve(self, **changes: Any) -> Workload:
        """This workload with some settings changed, validated; a deployment setting among them
        changes the deployment (tests, benchmarks and command-line options)."""
        ours = {k: v for k, v in changes.items() if k not in DeploymentFields.model_fields}
        theirs = {k: v for k, v in changes.items() if k in DeploymentFields.model_fields}
        deployment = self.deployment
        if theirs:
            deployment = Deployment.model_validate({**deployment.model_dump(), **theirs})
        return Workload.model_validate(
            {**self.model_dump(), **ours, "deployment": deployment, "origin": self.origin,
             "file_keys": self.file_keys - set(ours)}
        )  # fmt: skip

    def env_overrides(self) -> dict[str, str]:
        """This workload and its deployment as RECHECK_* variables (a child process started with
        them sees the same settings; the workloads file, if any, is named by RECHECK_CONFIG)."""
        values = {**self.deployment.model_dump(), **self.model_dump(), "workload": self.name}
        values.pop("name")
        return {f"{ENV_PREFIX}{name.upper()}": as_variable(value) for name, value in values.items()}


class Settings(BaseSettings, DeploymentFields, WorkloadFields):
    """The environment: every RECHECK_* variable (and .env), the deployment's and the default
    workload's. The env variable is RECHECK_ + the field name in upper case."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", extra="ignore", validate_default=True
    )

    workload: Annotated[str, AfterValidator(_workload)] = DEFAULT_WORKLOAD  # the default workload's name

    def deployment(self) -> Deployment:
        """The deployment's settings (what every process and workload shares)."""
        values = {name: getattr(self, name) for name in DeploymentFields.model_fields}
        return Deployment.model_validate(values)

    def env_overrides(self) -> dict[str, str]:
        """These settings as RECHECK_* variables, for child processes (`recheck run`'s)."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        return {f"{ENV_PREFIX}{name.upper()}": as_variable(value) for name, value in values.items()}

    def default_workload(self) -> Workload:
        """The workload the RECHECK_* variables describe (the only one without a workloads file)."""
        values = {name: getattr(self, name) for name in WorkloadFields.model_fields}
        return Workload.model_validate({**values, "name": self.workload, "deployment": self.deployment()})


def describe_error(error: ValidationError) -> list[str]:
    """One line per bad variable: the variable's name and what is wrong, never a secret value."""
    lines = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        message = item["msg"].removeprefix("Value error, ")
        if not field and ":" in message:  # model-level checks name their field first
            field, message = (part.strip() for part in message.split(":", 1))
        shown = ""
        if "input" in item and field and not field.endswith("url") and not isinstance(item["input"], dict):
            shown = f" (got {item['input']!r})"
        lines.append(f"{ENV_PREFIX}{field.upper()}: {message}{shown}")
    return lines


# RECHECK_* variables that are not settings: compose's .env (passwords, the checks folder, the
# image and the source it is built from).
OTHER_VARIABLES = {"RECHECK_MYSQL_PASSWORD", "RECHECK_CHECKS_DIR", "RECHECK_IMAGE", "RECHECK_SOURCE"}


def unknown_variables(names: Iterable[str]) -> list[str]:
    """One warning per RECHECK_* name that is no setting, naming the closest one (a typo)."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields} | OTHER_VARIABLES
    warnings = []
    for name in sorted({n.upper() for n in names if n.upper().startswith(ENV_PREFIX)} - known):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]}?" if close else " (see `recheck --help` and docs/configuration.md)"
        warnings.append(f"unknown variable {name} is ignored{hint}")
    return warnings


def export_dotenv(path: str = ".env") -> list[str]:
    """Put the .env file's other variables (a check's own settings: an API key, a timeout) into
    the environment, where the check finds them as it would under compose's env_file; variables
    already set win, and RECHECK_* stay recheck's to read (so `recheck config` can still tell
    which came from .env). Returns the names exported."""
    if not os.path.exists(path):
        return []
    exported = []
    for name, value in dotenv_values(path).items():
        if value is not None and not name.upper().startswith(ENV_PREFIX) and name not in os.environ:
            os.environ[name] = value
            exported.append(name)
    return exported


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment; ConfigError (a line per bad variable) on a bad value.
    A RECHECK_* variable that is no setting (a typo) gets one warning line."""
    try:
        settings = Settings(**overrides)
        settings.default_workload()  # its deployment too: the checks that span several settings
    except ValidationError as error:
        raise ConfigError("\n".join(describe_error(error))) from None
    names = list(os.environ) + (list(dotenv_values(".env")) if os.path.exists(".env") else [])
    for warning in unknown_variables(names):
        print(f"recheck: warning: {warning}", file=sys.stderr)
    return settings
