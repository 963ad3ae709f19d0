"""The rows a check with `columns` gets, read as ONE string. Pure functions, no I/O.

PyMySQL decodes a result in Python, row by row and field by field: 4.8 µs a row for an id and two
columns (docs/performance.md). queries.sql's `check_rows_text` reads the same rows as one
GROUP_CONCAT of JSON objects, one per row, column name -> value: one field that `json.loads` (C)
takes apart into the very dicts a check's rows are made of. Each value is spelled so that it
decodes to exactly what PyMySQL returns for its column:

- integers as themselves: JSON numbers;
- binary columns (BINARY, VARBINARY, the BLOBs) in hex, decoded to bytes;
- the rest (character columns, DATETIME, TIMESTAMP, DATE, TIME, DECIMAL, FLOAT, DOUBLE, YEAR,
  JSON) as the text the server sends for them anyway (CAST AS CHAR): JSON strings, decoded as
  PyMySQL decodes that text.

A table with a column of any other type among them (BIT, spatial) keeps the row-by-row read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pymysql.converters import convert_date, convert_datetime, convert_timedelta

AS_IS = "as is"
HEX = "hex"
TEXT = "text"


def _datetime(text: str) -> Any:
    try:
        return datetime.fromisoformat(text)
    except ValueError:  # a zero date ('0000-00-00 00:00:00'): PyMySQL's way, the text itself
        return convert_datetime(text)


def _date(text: str) -> Any:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return convert_date(text)


_AS_IS_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_HEX_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_TEXT_DECODERS: dict[str, Callable[[str], Any] | None] = {
    # Character columns through CAST too: MariaDB's JSON columns are LONGTEXT to
    # information_schema, and JSON_ARRAY would nest their documents where PyMySQL gives text.
    **dict.fromkeys(("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set")),
    "datetime": _datetime,
    "timestamp": _datetime,
    "date": _date,
    "time": convert_timedelta,
    "decimal": Decimal,
    "numeric": Decimal,
    "float": float,
    "double": float,
    "real": float,
    "year": int,
    "json": None,  # PyMySQL gives a JSON column's text
}


@dataclass(frozen=True)
class RowText:
    """How each of a check's columns (the id column first) is spelled in the JSON objects and
    decoded back."""

    names: tuple[str, ...]  # as the workload names them: the objects' keys, the id column first
    spellings: tuple[str, ...]  # AS_IS, HEX or TEXT, one per name
    decoders: tuple[tuple[str, Callable[[Any], Any]], ...]  # (name, decoder) where one is needed


def plan_row_text(types: Mapping[str, tuple[str, str]], names: Sequence[str]) -> RowText | None:
    """The spelling of each column (`types`: lower-case column name -> its data type and full
    column type, as information_schema gives them); None if one of them has a type this read
    does not cover."""
    names = tuple(dict.fromkeys(names))  # a name twice (the id column among `columns`) is one key
    spellings: list[str] = []
    decoders: list[tuple[str, Callable[[Any], Any]]] = []
    for name in names:
        data_type, column_type = types.get(name.lower(), ("", ""))
        if data_type in _AS_IS_TYPES and "zerofill" in column_type:  # CONCAT pads it: 00042
            spellings.append(TEXT)
            decoders.append((name, int))
        elif data_type in _AS_IS_TYPES:
            spellings.append(AS_IS)
        elif data_type in _HEX_TYPES:
            spellings.append(HEX)
            decoders.append((name, bytes.fromhex))
        elif data_type in _TEXT_DECODERS:
            spellings.append(TEXT)
            decoder = _TEXT_DECODERS[data_type]
            if decoder is not None:
                decoders.append((name, decoder))
        else:
            return None
    return RowText(names, tuple(spellings), tuple(decoders))


def parse_row_text(text: str | bytes | None, plan: RowText, count: int) -> dict[Any, dict[str, Any]]:
    """key -> its row (column name -> value, the id column among them), from the comma-separated
    JSON objects of `check_rows_text`, which found `count` rows. Raises ValueError unless the text
    holds all of them whole: the server leaves out a row whose object or one of its values would
    pass max_allowed_packet (queries.sql) and cuts the whole text at group_concat_max_len; the
    caller then reads the take row by row."""
    if isinstance(text, bytes):
        text = text.decode()
    rows = json.loads(f"[{text}]") if text else []
    if len(rows) != count:
        raise ValueError(f"{len(rows)} of {count} rows in the text")
    for name, decode in plan.decoders:
        for row in rows:
            value = row[name]
            if value is not None:
                row[name] = decode(value)
    key = plan.names[0]
    return {row[key]: row for row in rows}
