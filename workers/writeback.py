"""Writing a batch's outcomes to MySQL in a constant number of fenced statements.

Successes: one UPDATE. Failures: two more (count the failure, then schedule the retry),
all in one transaction. Every statement is fenced on (id, due time at dispatch): a row
whose due time has moved on (someone else already wrote this cycle) is not touched, so a
retry after a lost connection, or a late duplicate worker, changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from shared.config import Settings
from shared.db import Database
from shared.entries import Item, batch_json, datetime_to_ms
from shared.sql import Queries
from workers.checks import Outcome

CHARACTER_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
JSON_TEXT_LIMIT = 1024  # the VARCHAR size JSON_TABLE reads results and errors as
CLOCK_REFRESH = 60.0  # seconds between readings of the database clock, for lateness figures


@dataclass
class Written:
    succeeded: int  # rows written as checked
    failed: int  # rows written as failed (retry scheduled)
    stale: int  # rows fenced out: their due time had moved on


def clip(text: str | None, limit: int | None) -> str | None:
    if text is None or limit is None:
        return text
    return text[:limit]


def split_outcomes(
    items: Sequence[Item], outcomes: Sequence[Outcome], result_limit: int | None, error_limit: int | None
) -> tuple[list[tuple], list[tuple]]:
    """(successes, failures) as (id, due_ms, text) rows, texts clipped to their columns."""
    successes, failures = [], []
    for item, outcome in zip(items, outcomes, strict=True):
        if outcome.ok:
            successes.append((item.id, item.due_ms, clip(outcome.text, result_limit)))
        else:
            failures.append((item.id, item.due_ms, clip(outcome.text, error_limit)))
    return successes, failures


class WriteBack:
    def __init__(self, settings: Settings, db: Database):
        self.settings = settings
        self.db = db
        self.queries = Queries(settings)
        self.result_limit: int | None = JSON_TEXT_LIMIT
        self.error_limit: int | None = JSON_TEXT_LIMIT
        self.clock_offset_ms = 0.0  # database clock minus this host's clock
        self.clock_read_at = -CLOCK_REFRESH

    def db_now_ms(self) -> float:
        """The database clock, estimated from this host's (offset measured once a minute)."""
        if time.monotonic() - self.clock_read_at >= CLOCK_REFRESH:
            before = time.time()
            db_now = datetime_to_ms(self.db.scalar(self.queries.db_now))
            after = time.time()
            self.clock_offset_ms = db_now - (before + after) * 500
            self.clock_read_at = time.monotonic()
        return time.time() * 1000 + self.clock_offset_ms

    def read_column_limits(self) -> None:
        """Clip texts to the columns' lengths, so one long message cannot fail a whole batch."""
        columns = {
            name.lower(): (data_type, max_length)
            for name, data_type, max_length, _ in self.db.query(
                self.queries.table_columns, {"table": self.settings.table}
            )
        }

        def limit_of(column: str) -> int | None:
            data_type, max_length = columns.get(column.lower(), (None, None))
            if data_type in CHARACTER_TYPES and max_length:
                return min(int(max_length), JSON_TEXT_LIMIT)
            return None if data_type else JSON_TEXT_LIMIT

        self.result_limit = limit_of(self.settings.result_column)
        self.error_limit = limit_of(self.settings.error_column)

    def write(self, items: Sequence[Item], outcomes: Sequence[Outcome]) -> Written:
        settings, queries = self.settings, self.queries
        successes, failures = split_outcomes(items, outcomes, self.result_limit, self.error_limit)
        statements: list[tuple[str, dict]] = []
        if successes:
            statements.append(
                (
                    queries.write_success,
                    {"batch": batch_json(successes), "interval_us": round(settings.interval * 1_000_000)},
                )
            )
        if failures:
            statements.append((queries.record_failure, {"batch": batch_json(failures)}))
            statements.append(
                (
                    queries.schedule_retry,
                    {
                        "batch": batch_json((row_id, due_ms) for row_id, due_ms, _ in failures),
                        "retry_base_ms": round(settings.retry_base * 1000),
                        "retry_max_ms": round(settings.retry_max * 1000),
                    },
                )
            )
        if not statements:
            return Written(0, 0, 0)
        if len(statements) == 1:
            counts = [self.db.execute(*statements[0])]
        else:
            counts = self.db.transaction(statements)
        succeeded = counts[0] if successes else 0
        failed = counts[1 if successes else 0] if failures else 0
        return Written(succeeded, failed, len(successes) - succeeded + len(failures) - failed)
