"""Queue entries: ``b"<id>:<due_ms>"``.

``due_ms`` is the row's due time (a DATETIME(3)) as milliseconds after 1970-01-01 00:00:00,
computed by MySQL with TIMESTAMPDIFF and turned back into a DATETIME by MySQL for the fenced
write-back. No time zone is applied anywhere: the value is an exact, reversible encoding of
what the row held when it was dispatched. Pure functions, no I/O.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import NamedTuple

EPOCH = datetime(1970, 1, 1)
MAX_ID = 2**64 - 1
# DATETIME's range, 1000-01-01 .. 9999-12-31, in ms after the epoch.
MIN_DUE_MS = -30_610_224_000_000
MAX_DUE_MS = 253_402_300_799_999


class Item(NamedTuple):
    entry: bytes
    id: int
    due_ms: int


def make_entry(row_id: int, due_ms: int) -> bytes:
    return b"%d:%d" % (row_id, due_ms)


def parse_entries(raw: list[bytes]) -> tuple[list[Item], list[bytes]]:
    """Split entries read from Redis into well-formed items and malformed leftovers.

    Nothing read from Redis is ever evaluated: only digits are accepted.
    """
    items: list[Item] = []
    malformed: list[bytes] = []
    for entry in raw:
        head, sep, tail = entry.partition(b":")
        digits = tail[1:] if tail[:1] == b"-" else tail
        if sep and head.isdigit() and digits.isdigit() and len(head) <= 20 and len(tail) <= 16:
            row_id, due_ms = int(head), int(tail)
            if row_id <= MAX_ID and MIN_DUE_MS <= due_ms <= MAX_DUE_MS:
                items.append(Item(entry, row_id, due_ms))
                continue
        malformed.append(entry)
    return items, malformed


def ms_to_datetime(due_ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=due_ms)


def datetime_to_ms(value: datetime) -> int:
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def sql_datetime(due_ms: int) -> str:
    """The due time as a DATETIME(3) literal string, for query parameters."""
    return ms_to_datetime(due_ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def batch_json(rows) -> str:
    """Rows (tuples of id, due_ms, ...) as the compact JSON array that JSON_TABLE reads."""
    return json.dumps([list(row) for row in rows], separators=(",", ":"))
