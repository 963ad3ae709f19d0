"""Primary keys of every kind: how a key travels in a queue entry, in SQL and to the check.

A queue entry is ``b"<key>:<due_ms>"``. The key part is never free text, so nothing in a key
can inject a separator (':' between key and due time, ' ' between entries of a dispatch page
and of a reclaimed group):

- integer keys (any integer column, signed or unsigned, the whole BIGINT range): the decimal
  number, as MySQL prints it;
- text keys (CHAR/VARCHAR up to 255 characters, any character set and collation): the hex of
  the key's UTF-8 bytes, upper case as MySQL's HEX() prints it; a check gets a `str`;
- binary keys (BINARY/VARBINARY up to 255 bytes, e.g. UUIDs as 16 bytes): the hex of the bytes;
  a check gets `bytes`.

The same key part is the in-flight hash's field, so dedup and fencing are exact for any key.
Each kind also renders the SQL that carries its keys: how a JSON batch's key column is read
(`key_column`; `key_alone` in a batch of bare keys), how it is matched against the table's key
(`key_match`: in the column's own character set and collation, so the primary key index is
used) and how a dispatch page prints it (`key_out`). Identifiers here (character sets,
collations) come from information_schema and are checked against a strict pattern before they
are put into SQL. Pure logic, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from recheck.shared.core.entries import MAX_DUE_MS, MIN_DUE_MS, Item, Key, parse_int_entries

MAX_KEY_CHARS = 255  # CHAR/VARCHAR keys
MAX_KEY_BYTES = 255  # BINARY/VARBINARY keys
_SQL_NAME = re.compile(r"[a-z0-9_]{1,64}")
_HEX = re.compile(rb"(?:[0-9A-F]{2})*")  # as MySQL's HEX() prints it; an empty key is a key too


def _due(tail: bytes) -> int | None:
    if len(tail) <= 16 and (tail.isdigit() or (tail[:1] == b"-" and tail[1:].isdigit())):
        due_ms = int(tail)
        if MIN_DUE_MS <= due_ms <= MAX_DUE_MS:
            return due_ms
    return None


@dataclass(frozen=True)
class IntKeys:
    """An integer primary key: BIGINT (signed) or BIGINT UNSIGNED in the JSON batches."""

    unsigned: bool = True
    name: ClassVar[str] = "int"
    key_match: ClassVar[str] = "v.row_key"
    key_out: ClassVar[str] = "{id}"

    @property
    def low(self) -> int:
        return 0 if self.unsigned else -(2**63)

    @property
    def high(self) -> int:
        return 2**64 - 1 if self.unsigned else 2**63 - 1

    def encode(self, key: Key) -> bytes:
        return b"%d" % int(key)

    def parse(self, raw: list[bytes]) -> tuple[list[Item], list[bytes]]:
        return parse_int_entries(raw, self.low, self.high)

    def decode(self, head: bytes) -> Key | None:
        """An entry's key part (an in-flight field) back to the key; None if it is not one."""
        items, _ = parse_int_entries([head + b":0"], self.low, self.high)
        return items[0].id if items else None

    def ref(self, item: Item) -> Key:
        """The key as the JSON batches carry it."""
        return item.id

    def from_text(self, text: str) -> int:
        try:
            key = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer id") from None
        if not self.low <= key <= self.high:
            raise ValueError(f"{text} is outside the id column's range")
        return key

    def show(self, key: Key) -> Key:
        return key

    @property
    def key_column(self) -> str:
        return f"row_key BIGINT{' UNSIGNED' if self.unsigned else ''} PATH '$[0]'"

    @property
    def key_alone(self) -> str:
        return f"row_key BIGINT{' UNSIGNED' if self.unsigned else ''} PATH '$'"


