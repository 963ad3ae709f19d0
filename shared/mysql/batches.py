"""Entries as MySQL takes them: the compact JSON arrays JSON_TABLE reads, and DATETIME(3)
literals. Pure functions, no I/O."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from recheck.shared.core.entries import ms_to_datetime


def sql_datetime(due_ms: int) -> str:
    """The due time as a DATETIME(3) literal string, for query parameters."""
    return ms_to_datetime(due_ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def batch_json(rows: Iterable[Any]) -> str:
    """Rows (tuples of id, due_ms, ...; or bare keys) as the compact JSON array that JSON_TABLE
    reads (the encoder writes tuples as arrays: no copy per row)."""
    return json.dumps(rows if isinstance(rows, list) else list(rows), separators=(",", ":"))
