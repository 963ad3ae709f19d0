"""Configuration from RECHECK_* environment variables (and a .env file), and the workloads file.

One deployment may keep several tables fresh: `recheck.toml` (or the file RECHECK_CONFIG names)
has a `[workloads.NAME]` table per workload, whose keys override the RECHECK_* defaults for that
workload only. Without a file, the RECHECK_* variables define one workload named `default`.

Every value that ends up in SQL (table and column names, the database name) is checked
against a strict identifier pattern here, so the SQL layer can quote it without further
thought. Values are never pasted into SQL otherwise: data travels as query parameters.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from dotenv import dotenv_values
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, TomlConfigSettingsSource

ENV_PREFIX = "RECHECK_"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_CHECK_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_KEY_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,40}")
_WORKLOAD = re.compile(r"[A-Za-z0-9_-]{1,40}")  # in Redis key tags and metric labels
DEFAULT_WORKLOAD = "default"
WORKLOADS_FILE = "recheck.toml"
MYSQL_TLS_OPTIONS = ("ssl_ca", "ssl_cert", "ssl_key", "ssl_verify_cert", "ssl_verify_identity")


class ConfigError(Exception):
    """A configuration value names something unusable (exit code 2); the message says which."""


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


def _mysql_url(value: str) -> str:
    parse_mysql_url(value)
    return value


def _redis_url(value: str) -> str:
    scheme = urlsplit(value).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise ValueError("must start with redis://, rediss:// or unix://")
    return value


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
    any query option named like one (redis-py reads ?password=...), safe for logs and status."""
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


