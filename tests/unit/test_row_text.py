"""rowtext.py: how a check's columns are spelled in one string and read back (pure)."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pytest

from recheck.shared.mysql.rowtext import AS_IS, HEX, TEXT, parse_row_text, plan_row_text

DATA_TYPES = {
    "id": "bigint",
    "url": "varchar",
    "at": "datetime",
    "day": "date",
    "raw": "varbinary",
    "price": "decimal",
}
TYPES = {name: (data_type, data_type) for name, data_type in DATA_TYPES.items()}  # (data type, column type)
NAMES = ["id", "url", "at", "day", "raw", "price"]


def test_each_type_has_its_spelling_and_only_what_needs_one_a_decoder():
    plan = plan_row_text(TYPES, ["id", "URL", "at", "day", "raw", "price"])
    assert plan is not None
    assert plan.spellings == (AS_IS, TEXT, TEXT, TEXT, HEX, TEXT)
    assert plan.names == ("id", "URL", "at", "day", "raw", "price")  # the objects' keys, as configured
    assert [name for name, _ in plan.decoders] == ["at", "day", "raw", "price"]  # not the id, not the text


def test_the_id_column_among_the_columns_is_one_key():
    plan = plan_row_text(TYPES, ["id", "url", "id"])
    assert plan is not None and plan.names == ("id", "url") and plan.spellings == (AS_IS, TEXT)


def test_a_type_it_does_not_cover_or_a_missing_column_means_row_by_row():
    assert plan_row_text({**TYPES, "bits": ("bit", "bit(8)")}, ["id", "bits"]) is None
    assert plan_row_text(TYPES, ["id", "nowhere"]) is None


def test_rows_decode_to_what_pymysql_gives_and_an_incomplete_text_is_refused():
    plan = plan_row_text(TYPES, NAMES)
    assert plan is not None
    text = (
        '{"id": 7, "url": "u", "at": "2026-11-26 01:02:03.5", "day": "0000-00-00", "raw": "00FF",'
        ' "price": "-1.50"},'
        '{"id": 8, "url": null, "at": null, "day": null, "raw": null, "price": null}'
    )
    got = parse_row_text(text, plan, 2)
    assert got == {
        7: {"id": 7, "url": "u", "at": datetime(2026, 11, 26, 1, 2, 3, 500000), "day": "0000-00-00",
            "raw": b"\x00\xff", "price": Decimal("-1.50")},
        8: {"id": 8, "url": None, "at": None, "day": None, "raw": None, "price": None},
    }  # fmt: skip
    assert type(got[7]["price"]) is Decimal and type(got[7]["at"]) is datetime
    assert parse_row_text(None, plan, 0) == {}
    with pytest.raises(ValueError):
        parse_row_text(text[:40], plan, 2)  # cut short at group_concat_max_len
    with pytest.raises(ValueError, match="1 of 2 rows"):
        parse_row_text(text.split("},")[0] + "}", plan, 2)  # a row the server could not spell, left out
    with pytest.raises(ValueError, match="0 of 3 rows"):
        parse_row_text(None, plan, 3)
    one = '{"id": 1, "url": null, "at": null, "day": "2026-01-02", "raw": null, "price": null}'
    assert isinstance(parse_row_text(one, plan, 1)[1]["day"], date)


def test_a_zerofill_integer_is_read_as_text_and_made_an_int():
    plan = plan_row_text({"id": ("int", "int(5) unsigned zerofill")}, ["id"])
    assert plan is not None and plan.spellings == (TEXT,)
    assert parse_row_text('{"id": "00042"}', plan, 1) == {42: {"id": 42}}
