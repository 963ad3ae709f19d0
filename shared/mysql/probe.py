"""The dispatcher's idle probe: one statement asks every idle workload on a MySQL server whether
a row came due, instead of a poll per workload (queries.sql `due_probe`)."""

from __future__ import annotations

from collections.abc import Sequence

from recheck.shared.mysql.db import Database
from recheck.shared.mysql.sql import Queries


class DueProbe:
    def __init__(self, db: Database):
        self.db = db  # a connection of its own, to the server every part's table is on

    def due(self, parts: Sequence[tuple[Queries, int]]) -> set[int]:
        """The indexes of the parts (a workload's queries, the earliest due time in ms its next
        poll could read) that have a row due now; one round trip for all of them."""
        if not parts:
            return set()
        sql = "\nUNION ALL\n".join(queries.due_probe for queries, _ in parts)
        args = [arg for number, (_, from_ms) in enumerate(parts) for arg in (number, from_ms * 1000)]
        return {int(row[0]) for row in self.db.query(sql, args)}

    def close(self) -> None:
        self.db.close()
