"""The check plug-in contract: results matched to ids, kinds detected, texts clipped."""

from __future__ import annotations

import zlib

import pytest

from recheck.shared.core.entries import Item
from recheck.shared.core.keys import INT_KEYS, BinaryKeys, TextKeys
from recheck.shared.mysql.sql import JITTER_RUNS, jitter_share
from recheck.workers.checks import (
    CheckShapeError,
    Outcome,
    StoredError,
    batch_outcomes,
    check_kind,
    describe_error,
    per_row,
)
from recheck.workers.writing.writeback import NextDue, split_outcomes


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


def test_a_success_is_jittered_in_the_batch_within_its_bounds():
    """Without an interval column the worker sends each success's next interval, up to `jitter`
    of it earlier (never below the minimum); Recheck(after=) is jittered the same way."""
    items = [Item(f"{i}:1000".encode(), i, 1000) for i in range(200)]
    due = NextDue(low=9_600_000, high=100_000_000, interval_us=10_000_000, jitter=0.05)
    successes, _ = split_outcomes(items, [Outcome(True, "ok")] * 200, None, None, due=due)
    gaps = [row[3] for row in successes]
    assert min(gaps) >= 9_600_000 and max(gaps) <= 10_000_000 and max(gaps) - min(gaps) > 300_000
    again, _ = split_outcomes(items, [Outcome(True, "ok")] * 200, None, None, due=due)
    assert again == successes  # the same on a retried write
    later, _ = split_outcomes(
        [Item(b"7:2000", 7, 2000)], [Outcome(True, "ok", after=50.0)], None, None, due=due
    )
    assert 47_500_000 <= later[0][3] <= 50_000_000
    plain, _ = split_outcomes(items[:1], [Outcome(True, "ok")], None, None, due=NextDue(interval_us=10**7))
    assert plain == [(0, 1000, "ok")]  # no jitter: the SQL's own interval


def test_a_write_backs_jittered_rows_land_on_a_few_due_times():
    """One of JITTER_RUNS steps per row: a batch's rows written at one NOW(3) land in the due
    index as at most 8 runs of one due time each (not 2,000 scattered ones), over the whole
    jitter all the same (the last step is all of it)."""
    items = [Item(f"{i}:1000".encode(), i, 1000) for i in range(2000)]
    due = NextDue(low=0, high=100_000_000, interval_us=10_000_000, jitter=0.05)
    successes, _ = split_outcomes(items, [Outcome(True, "ok")] * 2000, None, None, due=due)
    gaps = sorted({row[3] for row in successes})
    assert gaps == [round(10_000_000 * (1 - 0.05 * k / (JITTER_RUNS - 1))) for k in range(JITTER_RUNS)][::-1]
    assert [jitter_share(c) for c in (0, 2**29 - 1, 2**29, 2**32 - 1)] == [0.0, 0.0, 1 / 7, 1.0]


@pytest.mark.parametrize(
    "keys, raw",
    [
        (INT_KEYS, [b"%d:%d" % (i, 1_764_000_000_000 + i % 1000) for i in (0, 7, 2**63, 2**64 - 1)]),
        (TextKeys(), [b"%s:%d" % (text.encode().hex().upper().encode(), 5) for text in ("a", "été", "")]),
        (BinaryKeys(16), [bytes(range(i, i + 16)).hex().upper().encode() + b":-12" for i in range(3)]),
    ],
)
def test_a_rows_jitter_step_is_the_one_the_sql_hashes_from_its_key_and_due_time(keys, raw):
    """The worker picks a success's step from its entry's CRC32; the SQL (failures, interval
    columns) hashes CONCAT(v.row_key, ':', v.due_ms) of the batch it is sent: the same text for
    every key kind, so both give a row the same step."""
    items, malformed = keys.parse(raw)
    assert not malformed and len(items) == len(raw)
    due = NextDue(low=0, high=10**9, interval_us=10_000_000, jitter=0.3)
    for after in (None, 20.0):
        outcomes = [Outcome(True, "ok", after=after)] * len(items)
        successes, _ = split_outcomes(items, outcomes, None, None, keys, due)
        interval = 10_000_000 if after is None else 20_000_000
        for item, row in zip(items, successes, strict=True):
            seed = f"{keys.ref(item)}:{item.due_ms}".encode()  # what CONCAT prints from the batch
            assert row[3] == round(interval * (1 - 0.3 * jitter_share(zlib.crc32(seed))))


def test_a_stored_error_is_kept_as_written_and_any_other_is_named_by_its_class():
    assert (
        describe_error(StoredError("app.errors.Declined: no\nTraceback ..."))
        == "app.errors.Declined: no\nTraceback ..."
    )
    assert describe_error(ValueError("no")) == "ValueError: no"
