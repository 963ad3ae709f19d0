"""Pure logic: entries, check results, write-back rows, SQL rendering, keys, config parsing."""

from __future__ import annotations

from datetime import datetime

import pytest

from shared.config import Settings, describe_error, redact_url
from shared.entries import Item, datetime_to_ms, make_entry, ms_to_datetime, parse_entries, sql_datetime
from shared.keys import Keys
from shared.sql import Queries, raw_queries
from workers.checks import CheckShapeError, Outcome, batch_outcomes, check_kind, per_row
from workers.writeback import split_outcomes


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
        b"-12:5",
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


def test_batch_outcomes_accepts_list_or_dict_and_maps_types():
    ids = [1, 2, 3, 4]
    outcomes = batch_outcomes(ids, ["ok", 5, None, ValueError("bad")])
    assert outcomes == [
        Outcome(True, "ok"),
        Outcome(True, "5"),
        Outcome(True, None),
        Outcome(False, "ValueError: bad"),
    ]
    assert batch_outcomes(ids, {4: True, 3: False, 2: 1.5, 1: "x"}) == [
        Outcome(True, "x"),
        Outcome(True, "1.5"),
        Outcome(True, "0"),
        Outcome(True, "1"),
    ]


def test_batch_outcomes_rejects_the_wrong_shape_clearly():
    with pytest.raises(CheckShapeError, match="returned 1 results for 2 ids"):
        batch_outcomes([1, 2], ["ok"])
    with pytest.raises(CheckShapeError, match="without results for 1 of 2 ids"):
        batch_outcomes([1, 2], {1: "ok"})
    with pytest.raises(CheckShapeError, match="returned str"):
        batch_outcomes([1, 2], "ok")
    with pytest.raises(CheckShapeError, match="returned NoneType"):
        batch_outcomes([1], None)
    bad_type = batch_outcomes([1], [object()])[0]
    assert not bad_type.ok and "CheckShapeError" in bad_type.text


def test_check_kind_detection():
    def plain(ids):
        return ids

    async def coroutine(row_id):
        return row_id

    assert check_kind(plain) == "batch"
    assert check_kind(coroutine) == "row"
    assert check_kind(per_row(lambda row_id: row_id)) == "row"
    assert check_kind(coroutine, "batch") == "batch"


def test_split_outcomes_clips_texts_to_their_columns():
    items = [Item(b"1:5", 1, 5), Item(b"2:6", 2, 6)]
    successes, failures = split_outcomes(
        items, [Outcome(True, "abcdef"), Outcome(False, "E" * 50)], result_limit=3, error_limit=10
    )
    assert successes == [(1, 5, "abc")]
    assert failures == [(2, 6, "E" * 10)]


def test_every_query_renders_with_quoted_identifiers_and_no_leftover_braces():
    settings = Settings(_env_file=None, table="devices", id_column="device_id", due_column="due_at")
    queries = Queries(settings)
    for name in raw_queries():
        sql = getattr(queries, name)
        assert "{" not in sql and "}" not in sql, name
    assert "`devices`" in queries.due_page and "`due_at`" in queries.due_page
    # The keyset must be spelled out, never a row constructor (see queries.sql).
    assert "(`due_at`, `device_id`) >" not in queries.due_page
    assert "RETURNING" not in " ".join(raw_queries().values()).upper()


def test_keys_share_one_hash_tag_for_redis_cluster():
    keys = Keys("acme")
    names = [keys.queue, keys.inflight, keys.suspects, keys.workers, keys.stats, keys.reclaims,
             keys.quarantine, keys.leader, keys.epoch, keys.processing("w1"), keys.landing("w1"),
             keys.heartbeat("w1")]  # fmt: skip
    assert all(name.startswith("{acme}:") for name in names)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("table", "users; DROP TABLE x", "plain SQL identifier"),
        ("id_column", "1abc", "plain SQL identifier"),
        ("interval", "0", "greater than 0"),
        ("check", "no_colon", "package.module:function"),
        ("mysql_url", "postgres://x/y", "mysql://"),
        ("mysql_url", "mysql://root@h/bad-name", "plain identifier"),
        ("redis_url", "http://x", "redis://"),
        ("key_prefix", "has space", "letters, digits"),
    ],
)
def test_bad_values_name_their_variable(field, value, message):
    with pytest.raises(Exception) as caught:
        Settings(_env_file=None, **{field: value})
    lines = describe_error(caught.value)
    assert len(lines) == 1
    assert lines[0].startswith(f"RECHECK_{field.upper()}: ")
    assert message in lines[0]


def test_redact_url_hides_passwords_only():
    assert redact_url("mysql://app:s3cret@db:3306/x") == "mysql://app:***@db:3306/x"
    assert redact_url("rediss://:pw@cache:6380/0") == "rediss://:***@cache:6380/0"
    assert redact_url("redis://cache:6379/0") == "redis://cache:6379/0"
