"""recheck's settings for the tasks table, from the Django project's own settings: the database
the backend writes to (DATABASES), Redis and any recheck setting from the backend's OPTIONS.

    OPTIONS = {"DATABASE": "default", "REDIS_URL": "redis://redis:6379/0", "MAX_ATTEMPTS": 3,
               "RECHECK": {"CONCURRENCY": 100, "KEEP_DONE": 604800}}

The table's shape (table.SHAPE: table, columns, check) is fixed; the rest are defaults that a
RECHECK_* variable of the environment overrides, as everywhere in recheck.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from django.core.exceptions import ImproperlyConfigured

import recheck.django.table as table


def mysql_url(database: Mapping[str, Any]) -> str:
    """A Django DATABASES entry as RECHECK_MYSQL_URL."""
    engine = database.get("ENGINE", "")
    if not engine.endswith("mysql"):
        raise ImproperlyConfigured(f"recheck runs tasks on MySQL or MariaDB, not ENGINE {engine!r}")
    user = quote(str(database.get("USER") or "root"), safe="")
    password = str(database.get("PASSWORD") or "")
    auth = f"{user}:{quote(password, safe='')}" if password else user
    host = database.get("HOST") or "127.0.0.1"
    options = database.get("OPTIONS") or {}
    query = {}
    if host.startswith("/"):  # Django's way of naming a unix socket
        query["unix_socket"], host = host, "localhost"
    if options.get("unix_socket"):
        query["unix_socket"] = options["unix_socket"]
    port = database.get("PORT") or 3306
    tail = f"?{urlencode(query)}" if query else ""
    return f"mysql://{auth}@{host}:{port}/{quote(str(database['NAME']), safe='')}{tail}"


def recheck_environment(alias: str = "default", environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The RECHECK_* variables that run the tasks table of TASKS[alias]: the table's shape always,
    the rest unless `environ` sets them."""
    from django.conf import settings

    try:
        params = settings.TASKS[alias]
    except (AttributeError, KeyError):
        raise ImproperlyConfigured(f"TASKS has no backend {alias!r}") from None
    if not str(params.get("BACKEND", "")).startswith("recheck.django"):
        raise ImproperlyConfigured(f"TASKS[{alias!r}] is not recheck.django.RecheckBackend")
    options = params.get("OPTIONS") or {}
    database = settings.DATABASES[options.get("DATABASE", "default")]
    defaults = {f"RECHECK_{key}": value for key, value in table.DEFAULTS.items()}
    defaults["RECHECK_MYSQL_URL"] = mysql_url(database)
    if options.get("REDIS_URL"):
        defaults["RECHECK_REDIS_URL"] = str(options["REDIS_URL"])
    if options.get("MAX_ATTEMPTS"):
        defaults["RECHECK_MAX_ATTEMPTS"] = str(int(options["MAX_ATTEMPTS"]))
    for key, value in (options.get("RECHECK") or {}).items():
        if key.upper() in table.SHAPE:
            raise ImproperlyConfigured(f"OPTIONS['RECHECK'][{key!r}]: the tasks table's shape is fixed")
        defaults[f"RECHECK_{key.upper()}"] = _text(value)
    given = environ or {}
    chosen = {name: value for name, value in defaults.items() if name not in given}
    return {**chosen, **{f"RECHECK_{key}": value for key, value in table.SHAPE.items()}}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
