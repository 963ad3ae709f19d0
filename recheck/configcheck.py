"""`recheck config`: the effective configuration of every workload, where each value came from,
and whether the servers and tables it names are ready, before anything is deployed.

Like `nginx -t` or `promtool check config`: exit 0 when everything is ready, 1 when a server is
unreachable or a table is not ready (one line each), 2 when the configuration itself is bad
(that is found before this module runs: shared/launch.py, one line per problem).
"""

from __future__ import annotations

import os
from pathlib import Path

from dotenv import dotenv_values
from pydantic import SecretStr
from pydantic_settings import TomlConfigSettingsSource

from shared.config import ENV_PREFIX, Settings, redact_url, workloads_path
from shared.db import Database, DatabaseDown, server_of
from shared.redisconn import REDIS_DOWN, connect_redis
from shared.schema import inspect_table

SECRET_FIELDS = {"app_password"}


def file_tables(settings: Settings) -> dict[str, dict]:
    path = workloads_path(settings)
    if path is None:
        return {}
    return TomlConfigSettingsSource(Settings, toml_file=path)().get("workloads", {})


def sources(settings: Settings, workload: Settings, tables: dict[str, dict]) -> dict[str, str]:
    """Field name -> where its value came from: the workloads file, the environment, .env or
    recheck's default."""
    env_file = dotenv_values(".env") if Path(".env").exists() else {}
    path = workloads_path(settings)
    own = tables.get(workload.workload, {})
    found = {}
    for name in Settings.model_fields:
        variable = f"{ENV_PREFIX}{name.upper()}"
        if name in own:
            found[name] = f"{path} [workloads.{workload.workload}]"
        elif name == "workload" and tables:
            found[name] = f"{path}"
        elif variable in os.environ:
            found[name] = "environment"
        elif variable in env_file:
            found[name] = ".env"
        else:
            found[name] = "default"
    return found


def shown(name: str, value) -> str:
    """A value as `recheck config` prints it: every secret redacted, wherever it is."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if name in SECRET_FIELDS:
        return "***" if value else "(none)"
    if name.endswith("_url"):
        return redact_url(str(value))
    return "(none)" if value == "" else str(value)


def describe(settings: Settings, workloads: list[Settings]) -> list[dict]:
    """Per workload: [{"setting", "value", "source"}] (values redacted)."""
    tables = file_tables(settings)
    described = []
    for workload in workloads:
        where = sources(settings, workload, tables)
        rows = [
            {"setting": name, "value": shown(name, getattr(workload, name)), "source": where[name]}
            for name in Settings.model_fields
        ]
        described.append({"workload": workload.workload, "settings": rows})
    return described


def problems(workloads: list[Settings]) -> list[str]:
    """One line per server that cannot be reached and per table that is not ready."""
    found, reached = [], {}
    try:
        connect_redis(workloads[0]).ping()
    except REDIS_DOWN as error:
        found.append(f"redis at {redact_url(workloads[0].redis_url)} unreachable: {error}")
    for workload in workloads:
        name, server = workload.workload, server_of(workload)
        if reached.get(server) is False:
            continue
        db = Database(workload, read_timeout=5.0)
        try:
            plan = inspect_table(workload, db)
            reached[server] = True
        except DatabaseDown as error:
            reached[server] = False
            found.append(f"mysql at {redact_url(workload.mysql_url)} unreachable: {error}")
            continue
        except Exception as error:  # e.g. access denied, unknown database: said in one line
            found.append(f"workload {name}: {workload.mysql.database}.{workload.table}: {error}")
            continue
        finally:
            db.close()
        where = f"workload {name}: table {workload.mysql.database}.{workload.table}"
        if not plan.exists:
            found.append(f"{where} does not exist (`recheck init-db --create` makes one)")
        for problem in plan.fatal:
            found.append(f"{where} {problem}")
        if plan.exists and plan.changes:
            found.append(f"{where} needs {len(plan.changes)} change(s); `recheck init-db` prints them")
    return found


def render(described: list[dict], found: list[str]) -> str:
    lines = []
    for workload in described:
        lines.append(f"workload {workload['workload']}:")
        width = max(len(row["setting"]) for row in workload["settings"])
        for row in workload["settings"]:
            lines.append(f"  {row['setting']:<{width}}  {row['value']}  ({row['source']})")
    lines.append("")
    lines += [f"problem: {line}" for line in found] or ["every server reachable, every table ready"]
    return "\n".join(lines)
