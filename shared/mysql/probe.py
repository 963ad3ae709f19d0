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
        # The last statement, its values written in, and the parts it was written for: idle
        # workloads' cursors stay put, so round after round sends the same text (escaping its
        # values was most of a probe's CPU on the client).
        self.rendered: tuple[tuple[object, ...], str] | None = None

    def due(self, parts: Sequence[tuple[Queries, tuple[int, Key | None]]]) -> set[int]:
        """The indexes of the parts (a workload's queries, the keyset position (due_ms, key; a None
        key: before every key) its next poll reads after) that have a row due now there; one
        round trip for all of them."""
        if not parts:
            return set()
        return {int(row[0]) for row in self.db.query(self.statement(parts))}

    def statement(self, parts: Sequence[tuple[Queries, tuple[int, Key | None]]]) -> str:
        """The probe's text for these parts, rendered once while they stay the same."""
        same = tuple((queries.due_probe, start) for queries, start in parts)
        if self.rendered is None or self.rendered[0] != same:
            sql = "\nUNION ALL\n".join(queries.due_probe for queries, _ in parts)
            args: list[object] = []
            for number, (_, (due_ms, key)) in enumerate(parts):
                args += [number, due_ms * 1000, due_ms * 1000, key, key]
            self.rendered = (same, self.db.render(sql, args))
        return self.rendered[1]

    def close(self) -> None:
        self.db.close()
