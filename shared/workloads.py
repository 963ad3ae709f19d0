"""The workloads file: `recheck.toml` in the working directory (or the file RECHECK_CONFIG
names), one `[workloads.NAME]` table per workload, whose keys override the RECHECK_* values for
that workload only. Without a file, the RECHECK_* variables describe one workload, `default`.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_settings import BaseSettings, TomlConfigSettingsSource

from recheck.shared.config import (
    ENV_PREFIX,
    WORKLOAD_KEYS,
    ConfigError,
    Deployment,
    Settings,
    Workload,
    WorkloadFields,
    describe_error,
)

WORKLOADS_FILE = "recheck.toml"


class WorkloadsFile(BaseModel):
    """The workloads file's shape: `[workloads.NAME]` tables and nothing else."""

    model_config = ConfigDict(extra="forbid")
    workloads: dict[str, dict[str, Any]] = {}


def defaults_of(settings: Settings | Workload) -> Workload:
    """The workload the RECHECK_* values describe: what every workload of the file starts from."""
    return settings if isinstance(settings, Workload) else settings.default_workload()


def workloads_path(settings: Settings | Workload) -> Path | None:
    """RECHECK_CONFIG, or ./recheck.toml if there is one; None: no file, one `default` workload."""
    config = defaults_of(settings).deployment.config
    if config:
        return Path(config)
    return Path(WORKLOADS_FILE) if Path(WORKLOADS_FILE).exists() else None


def read_workloads(settings: Settings | Workload) -> list[Workload]:
    """Every workload, in the file's order, on top of the RECHECK_* values (the environment's, or a
    workload's); raises ConfigError naming what is wrong."""
    defaults = defaults_of(settings)
    path = workloads_path(defaults)
    if path is None:
        return [defaults]
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
    deployment = defaults.deployment
    base = {name: getattr(defaults, name) for name in WorkloadFields.model_fields}
    workloads: list[Workload] = []
    lines: list[str] = []
    seen: dict[tuple, str] = {}
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
            workload = Workload.model_validate(
                {**base, **known, "name": name, "deployment": deployment,
                 "origin": str(path), "file_keys": frozenset(known)}
            )  # fmt: skip
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


def deployment_of(workloads: list[Workload]) -> Deployment:
    """The one deployment every one of these workloads belongs to (read_workloads makes them so)."""
    if not workloads or any(w.deployment != workloads[0].deployment for w in workloads):
        raise ConfigError("these workloads do not belong to one deployment")
    return workloads[0].deployment


def select_workloads(workloads: list[Workload], names: str | None) -> list[Workload]:
    """The workloads named (comma-separated, e.g. `--workloads users,urls`), all if None."""
    if not names:
        return workloads
    known = {w.name: w for w in workloads}
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    missing = [name for name in wanted if name not in known]
    if missing or not wanted:
        raise ConfigError(f"unknown workload(s) {', '.join(missing) or names!r}; known: {', '.join(known)}")
    return [known[name] for name in wanted]
