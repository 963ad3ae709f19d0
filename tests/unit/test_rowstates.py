"""The one table of sentinel due times (shared/core/rowstates.py) and its SQL: pure, no servers."""

from __future__ import annotations

import re
from datetime import datetime
from importlib import resources

from recheck.shared.core.rowstates import PARKED_AT, PARKED_FROM, SQL_LITERALS, RowState, state_of


def test_each_due_value_says_one_state():
    assert state_of(None) is RowState.DONE
    assert state_of(datetime(2026, 11, 27, 12, 0)) is RowState.DUE
    assert state_of(datetime(9998, 12, 31, 23, 59, 59)) is RowState.DUE
    for state, moment in PARKED_AT.items():
        assert state_of(moment) is state
    assert state_of(PARKED_FROM) is RowState.PAUSED  # parked by hand: counts as paused
    assert state_of(datetime(9999, 6, 1)) is RowState.PAUSED
    assert all(moment >= PARKED_FROM for moment in PARKED_AT.values())
    assert len(set(PARKED_AT.values())) == len(PARKED_AT)


def test_queries_name_the_sentinels_only_through_the_table():
    """No sentinel moment written out in queries.sql: each is a placeholder rendered from the core."""
    text = resources.files("recheck.shared.mysql").joinpath("queries.sql").read_text()
    code = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    assert not re.search(r"9999-\d\d-\d\d", code)
    used = set(re.findall(r"\{(\w+_due|parked_from)\}", code)) - {"next_due", "retry_due"}
    assert used <= set(SQL_LITERALS), used - set(SQL_LITERALS)
    assert SQL_LITERALS["dead_due"] == "TIMESTAMP'9999-12-29 00:00:00'"
