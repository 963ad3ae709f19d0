"""rowtext.py: how a check's columns are spelled in one string and read back (pure)."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pytest

from recheck.shared.mysql.rowtext import AS_IS, HEX, TEXT, parse_row_text, plan_row_text

TYPES = {
    "id": "bigint",
    "url": "varchar",
    "at": "datetime",
    "day": "date",
    "raw": "varbinary",
    "price": "decimal",
}


def test_each_type_has_its_spelling_and_only_what_needs_one_a_decoder():
    plan = plan_row_text(TYPES, ["id", "URL", "at", "day", "raw", "price"])
    assert plan is not None
    assert plan.spellings == (AS_IS, TEXT, TEXT, TEXT, HEX, TEXT)
    assert [position for position, _ in plan.decoders] == [2, 3, 4, 5]  # not the id, not the text


def test_a_type_it_does_not_cover_or_a_missing_column_means_row_by_row():
    assert plan_row_text({**TYPES, "bits": "bit"}, ["id", "bits"]) is None
    assert plan_row_text(TYPES, ["id", "nowhere"]) is None


def test_rows_decode_to_what_pymysql_gives_and_a_cut_text_is_refused():
    plan = plan_row_text(TYPES, ["id", "url", "at", "day", "raw", "price"])
    assert plan is not None
    text = (
        '[7, "u", "2026-11-26 01:02:03.5", "0000-00-00", "00FF", "-1.50"],[8, null, null, null, null, null]'
    )
    assert parse_row_text(text, plan) == {
        7: ("u", datetime(2026, 11, 26, 1, 2, 3, 500000), "0000-00-00", b"\x00\xff", Decimal("-1.50")),
        8: (None, None, None, None, None),
    }
    assert parse_row_text(None, plan) == {}
    with pytest.raises(ValueError):
        parse_row_text(text[:40], plan)
    assert isinstance(parse_row_text('[1, null, null, "2026-01-02", null, null]', plan)[1][2], date)
