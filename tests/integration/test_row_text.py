"""A check's `columns` read as one string (shared/mysql/rowtext.py) give exactly what PyMySQL's
row-by-row read gives, value for value and type for type, on the real server."""

from __future__ import annotations

import logging

import pytest

from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from tests.support.helpers import workload

KINDS = """CREATE TABLE kinds (
    id BIGINT UNSIGNED PRIMARY KEY,
    i TINYINT, flag TINYINT(1), big BIGINT UNSIGNED, neg INT,
    name VARCHAR(100), latin VARCHAR(20) CHARACTER SET latin1, body MEDIUMTEXT, tag ENUM('a', 'b c'),
    tags SET('x', 'y'), raw VARBINARY(16), fixed BINARY(4), blobby BLOB,
    at DATETIME, at3 DATETIME(3), at6 DATETIME(6), stamp TIMESTAMP(3) NULL, day DATE, span TIME(1),
    price DECIMAL(12, 4), ratio FLOAT, exact DOUBLE, yr YEAR, doc JSON,
    small SMALLINT, medium MEDIUMINT UNSIGNED, padded INT(5) ZEROFILL, code CHAR(3), essay LONGTEXT,
    tome LONGBLOB, amount NUMERIC(6, 2)
)"""
NAMES = [
    "i", "flag", "big", "neg", "name", "latin", "body", "tag", "tags", "raw", "fixed", "blobby",
    "at", "at3", "at6", "stamp", "day", "span", "price", "ratio", "exact", "yr", "doc",
    "small", "medium", "padded", "code", "essay", "tome", "amount",
]  # fmt: skip
VALUES = [
    "(1, -128, 1, 18446744073709551615, -2147483648, 'plain', 'caf\xe9',"
    " 'a\\nb\\t\"q\" \\\\ \U0001f600', 'b c',"
    " 'x,y', x'00ff7f80', x'00000000', x'', '2026-11-26 12:34:56', '2026-11-26 12:34:56.789',"
    " '1999-01-02 03:04:05.000001', '2026-11-26 12:34:56.5', '2026-02-28', '-838:59:59.5', -12345678.1234,"
    ' 0.1, 0.1, 2026, \'{"a": [1, 2.5, null], "b": "x"}\', -32768, 16777215, 42, \'ab\','
    " REPEAT('long ', 1000), x'0102', 1234.5)",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, 0, 0, 0, 0, '', '', '', 'a', '', x'', x'01', x'5c22', '0000-00-00 00:00:00', '2026-01-01 00:00:00',"
    " '2026-01-01 00:00:00', NULL, '0000-00-00', '00:00:00', 0, 1e30, 1.0000000000000002, 1901, '[]',"
    " 0, 0, 0, '', '', x'', 0)",
]


def kinds_workload(settings, sql, names=NAMES):
    with sql.cursor() as cursor:
        cursor.execute("SET SESSION sql_mode = ''")  # the zero dates an old application may hold
        cursor.execute(KINDS)
        cursor.execute(f"INSERT INTO kinds (id, {', '.join(NAMES)}) VALUES {', '.join(VALUES)}")
    return workload(settings, "kinds", table="kinds", id_column="id", columns=names)


def pymysql_rows(rows: Rows) -> dict:
    """What PyMySQL's own decoding gives for the same statement's rows."""
    args = {"keys": "[1, 2, 3, 4]"}
    names = ("id", *NAMES)
    return {
        row[0]: dict(zip(names, row, strict=True)) for row in rows.db.query(rows.queries.check_rows, args)
    }


def test_every_covered_type_reads_as_pymysql_decodes_it(settings, sql, caplog):
    caplog.set_level(logging.INFO)
    rows = Rows(kinds_workload(settings, sql), Database(settings))
    assert rows.table.row_text is not None  # every column here is read as one string
    got = rows.check_rows([1, 2, 3, 4])  # 4 does not exist
    assert "read row by row" not in caplog.text  # it was read as one string
    expected = pymysql_rows(rows)
    assert sorted(got) == sorted(expected) == [1, 2, 3]
    for key in expected:
        assert list(got[key]) == ["id", *NAMES]  # every column by its name, the id column first
        for name, wanted in expected[key].items():
            assert (type(got[key][name]), got[key][name]) == (type(wanted), wanted), (key, name)
    rows.db.close()


def test_a_take_over_group_concat_max_len_is_read_row_by_row(settings, sql, caplog):
    caplog.set_level(logging.INFO)
    rows = Rows(kinds_workload(settings, sql), Database(settings))
    rows.db.execute("SET SESSION group_concat_max_len = 64")  # the first row alone is longer
    assert rows.check_rows([1, 2, 3]) == pymysql_rows(rows)
    assert "did not read as one string (" in caplog.text  # the text cut inside the first row


def test_a_value_the_server_cannot_spell_is_read_row_by_row_not_lost(settings, sql, caplog):
    """HEX of a blob past max_allowed_packet is NULL: that row's array is left out (and counted
    missing), never read as a NULL value or as a row deleted since its dispatch."""
    caplog.set_level(logging.INFO)
    workload_ = kinds_workload(settings, sql)
    with sql.cursor() as cursor:
        cursor.execute("UPDATE kinds SET tome = REPEAT('x', 600000) WHERE id = 3")
        cursor.execute("SELECT @@GLOBAL.max_allowed_packet")
        (packet,) = cursor.fetchone()
        cursor.execute("SET GLOBAL max_allowed_packet = 1048576")  # for the next connection only
        try:
            rows = Rows(workload_, Database(workload_))
            rows.table  # noqa: B018 (connects now, with the 1 MB packet)
        finally:
            cursor.execute(f"SET GLOBAL max_allowed_packet = {int(packet)}")
    got = rows.check_rows([1, 2, 3])
    assert got == pymysql_rows(rows) and got[3]["tome"] == b"x" * 600000
    assert "did not read as one string (2 of 3 rows in the text)" in caplog.text
    rows.db.close()
    rows.db.close()


@pytest.mark.parametrize("column", ["bits BIT(8)", "spot POINT"])
def test_a_column_of_another_type_keeps_the_row_by_row_read(settings, sql, column):
    name = column.split()[0]
    with sql.cursor() as cursor:
        cursor.execute(f"CREATE TABLE odd (id INT PRIMARY KEY, {column})")
        cursor.execute("INSERT INTO odd (id) VALUES (7)")
    rows = Rows(workload(settings, "odd", table="odd", id_column="id", columns=[name]), Database(settings))
    assert rows.table.row_text is None
    assert rows.check_rows([7]) == {7: {"id": 7, name: None}}
    rows.db.close()


def test_the_id_column_among_the_columns_is_one_key_either_way(settings, sql, caplog):
    caplog.set_level(logging.INFO)
    rows = Rows(kinds_workload(settings, sql, names=["id", "name"]), Database(settings))
    wanted = {1: {"id": 1, "name": "plain"}, 2: {"id": 2, "name": None}}
    assert rows.check_rows([1, 2]) == wanted  # one string
    rows.db.execute("SET SESSION group_concat_max_len = 4")
    assert rows.check_rows([1, 2]) == wanted  # row by row
    assert "did not read as one string (" in caplog.text
    rows.db.close()
