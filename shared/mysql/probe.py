"""One statement that asks several workloads on a MySQL server a yes-or-no question each, instead
of a round trip per workload: the dispatcher's idle probe (is a row due after the cursor? queries.sql
`due_probe`) and the sweep's (is a row overdue behind it? `overdue_probe`)."""

from __future__ import annotations

from collections.abc import Sequence

from recheck.shared.core.entries import Key
from recheck.shared.mysql.batches import sql_datetime
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.sql import Queries

# A part's statement, "(SELECT %s FROM ... LIMIT 1)", and its arguments but the first (its number).
Part = tuple[str, tuple[object, ...]]


def due_part(queries: Queries, start: tuple[int, Key | None]) -> Part:
    """The idle probe's part of a workload: a row due now after the keyset position `start`
    (due_ms, key; a None key: before every key) its next poll reads after."""
    due_ms, key = start
    return queries.due_probe, (due_ms * 1000, due_ms * 1000, key, key)


def overdue_part(queries: Queries, before: tuple[int, Key | None], lateness_s: float, priority: bool) -> Part:
    """The sweep probe's part of a pass: a row due at least `lateness_s` ago up to and including
    `before` (the pass's cursor; a None key: every key at its due time), of the priority rows or
    of the rest (as Rows.due_page reads them)."""
    due = sql_datetime(before[0])
    sql = queries.overdue_probe_priority if priority else queries.overdue_probe
    return sql, (round(lateness_s * 1_000_000), due, due, before[1], before[1])


class DueProbe:
    def __init__(self, db: Database):
        self.db = db  # a connection of its own, to the server every part's table is on
        # The last statement, its values written in, and the parts it was written for: idle
        # workloads' cursors stay put, so round after round sends the same text (escaping its
        # values was most of a probe's CPU on the client).
        self.rendered: tuple[tuple[Part, ...], str] | None = None

    def due(self, parts: Sequence[Part]) -> set[int]:
        """The indexes of the parts whose SELECT finds a row; one round trip for all of them. Each
        part selects its first argument, its number, which the probe fills in."""
        if not parts:
            return set()
        return {int(row[0]) for row in self.db.query(self.statement(parts))}

    def statement(self, parts: Sequence[Part]) -> str:
        """The probe's text for these parts, rendered once while they stay the same."""
        same = tuple(parts)
        if self.rendered is None or self.rendered[0] != same:
            sql = "\nUNION ALL\n".join(part for part, _ in parts)
            args: list[object] = []
            for number, (_, values) in enumerate(parts):
                args += [number, *values]
            self.rendered = (same, self.db.render(sql, args))
        return self.rendered[1]

    def close(self) -> None:
        self.db.close()
