"""`recheck config`: the effective configuration of every workload, where each value came from,
and whether the servers and tables it names are ready, before anything is deployed.

Like `nginx -t` or `promtool check config`: exit 0 when everything is ready, 1 when a server is
unreachable or a table is not ready (one line each), 2 when the configuration itself is bad
(found before this module runs: recheck/commands/launch.py, one line per problem), when a
workload's check cannot be imported as its workers would import it (a typo, a missing
dependency), or two workloads keep one table (the servers tell).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

import pymysql
from dotenv import dotenv_values
from pydantic import SecretStr
from pydantic_settings import TomlConfigSettingsSource

from recheck.commands.base import Command
from recheck.shared.config import ENV_PREFIX, ConfigError, DeploymentFields, Settings, Workload, redact_url
from recheck.shared.mysql.db import Database, DatabaseDown, server_of
from recheck.shared.mysql.rows import Rows
from recheck.shared.mysql.schema import inspect_table, missing_table, require_distinct_tables
from recheck.shared.policies.lifecycle import lifecycle_of
from recheck.shared.redis.connection import REDIS_DOWN, connect_redis
from recheck.shared.workloads import deployment_of, read_workloads, workloads_path
from recheck.workers.checks import CheckLoadError, check_kind, describe_check, load_check

SECRET_FIELDS = {"app_password"}


def file_tables(settings: Settings) -> dict[str, dict]:
    path = workloads_path(settings)
    if path is None:
        return {}
    return TomlConfigSettingsSource(Settings, toml_file=path)().get("workloads", {})


def value_of(workload: Workload, name: str):
    """A setting of a workload as the environment names it (its own, or its deployment's)."""
    if name == "workload":
        return workload.name
    if name == "retry" and lifecycle_of(workload).failure_backoff_only:  # the setting is not read
        return "backoff (one-shot: always)"
    return getattr(workload.deployment if name in DeploymentFields.model_fields else workload, name)


def sources(settings: Settings, workload: Workload, tables: dict[str, dict]) -> dict[str, str]:
    """Field name -> where its value came from: the workloads file, the environment, .env or
    recheck's default."""
    env_file = dotenv_values(".env") if Path(".env").exists() else {}
    path = workloads_path(settings)
    own = tables.get(workload.name, {})
    found = {}
    for name in Settings.model_fields:
        variable = f"{ENV_PREFIX}{name.upper()}"
        if name in own:
            found[name] = f"{path} [workloads.{workload.name}]"
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


def describe(settings: Settings, workloads: list[Workload]) -> list[dict]:
    """Per workload: [{"setting", "value", "source"}] (values redacted)."""
    tables = file_tables(settings)
    described = []
    for workload in workloads:
        where = sources(settings, workload, tables)
        rows = [
            {"setting": name, "value": shown(name, value_of(workload, name)), "source": where[name]}
            for name in Settings.model_fields
        ]
        described.append({"workload": workload.name, "settings": rows})
    return described


def problems(workloads: list[Workload]) -> list[str]:
    """One line per server that cannot be reached and per table that is not ready."""
    found: list[str] = []
    reached: dict[str, bool] = {}
    deployment = deployment_of(workloads)
    try:
        connect_redis(deployment).ping()
    except REDIS_DOWN as error:
        found.append(f"redis at {redact_url(deployment.redis_url)} unreachable: {error}")
    for workload in workloads:
        name, server = workload.name, server_of(workload)
        if reached.get(server) is False:
            continue
        db = Database(workload, read_timeout=5.0)
        try:
            found += table_problems(workload, db)
            reached[server] = True
        except DatabaseDown as error:
            reached[server] = False
            found.append(f"mysql at {redact_url(workload.mysql_url)} unreachable: {error}")
        except Exception as error:  # e.g. access denied, unknown database: said in one line
            found.append(f"workload {name}: {workload.mysql.database}.{workload.table}: {error}")
        finally:
            db.close()
    return found


def table_problems(workload: Workload, db: Database) -> list[str]:
    plan = inspect_table(workload, db)
    if not plan.exists:
        return [f"workload {workload.name}: {missing_table(workload, db)}"]
    where = f"workload {workload.name}: table {workload.mysql.database}.{workload.table}"
    found = [f"{where} {problem}" for problem in plan.fatal]
    if plan.clauses:
        found.append(f"{where} needs {len(plan.clauses)} change(s); `recheck init-db` prints them")
    if plan.advised:
        found.append(
            f"{where}: its due column's default is the inserting session's local time, so rows inserted "
            "from a session in another time zone are due hours early or late; `recheck init-db --apply` "
            "makes it UTC whatever the session"
        )
    return found


def checks(workloads: list[Workload]) -> tuple[dict[str, str], list[str]]:
    """Import each workload's check as its workers will: {workload: what kind of check it is},
    and one line per check that cannot be imported (a typo, a dependency not installed)."""
    kinds, errors = {}, []
    for workload in workloads:
        try:
            fn = load_check(workload.check, workload.setting_name("check"))
        except CheckLoadError as error:
            errors.append(f"workload {workload.name}: {error}")
            continue
        kinds[workload.name] = describe_check(fn, check_kind(fn, workload.check_kind))
    return kinds, errors


def limit_warnings(workloads: list[Workload]) -> list[str]:
    """A rate_limit below what the table's rows need (one check per row per interval): rows
    would fall further and further behind, whatever the number of workers."""
    found = []
    for workload in workloads:
        if not workload.rate_limit:
            continue
        db = Database(workload, read_timeout=30.0)
        try:
            needed = Rows(workload, db).needed_rate()
        except (DatabaseDown, pymysql.err.MySQLError):
            continue  # problems() says why
        finally:
            db.close()
        if needed > workload.rate_limit:
            found.append(
                f"workload {workload.name}: rate_limit {workload.rate_limit:g}/s is below what its rows need "
                f"(about {needed:,.0f} checks/s: one per row per interval); rows will fall behind and be "
                f"rate-limited. Raise rate_limit if the provider allows, or lengthen the interval"
            )
    return found


def conflicting(workloads: list[Workload]) -> list[str]:
    """Configuration errors only the servers can reveal (two workloads on one table, reached by
    two spellings of its server), one line each; servers that cannot be reached are skipped
    (problems() reports them)."""
    reached = []
    for workload in workloads:
        db = Database(workload, read_timeout=5.0)
        try:
            db.scalar("SELECT 1")
        except (DatabaseDown, pymysql.err.MySQLError):
            db.close()
            continue
        reached.append((workload, db))
    try:
        require_distinct_tables(reached)
    except ConfigError as error:
        return str(error).splitlines()
    finally:
        for _, db in reached:
            db.close()
    return []


def render(
    described: list[dict], found: list[str], conflicts: Sequence[str] = (), warnings: Sequence[str] = ()
) -> str:
    lines = []
    for workload in described:
        lines.append(f"workload {workload['workload']}:")
        width = max(len(row["setting"]) for row in workload["settings"])
        for row in workload["settings"]:
            lines.append(f"  {row['setting']:<{width}}  {row['value']}  ({row['source']})")
        if workload.get("check_kind"):
            lines.append(f"  {'':<{width}}  the check imports: a {workload['check_kind']}")
    lines.append("")
    lines += [f"configuration error: {line}" for line in conflicts]
    lines += [f"problem: {line}" for line in found]
    lines += [f"warning: {line}" for line in warnings]
    if not (found or conflicts):
        lines.append("every server reachable, every table ready")
    return "\n".join(lines)


def run(settings: Settings, args: argparse.Namespace) -> int:
    workloads = read_workloads(settings)
    described, found, conflicts = describe(settings, workloads), problems(workloads), conflicting(workloads)
    kinds, check_errors = checks(workloads)
    conflicts += check_errors
    for workload in described:
        workload["check_kind"] = kinds.get(workload["workload"])
    warnings = limit_warnings(workloads) if not found else []
    if args.json:
        print(json.dumps({"workloads": described, "problems": found, "configuration_errors": conflicts,
                          "warnings": warnings, "ready": not (found or conflicts)}, indent=2))  # fmt: skip
    else:
        print(render(described, found, conflicts, warnings))
    return 2 if conflicts else 1 if found else 0


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


COMMANDS = [
    Command(
        "config",
        "print every workload's effective configuration with where each value came from, and check "
        "that its servers are reachable and its table ready",
        "every variable and the workloads file",
        run,
        arguments,
        epilog="Exit code: 0 ready, 1 a server or table problem (one line each), 2 bad configuration.",
    )
]
