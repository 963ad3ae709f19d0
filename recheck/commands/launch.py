"""How every recheck process and command starts: settings, logging, errors as exit codes.

Exit codes: 0 ok, 1 failure (a server unreachable, a table that needs `init-db`), 2 bad
configuration or usage. Every `recheck` subcommand goes through here (`python -m
recheck.workers` and `python -m recheck.dispatcher` are `recheck worker` and `recheck
dispatcher`): the only place that turns recheck's errors (shared/errors.py) into exit codes.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable

import pymysql

from recheck.shared.config import ConfigError, Settings, export_dotenv, load_settings, redact_url
from recheck.shared.mysql.db import DatabaseDown
from recheck.shared.mysql.schema import SchemaProblem
from recheck.shared.process.logs import setup_logging
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.workloads import read_workloads

log = logging.getLogger("recheck")

# The long-running roles: each installs its graceful stop once it is ready to serve.
SERVICES = frozenset({"dispatcher", "worker", "run"})

MYSQL_HINTS = {
    1049: "; check the database in RECHECK_MYSQL_URL (`recheck init-db --create` makes one)",
    1146: "; check RECHECK_TABLE (`recheck init-db` says what a table needs)",
    1045: "; check the user and password in RECHECK_MYSQL_URL",
    1142: "; the MySQL user lacks a privilege recheck needs (see docs/security.md, least-privilege user)",
}


def stop_at_once_until_serving(signums=(signal.SIGTERM, signal.SIGINT)) -> None:
    """Until the process installs its graceful stop (shared/process/loop.py's deliver_signals), a
    stop signal ends it at once with exit 0. Called first thing by the long-running roles: while
    still importing the check and connecting it holds nothing (no lease, no ids), so a stop then
    (`docker compose stop` right after `up`, a supervisor's teardown) is a clean stop, not death
    by SIGTERM (exit 143)."""

    def stop(_number, _frame) -> None:
        raise SystemExit(0)

    for signum in signums:
        signal.signal(signum, stop)


def launch(role: str, body: Callable[[Settings], int], overrides: dict | None = None) -> int:
    """Load the settings (exit 2 on a bad value), set up logging as `role`, run body(settings)."""
    if role in SERVICES:
        stop_at_once_until_serving()
    try:
        settings = load_settings(**(overrides or {}))
        export_dotenv()  # a check's own settings in .env reach it (and `recheck run`'s children)
        read_workloads(settings)  # a bad workloads file stops every command the same way: exit 2
        setup_logging(role, settings.log_level, settings.log_format, settings.log_config)
    except ConfigError as error:
        for line in str(error).splitlines():
            print(f"recheck: configuration error: {line}", file=sys.stderr)
        return 2
    try:
        return body(settings)
    except pymysql.err.MySQLError as error:
        code = error.args[0] if error.args and isinstance(error.args[0], int) else 0
        log.error("mysql error %s%s", error, MYSQL_HINTS.get(code, ""))
        return 1
    except DatabaseDown as error:
        log.error("mysql at %s unreachable: %s", redact_url(settings.mysql_url), error)
        return 1
    except REDIS_DOWN as error:
        log.error("redis at %s unreachable: %s", redact_url(settings.redis_url), error)
        return 1
    except SchemaProblem as problem:
        log.error("%s", problem)
        return 1
    except ConfigError as error:
        for line in str(error).splitlines():
            log.error("%s", line)
        return 2


# Argument types for the command lines of every process: a clear message instead of a traceback.
def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value
