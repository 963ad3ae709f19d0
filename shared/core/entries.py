"""Queue entries: ``b"<id>:<due_ms>"`` (how each kind of key is written: keys.py).

``due_ms`` is the row's due time (a DATETIME(3)) as milliseconds after 1970-01-01 00:00:00,
computed by MySQL with TIMESTAMPDIFF and turned back into a DATETIME by MySQL for the fenced
write-back. No time zone is applied anywhere: the value is an exact, reversible encoding of
what the row held when it was dispatched. Pure functions, no I/O (the JSON batches and SQL
literals made from entries: shared/mysql/batches.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

EPOCH = datetime(1970, 1, 1)
MIN_ID = -(2**63)  # BIGINT's range, signed and unsigned together
MAX_ID = 2**64 - 1
# DATETIME's range, 1000-01-01 .. 9999-12-31, in ms after the epoch.
MIN_DUE_MS = -30_610_224_000_000
MAX_DUE_MS = 253_402_300_799_999


def entry_key(entry: bytes) -> bytes:
    """The key part of an entry ``b"id:due_ms"`` (the in-flight hash's field); a bare key as is."""
    colon = entry.find(b":")
    return entry if colon < 0 else entry[:colon]


Key = int | str | bytes  # a row's key as the application uses it (keys.py)


class Item(NamedTuple):
    entry: bytes
    id: Key  # the row's key as the application uses it (keys.py)
    due_ms: int


def make_entry(row_id: int, due_ms: int) -> bytes:
    return b"%d:%d" % (row_id, due_ms)


def make_entry_text(key: bytes, due_ms: bytes) -> bytes:
    """An entry from a key part as entries spell it (digits or hex) and a due time as bytes."""
    return key + b":" + due_ms


def parse_entries(raw: list[bytes]) -> tuple[list[Item], list[bytes]]:
    """Integer-keyed entries of any BIGINT range (keys.py parses every key kind)."""
    return parse_int_entries(raw, MIN_ID, MAX_ID)


def parse_int_entries(raw: list[bytes], low: int, high: int) -> tuple[list[Item], list[bytes]]:
    """Split entries read from Redis into well-formed items (ids in [low, high]) and malformed
    leftovers.

    Nothing read from Redis is ever evaluated: only digits (and a leading minus) are accepted,
    and int() only sees text that passed (it would accept far more: spaces, '_', '+').
    The hot path of every worker: positive numbers pass the first isdigit() and go no further.
    """
    items: list[Item] = []
    malformed: list[bytes] = []
    append = items.append
    new = tuple.__new__  # Item(...) without the Python frame of a NamedTuple's __new__
    for entry in raw:
        head, sep, tail = entry.partition(b":")
        if (
            sep
            and len(head) <= 20
            and len(tail) <= 16
            and (head.isdigit() or (head[:1] == b"-" and head[1:].isdigit()))
            and (tail.isdigit() or (tail[:1] == b"-" and tail[1:].isdigit()))
        ):
            row_id, due_ms = int(head), int(tail)
            if low <= row_id <= high and MIN_DUE_MS <= due_ms <= MAX_DUE_MS:
                append(new(Item, (entry, row_id, due_ms)))
                continue
        malformed.append(entry)
    return items, malformed


def ms_to_datetime(due_ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=due_ms)


def datetime_to_ms(value: datetime) -> int:
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