class Settings(BaseSettings):
    """Every knob of recheck. The env variable is RECHECK_ + the field name in upper case."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", extra="ignore", validate_default=True
    )

    # Where things are.
    mysql_url: Annotated[str, AfterValidator(_mysql_url)] = "mysql://root@127.0.0.1:3306/recheck"
    redis_url: Annotated[str, AfterValidator(_redis_url)] = "redis://127.0.0.1:6379/0"
    key_prefix: Annotated[str, AfterValidator(_key_prefix)] = "recheck"

    # The table and its columns (see README "Pointing recheck at an existing table").
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
    # kept within [min_interval, max_interval]; failures keep their retry backoff.
    interval: Seconds = 10.0
    interval_column: Annotated[str, AfterValidator(_optional_identifier)] = ""
    min_interval: Annotated[float, Field(ge=0, le=86_400 * 365)] = 0.0
    max_interval: Seconds = 86_400 * 365.0
    check: Annotated[str, AfterValidator(_check_ref)] = "workers.demo:check"
    check_kind: Literal["auto", "batch", "row"] = "auto"
    check_timeout: Seconds = 30.0
    concurrency: Annotated[int, Field(ge=1, le=10_000)] = 50

    # Workloads: the file, this workload's name (set by the file) and its share of a worker's time.
    config: str = ""
    workload: Annotated[str, AfterValidator(_workload)] = DEFAULT_WORKLOAD
    weight: Annotated[float, Field(gt=0, le=1000)] = 1.0
    # Sets of Redis keys (each its own hash tag: its own Redis Cluster slot) the workload's ids
    # are spread over by a hash of the id (shared/partitions.py); 1 = one set, as before.
    partitions: Annotated[int, Field(ge=1, le=1024)] = 1

    # Batching and backpressure.
    dispatch_batch: Annotated[int, Field(ge=1, le=50_000)] = 2000
    worker_batch: Annotated[int, Field(ge=1, le=10_000)] = 500
    # Batch checks: a take grows up to this many ids while the queue is deep and checks are
    # quick, checked in calls of at most worker_batch, written back in one statement
    # (workers/batchsize.py). At or below worker_batch: one call per take, as before.
    worker_take_max: Annotated[int, Field(ge=1, le=20_000)] = 4000
    high_water: Annotated[int, Field(ge=1, le=10_000_000)] = 20_000
    # Write-backs of this workload running at once, over every worker (workers/writeslots.py);
    # 0 = no limit. Many at once contend inside InnoDB; raise it for a MySQL with many cores.
    write_slots: Annotated[int, Field(ge=0, le=64)] = 2
    poll_interval: Seconds = 0.05

    # Liveness and recovery.
    heartbeat_interval: Seconds = 1.0
    heartbeat_ttl: Seconds = 5.0
    reclaim_interval: Seconds = 1.0
    sweep_interval: Seconds = 2.0
    sweep_grace: Seconds = 3.0
    orphan_after: Seconds = 120.0
    orphan_interval: Seconds = 30.0
    max_reclaims: Annotated[int, Field(ge=1, le=100)] = 3
    leader_ttl: Seconds = 5.0
    shutdown_timeout: Seconds = 10.0

    # Failed checks are retried after retry_base, doubling each time, at most retry_max.
    retry_base: Seconds = 1.0
    retry_max: Seconds = 300.0
    # Share of the last minute's checks that failed above which checks count as failing: rows
    # are not fresh, status says so, workers log a warning (the alert rule uses the same 0.1).
    failing_threshold: Annotated[float, Field(gt=0, le=1)] = 0.1

    # Session time zone for recheck's MySQL connections; '' keeps the server's default.
    db_time_zone: Annotated[str, Field(pattern=r"^$|^[+-]\d{2}:\d{2}$|^[A-Za-z_/]+$")] = "+00:00"

    # Observability: /metrics on every process, the dashboard on each dispatcher (0 = off).
    metrics_host: str = "127.0.0.1"
    metrics_port: Annotated[int, Field(ge=0, le=65535)] = 9464
    dashboard_host: str = "127.0.0.1"
    dashboard_port: Annotated[int, Field(ge=0, le=65535)] = 8080

    # `recheck health`: each process writes its role, pid and heartbeat key here ('' = off).
    health_file: str = ""

    # `recheck init-db` also creates (or updates) this least-privilege MySQL user, with only
    # SELECT and UPDATE on the table, for the dispatcher and workers ('' = don't).
    app_user: Annotated[str, Field(pattern=r"^$|^[A-Za-z0-9_]{1,32}$")] = ""
    app_password: SecretStr = SecretStr("")

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.heartbeat_ttl < 2 * self.heartbeat_interval:
            raise ValueError("heartbeat_ttl: must be at least twice RECHECK_HEARTBEAT_INTERVAL")
        if self.leader_ttl < 2 * self.heartbeat_interval:
            raise ValueError("leader_ttl: must be at least twice RECHECK_HEARTBEAT_INTERVAL")
        if self.app_user and not self.app_password.get_secret_value():
            raise ValueError("app_password: must be set when RECHECK_APP_USER is")
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
        ]
        if len({c.lower() for c in columns}) != len(columns):
            raise ValueError("id_column: the configured column names must all be different")
        return self

    @property
    def mysql(self) -> MySQLTarget:
        return parse_mysql_url(self.mysql_url)

    def env_overrides(self) -> dict[str, str]:
        """These settings as RECHECK_* variables, for child processes."""
        return {f"{ENV_PREFIX}{name.upper()}": str(value) for name, value in self.model_dump().items()}


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


# RECHECK_* variables that are not settings: compose's .env (passwords, the checks folder).
OTHER_VARIABLES = {"RECHECK_MYSQL_PASSWORD", "RECHECK_CHECKS_DIR"}


def unknown_variables(names) -> list[str]:
    """One warning per RECHECK_* name that is no setting, naming the closest one (a typo)."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields} | OTHER_VARIABLES
    warnings = []
    for name in sorted({n.upper() for n in names if n.upper().startswith(ENV_PREFIX)} - known):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]}?" if close else " (see `recheck --help` and the README)"
        warnings.append(f"unknown variable {name} is ignored{hint}")
    return warnings


