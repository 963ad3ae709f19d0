"""recheck.django's pure parts: how a task's row reads in Django's terms, its texts, its settings."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from recheck.django import table
from recheck.django.environment import mysql_url
from recheck.shared.core.rowstates import PARKED_AT, RowState

AT = datetime(2026, 11, 27, 12, 0, 0, 123000)


def test_a_done_row_is_successful_with_its_value_start_and_attempts():
    started = datetime(2026, 11, 27, 11, 59, 59, tzinfo=UTC)
    text = table.success_text({"sum": 3}, started, "host:1", attempt=3)
    told = table.outcome(text, AT, None, 0, None)
    assert told.status == "SUCCESSFUL" and told.return_value == {"sum": 3} and told.error is None
    assert told.started_at == started and told.finished_at == AT.replace(tzinfo=UTC)
    assert told.worker_ids == ["unknown", "unknown", "host:1"]


@pytest.mark.parametrize(
    ("due", "fails", "status"),
    [
        (AT + timedelta(seconds=5), 0, "READY"),  # waiting, due or running: recheck claims nothing in MySQL
        (AT, 1, "READY"),  # to be retried
        (PARKED_AT[RowState.PAUSED], 0, "READY"),
        (PARKED_AT[RowState.DEAD], 3, "FAILED"),
        (PARKED_AT[RowState.QUARANTINED], 0, "FAILED"),
        (None, 2, "FAILED"),  # discarded after failing (recheck discard): done, never successful
    ],
)
def test_the_other_states_in_django_terms(due, fails, status):
    error = table.error_text(
        "myapp.errors.Declined", "card declined", "Traceback ...\nDeclined: card declined\n"
    )
    told = table.outcome(None, AT, due, fails, error if fails else None)
    assert told.status == status and told.return_value is None
    assert len(told.worker_ids) == fails
    if fails:
        assert told.error == ("myapp.errors.Declined", "Traceback ...\nDeclined: card declined\n")
    assert (told.finished_at is not None) == (status == "FAILED")


def test_errors_recheck_writes_itself_name_a_builtin_class():
    assert table.parse_error("TimeoutError: check did not finish within 600s") == (
        "builtins.TimeoutError",
        "TimeoutError: check did not finish within 600s",
    )
    assert table.parse_error("CheckShapeError: no")[0] == "builtins.Exception"


def test_a_long_traceback_keeps_its_first_line_and_its_end():
    trace = "Traceback (most recent call last):\n" + "  frame\n" * 20_000 + "ValueError: the end\n"
    text = table.error_text("builtins.ValueError", "line one\nline two", trace)
    assert len(text) <= table.LONG_TEXT_LIMIT
    assert text.startswith("builtins.ValueError: line one\n...\n") and text.endswith("ValueError: the end\n")


def test_a_return_value_too_long_to_keep_fails_instead_of_being_cut():
    started = datetime.now(UTC)
    assert json.loads(table.success_text("x" * 60_000, started, "w", 1))["return_value"] == "x" * 60_000
    with pytest.raises(ValueError, match="return less"):
        table.success_text("x" * 70_000, started, "w", 1)


def test_times_are_stored_as_utc_milliseconds_and_priorities_as_two_classes():
    paris = timezone(timedelta(hours=1))
    assert table.utc_naive(datetime(2026, 11, 27, 13, 0, 0, 123456, tzinfo=paris)) == datetime(
        2026, 11, 27, 12, 0, 0, 123000
    )
    assert [table.urgent(p) for p in (-100, 0, 1, 100)] == [0, 0, 1, 1]


def test_a_django_database_as_recheck_reads_it():
    database = {"ENGINE": "django.db.backends.mysql", "NAME": "shop", "USER": "app", "PASSWORD": "p@ss:/",
                "HOST": "db", "PORT": "3307"}  # fmt: skip
    assert mysql_url(database) == "mysql://app:p%40ss%3A%2F@db:3307/shop"
    assert mysql_url({**database, "HOST": "/run/mysqld/mysqld.sock", "PASSWORD": ""}) == (
        "mysql://app@localhost:3307/shop?unix_socket=%2Frun%2Fmysqld%2Fmysqld.sock"
    )
    with pytest.raises(Exception, match="MySQL or MariaDB"):
        mysql_url({**database, "ENGINE": "django.db.backends.postgresql"})
