"""The dispatcher's idle probe: one statement asks every idle workload on a MySQL server whether
a row came due, instead of a poll per workload (queries.sql `due_probe`)."""

from __future__ import annotations

from collections.abc import Sequence

from recheck.shared.core.entries import Key
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.sql import Queries


class DueProbe:
    def __init__(self, db: Database):
        self.db = db  # a connection of its own, to the server every part's table is on

    def due(self, parts: Sequence[tuple[Queries, tuple[int, Key | None]]]) -> set[int]:
        """The indexes of the parts (a workload's queries, the keyset position (due_ms, key; a None
        key: before every key) its next poll reads after) that have a row due now there; one
        round trip for all of them."""
        if not parts:
            return set()
        sql = "\nUNION ALL\n".join(queries.due_probe for queries, _ in parts)
        args: list[object] = []
        for number, (_, (due_ms, key)) in enumerate(parts):
            args += [number, due_ms * 1000, due_ms * 1000, key, key]
        return {int(row[0]) for row in self.db.query(sql, args)}

    def close(self) -> None:
        self.db.close()
