"""Queue entries: exact round trips, and anything malformed set aside, never evaluated."""

from __future__ import annotations

from datetime import datetime

import pytest

from recheck.shared.core.entries import (
    Item,
    datetime_to_ms,
    entry_key,
    make_entry,
    ms_to_datetime,
    parse_entries,
)
from recheck.shared.mysql.batches import sql_datetime


def test_entries_round_trip_exactly():
    due = datetime(2026, 11, 21, 10, 0, 0, 123000)
    ms = datetime_to_ms(due)
    assert ms_to_datetime(ms) == due
    assert sql_datetime(ms) == "2026-11-21 10:00:00.123"
    entry = make_entry(42, ms)
    assert entry == b"42:" + str(ms).encode()
    items, malformed = parse_entries([entry])
    assert items == [Item(entry, 42, ms)] and malformed == []


def test_entries_before_1970_and_at_the_edges_of_datetime():
    for value in (datetime(1000, 1, 1), datetime(1969, 12, 31, 23, 59, 59, 999000), datetime(9999, 12, 31)):
        ms = datetime_to_ms(value)
        items, malformed = parse_entries([make_entry(1, ms)])
        assert not malformed and ms_to_datetime(items[0].due_ms) == value


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"abc",
        b"12",
        b"12:",
        b":12",
        b"1_0:5",  # int() would accept underscores; entries never contain them
        b" 12:5",
        b"12:5 ",
        b"12:5:6",
        b"12:1e3",
        b"99999999999999999999999:1",  # id beyond BIGINT UNSIGNED
        b"1:999999999999999999",  # due beyond DATETIME
        b"__import__('os').system('x'):1",
    ],
)
def test_malformed_entries_are_separated_never_evaluated(raw):
    items, malformed = parse_entries([raw, b"7:1000"])
    assert malformed == [raw]
    assert [item.id for item in items] == [7]


def test_negative_ids_of_a_signed_key_round_trip():
    items, malformed = parse_entries(
        [b"-5:1000", b"-9223372036854775808:1", b"-9223372036854775809:1", b"--5:1"]
    )
    assert [i.id for i in items] == [-5, -(2**63)]
    assert malformed == [b"-9223372036854775809:1", b"--5:1"]
    assert make_entry(-5, 1000) == b"-5:1000"


def test_an_entrys_key_part_is_what_precedes_its_first_colon():
    assert entry_key(b"42:1700000000000") == b"42"
    assert entry_key(b"4A6F:-5") == b"4A6F"  # hex keys never hold a colon
    assert entry_key(b"42") == b"42"  # a bare key, as the in-flight hash holds it
