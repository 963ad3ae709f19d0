"""Which rows of a write-back are changes for the feed (workers/writing/writeback.py): pure
logic over what MySQL returned before and after the write, no servers."""

from __future__ import annotations

from decimal import Decimal

from recheck.workers.writing.writeback import as_text, candidates, transitions


def test_only_rows_whose_text_differs_or_that_were_failing_are_read_back():
    before = {1: ("up", 0), 2: (Decimal("0.50"), 0), 3: ("down", 2), 4: (7, 0)}
    successes = [("k1", 1, "up"), ("k2", 1, "0.5"), ("k3", 1, "down"), ("k4", 1, "7")]
    assert candidates(before, successes) == [2, 3]  # '0.50' != '0.5' as text; 3 ends a failing streak


def test_a_value_that_reads_back_the_same_is_no_change_whatever_its_text():
    before = {1: (Decimal("0.50"), 0), 2: ("up", 0), 3: ("same", 1)}
    after = {1: Decimal("0.50"), 2: "down", 3: "same"}
    successes = [("k1", 1, "0.5"), ("k2", 1, "down"), ("k3", 1, "same")]
    records = transitions(before, after, successes, [], ["1", "2", "3"])
    assert records == [("2", "up", "down", False, False, None), ("3", "same", "same", True, False, None)]


def test_a_failure_records_the_start_of_a_streak_only():
    before = {1: ("up", 0), 2: ("up", 3)}  # place 2 was already failing
    failures = [("k1", 1, "TimeoutError"), ("k2", 1, "TimeoutError")]
    records = transitions(before, {}, [], failures, ["1", "2"])
    assert records == [("1", "up", "up", False, True, "TimeoutError")]


def test_stored_values_are_shown_as_text():
    assert [as_text(v) for v in (None, "x", b"\xff\x41", Decimal("1.10"), 3, 0.1)] == [
        None, "x", "\ufffdA", "1.10", "3", "0.1"]  # fmt: skip
