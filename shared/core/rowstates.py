"""A row's state, as its due time says it: the one table of recheck's sentinel due times.

recheck keeps a row's state in its due column alone, so that the keyset over the due index
reads only rows that can be due and a parked row costs nothing per poll:

- a due time before PARKED_FROM: the row waits for it, is due, or is in flight (DUE);
- NULL: a one-shot row handled (DONE; never in the index's range: `due <= NOW(3)` is never true);
- from PARKED_FROM on, a time no clock reaches: parked, never dispatched, each state at its own
  moment (PARKED_AT); any other moment from PARKED_FROM on (one an application wrote by hand)
  counts as PAUSED.

queries.sql names these moments by placeholder ({dead_due}, {parked_from}, ...: SQL_LITERALS),
rendered from here by shared/mysql/sql.py; Python code asks `state_of`. Pure, no I/O.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum


class RowState(Enum):
    DUE = "due"  # waiting for its due time, due, or in flight
    DONE = "done"  # a one-shot row handled: its due time cleared
    ADOPTING = "adopting"  # a one-shot table being adopted: not sorted into due or done yet
    DEAD = "dead"  # a one-shot row that failed max_attempts times: kept, `recheck retry` puts it back
    PAUSED = "paused"  # `recheck pause`: never dispatched until resumed
    QUARANTINED = "quarantined"  # its check kept killing workers: `recheck release` puts it back


PARKED_FROM = datetime(9999, 1, 1)  # due times from here on are never reached: parked
PARKED_AT = {
    RowState.ADOPTING: datetime(9999, 12, 28),
    RowState.DEAD: datetime(9999, 12, 29),
    RowState.PAUSED: datetime(9999, 12, 30),
    RowState.QUARANTINED: datetime(9999, 12, 31),
}
_BY_MOMENT = {moment: state for state, moment in PARKED_AT.items()}


def state_of(due: datetime | None) -> RowState:
    """The state a due column's value says."""
    if due is None:
        return RowState.DONE
    if due < PARKED_FROM:
        return RowState.DUE
    return _BY_MOMENT.get(due, RowState.PAUSED)


def sql_text(moment: datetime) -> str:
    """A moment as both MySQL 8 and MariaDB read it: '9999-12-29 00:00:00'."""
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def sql_literal(moment: datetime) -> str:
    """A moment as an SQL literal: TIMESTAMP'9999-12-29 00:00:00'."""
    return f"TIMESTAMP'{sql_text(moment)}'"


# queries.sql's placeholders for the sentinel moments.
SQL_LITERALS = {
    "parked_from": sql_literal(PARKED_FROM),
    **{f"{state.value}_due": sql_literal(moment) for state, moment in PARKED_AT.items()},
}
