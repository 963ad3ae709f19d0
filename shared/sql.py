"""Load a package's queries.sql and render it for the configured table and columns.

shared/queries.sql holds every statement the product runs; bench/queries.sql the benchmark's
own (read through the same code, so they are rendered and quoted alike).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from shared.config import Settings
from shared.keytypes import INT_KEYS, KeyKind

_NAME_LINE = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def raw_queries(package: str = "shared") -> dict[str, str]:
    """name -> statement template, comments dropped."""
    text = resources.files(package).joinpath("queries.sql").read_text()
    parts = _NAME_LINE.split(text)
    queries = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("--")]
        queries[name] = "\n".join(lines)
    return queries


def quote(identifier: str) -> str:
    # Identifiers were validated by Settings (letters, digits, underscore), so backticks suffice.
    return f"`{identifier}`"


# Statements that carry a batch of keys need the id column's own type (schema.describe_table):
# without it they fail loudly instead of converting every key.
UNKNOWN_KEYS = "KEY_KIND_NOT_READ_FROM_THE_TABLE"


def next_interval_us(settings: Settings) -> str:
    """The SQL for a row's next interval in microseconds: the workload's interval, or the row's
    own interval column (NULL: the workload's), kept within [min_interval, max_interval]."""
    if not settings.interval_column:
        return "%(interval_us)s"
    row = f"ROUND(t.{quote(settings.interval_column)} * 1000000)"
    return f"LEAST(GREATEST(COALESCE({row}, %(interval_us)s), %(min_interval_us)s), %(max_interval_us)s)"


class Queries:
    """Every statement of a package, ready to execute: ``Queries(settings).due_page``.

    keys: the id column's kind (shared/keytypes.py), for the statements that carry keys."""

    def __init__(self, settings: Settings, package: str = "shared", keys: KeyKind | None = None):
        names = {
            "table": settings.table,
            "id": settings.id_column,
            "due": settings.due_column,
            "checked": settings.checked_column,
            "result": settings.result_column,
            "count": settings.count_column,
            "fails": settings.fail_column,
            "error": settings.error_column,
            "due_index": "recheck_due",
            "database": settings.mysql.database,
        }
        quoted = {key: quote(value) for key, value in names.items()}
        quoted["key_column"] = keys.key_column if keys else UNKNOWN_KEYS
        quoted["key_match"] = keys.key_match if keys else UNKNOWN_KEYS
        quoted["key_out"] = (keys or INT_KEYS).key_out.format(id=quoted["id"])
        quoted["next_interval_us"] = next_interval_us(settings)
        self._rendered = {name: sql.format_map(quoted) for name, sql in raw_queries(package).items()}

    def __getattr__(self, name: str) -> str:
        try:
            return self._rendered[name]
        except KeyError:
            raise AttributeError(f"no query named {name!r} in queries.sql") from None
