"""`recheck seed`: insert demo rows fast, due times spread evenly over one interval."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from shared.config import Settings
from shared.db import Database
from shared.sql import Queries

CHUNK = 100_000  # rows per INSERT ... SELECT (what seed_rows can generate in one statement)


def seed(
    settings: Settings,
    db: Database,
    rows: int,
    *,
    due_now: bool = False,
    truncate: bool = False,
    progress: Callable[[int, int], None] | None = None,
    start_in_s: float = 0.0,
) -> tuple[int, int]:
    """Insert `rows` rows after the current highest id. Returns (first id, last id).

    Due times start `start_in_s` seconds from now (negative: already overdue)."""
    queries = Queries(settings)
    if truncate:
        db.execute(queries.truncate)
    first = int(db.scalar(queries.max_id)) + 1
    base = db.scalar(queries.db_now) + timedelta(seconds=start_in_s)  # the database clock, read once
    done = 0
    while done < rows:
        count = min(CHUNK, rows - done)
        db.execute(
            queries.seed_rows,
            {
                "first": first + done,
                "base": base,
                "offset": done,
                "spread_us": 0 if due_now else round(settings.interval * 1_000_000),
                "total": rows,
                "count": count,
            },
        )
        done += count
        if progress:
            progress(done, rows)
    return first, first + rows - 1


class ProgressLine:
    """`seeding 450,000/1,000,000 rows (45%), 210,000 rows/s` on one updating line."""

    def __init__(self, stream, label: str):
        self.stream = stream
        self.label = label
        self.started = time.monotonic()
        self.interactive = stream.isatty()
        self.last_decile = -1

    def __call__(self, done: int, total: int) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        line = f"{self.label} {done:,}/{total:,} rows ({100 * done // total}%), {done / elapsed:,.0f} rows/s"
        if self.interactive:
            self.stream.write("\r" + line + ("\n" if done == total else ""))
        elif done * 10 // total != self.last_decile:
            self.last_decile = done * 10 // total
            self.stream.write(line + "\n")
        self.stream.flush()