def load_settings(**overrides) -> Settings:
    """Settings from the environment; on a bad value print one line per variable and exit 2.
    A RECHECK_* variable that is no setting (a typo) gets one warning line."""
    try:
        settings = Settings(**overrides)
    except ValidationError as error:
        for line in describe_error(error):
            print(f"recheck: configuration error: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    names = list(os.environ) + (list(dotenv_values(".env")) if os.path.exists(".env") else [])
    for warning in unknown_variables(names):
        print(f"recheck: warning: {warning}", file=sys.stderr)
    return settings


# What a workload may set in the workloads file: its table, its schedule and its check. The
# rest (Redis, timings of the processes, observability) is one per deployment: RECHECK_*.
WORKLOAD_KEYS = (
    "mysql_url", "table", "id_column", "due_column", "checked_column", "result_column", "count_column",
    "fail_column", "error_column", "interval", "interval_column", "min_interval", "max_interval", "check",
    "check_kind", "check_timeout", "concurrency", "worker_batch", "worker_take_max",
    "dispatch_batch", "high_water", "write_slots",
    "retry_base", "retry_max", "max_reclaims", "weight", "partitions",
)  # fmt: skip


class WorkloadsFile(BaseModel):
    """The workloads file's shape: `[workloads.NAME]` tables and nothing else."""

    model_config = ConfigDict(extra="forbid")
    workloads: dict[str, dict[str, Any]] = {}


def workloads_path(settings: Settings) -> Path | None:
    """RECHECK_CONFIG, or ./recheck.toml if there is one; None: no file, one `default` workload."""
    if settings.config:
        return Path(settings.config)
    return Path(WORKLOADS_FILE) if Path(WORKLOADS_FILE).exists() else None


def read_workloads(settings: Settings) -> list[Settings]:
    """Every workload's settings, in the file's order; raises ConfigError naming what is wrong."""
    path = workloads_path(settings)
    if path is None:
        return [settings]
    if not path.is_file():
        raise ConfigError(f"RECHECK_CONFIG: {path} is not a file")
    try:
        raw = TomlConfigSettingsSource(BaseSettings, toml_file=path)()
        tables = WorkloadsFile.model_validate(raw).workloads
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    except ValidationError as error:
        extra = sorted(str(item["loc"][0]) for item in error.errors() if item["type"] == "extra_forbidden")
        hint = f"[{extra[0]}] is not known; " if extra else ""
        raise ConfigError(f"{path}: {hint}workloads go in [workloads.NAME] tables") from None
    if not tables:
        raise ConfigError(f"{path}: defines no workload; add a [workloads.NAME] table")
    base = settings.model_dump()
    workloads, lines, seen = [], [], {}
    for name, values in tables.items():
        where = f"{path}: workload {name!r}"
        if not isinstance(values, dict):
            lines.append(f"{where}: must be a table of settings")
            continue
        unknown = [key for key in values if key not in WORKLOAD_KEYS]
        for key in unknown:
            close = difflib.get_close_matches(key, WORKLOAD_KEYS, n=1)
            hint = f"did you mean {close[0]}?" if close else "per-deployment settings are RECHECK_* variables"
            lines.append(f"{where}: {key}: not a workload setting ({hint})")
        known = {key: value for key, value in values.items() if key in WORKLOAD_KEYS}
        try:
            workload = Settings.model_validate({**base, **known, "workload": name})
        except ValidationError as error:
            for line in describe_error(error):  # "RECHECK_INTERVAL: ..." -> "interval: ..."
                variable, _, message = line.partition(": ")
                lines.append(f"{where}: {variable.removeprefix(ENV_PREFIX).lower()}: {message}")
            continue
        target = (workload.mysql.host, workload.mysql.port, workload.mysql.database, workload.table)
        if target in seen:
            lines.append(f"{where}: keeps the same table as workload {seen[target]!r}")
        seen[target] = name
        if not unknown:
            workloads.append(workload)
    if lines:
        raise ConfigError("\n".join(lines))
    return workloads


def load_workloads(settings: Settings) -> list[Settings]:
    """read_workloads(), or one line per problem and exit 2."""
    try:
        return read_workloads(settings)
    except ConfigError as error:
        for line in str(error).splitlines():
            print(f"recheck: configuration error: {line}", file=sys.stderr)
        raise SystemExit(2) from None


def log_prefix(settings: Settings) -> str:
    """What a log line about one workload starts with: nothing for the only (default) one."""
    return "" if settings.workload == DEFAULT_WORKLOAD else f"[{settings.workload}] "


def select_workloads(workloads: list[Settings], names: str | None) -> list[Settings]:
    """The workloads named (comma-separated, e.g. `--workloads users,urls`), all if None."""
    if not names:
        return workloads
    known = {w.workload: w for w in workloads}
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    missing = [name for name in wanted if name not in known]
    if missing or not wanted:
        raise ConfigError(f"unknown workload(s) {', '.join(missing) or names!r}; known: {', '.join(known)}")
    return [known[name] for name in wanted]