class _HexKeys:
    """Keys carried as the hex of their bytes (text and binary keys)."""

    max_bytes: int

    def raw(self, key: Key) -> bytes:
        raise NotImplementedError

    def decode(self, head: bytes) -> Key | None:
        raise NotImplementedError

    def encode(self, key: Key) -> bytes:
        return self.raw(key).hex().upper().encode()  # the one spelling, as SQL's HEX() writes it

    def parse(self, raw: list[bytes]) -> tuple[list[Item], list[bytes]]:
        items: list[Item] = []
        malformed: list[bytes] = []
        for entry in raw:
            head, sep, tail = entry.partition(b":")
            due_ms = _due(tail) if sep else None
            key = self.decode(head) if due_ms is not None and len(head) <= 2 * self.max_bytes else None
            if key is None or due_ms is None:
                malformed.append(entry)
            else:
                items.append(Item(entry, key, due_ms))
        return items, malformed

    def ref(self, item: Item) -> str:
        return item.entry.partition(b":")[0].decode("ascii")  # the hex, as UNHEX() reads it

    key_column = "row_key VARCHAR(2048) PATH '$[0]'"
    key_alone = "row_key VARCHAR(2048) PATH '$'"


class TextKeys(_HexKeys):
    """A CHAR/VARCHAR primary key; matched in the column's own character set and collation."""

    name = "text"

    def __init__(self, charset: str = "utf8mb4", collation: str = "utf8mb4_bin", length: int = MAX_KEY_CHARS):
        for value in (charset, collation):
            if not _SQL_NAME.fullmatch(value):
                raise ValueError(f"unexpected character set or collation name {value!r}")
        self.charset, self.collation, self.length = charset, collation, length
        self.max_bytes = 4 * length  # UTF-8: at most 4 bytes a character

    def raw(self, key: Key) -> bytes:
        return str(key).encode("utf-8")

    def decode(self, head: bytes) -> Key | None:
        if not _HEX.fullmatch(head):
            return None
        try:
            key = bytes.fromhex(head.decode("ascii")).decode("utf-8")
        except UnicodeDecodeError:
            return None
        return key if len(key) <= self.length else None

    def from_text(self, text: str) -> str:
        if len(text) > self.length:
            raise ValueError(f"{text!r} is longer than the id column's {self.length} characters")
        return text

    def show(self, key: Key) -> Key:
        return key

    @property
    def key_match(self) -> str:
        text = "CONVERT(UNHEX(v.row_key) USING utf8mb4)"
        if self.charset != "utf8mb4":
            text = f"CONVERT({text} USING {self.charset})"
        return f"{text} COLLATE {self.collation}"

    key_out = "HEX(CONVERT({id} USING utf8mb4))"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextKeys) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"TextKeys({self.charset!r}, {self.collation!r}, {self.length})"


class BinaryKeys(_HexKeys):
    """A BINARY/VARBINARY primary key (e.g. a UUID stored as 16 bytes)."""

    name = "binary"

    def __init__(self, length: int = MAX_KEY_BYTES):
        self.length = self.max_bytes = length

    def raw(self, key: Key) -> bytes:
        return bytes(key)  # type: ignore[arg-type]  # a binary column's keys are bytes

    def decode(self, head: bytes) -> Key | None:
        return bytes.fromhex(head.decode("ascii")) if _HEX.fullmatch(head) else None

    def from_text(self, text: str) -> bytes:
        """Hex digits, dashes allowed (a UUID as usually written)."""
        try:
            key = bytes.fromhex(text.replace("-", ""))
        except ValueError:
            raise ValueError(f"{text!r} is not hex (a binary id is given as hex digits)") from None
        if len(key) > self.length:
            raise ValueError(f"{text!r} is longer than the id column's {self.length} bytes")
        return key

    def show(self, key: Key) -> Key:
        return key.hex() if isinstance(key, bytes) else key

    key_match = "UNHEX(v.row_key)"
    key_out = "HEX({id})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BinaryKeys) and self.length == other.length

    def __repr__(self) -> str:
        return f"BinaryKeys({self.length})"


KeyKind = IntKeys | TextKeys | BinaryKeys
INT_KEYS = IntKeys(unsigned=True)
