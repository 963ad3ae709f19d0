"""Log setup: one line per event that matters."""

from __future__ import annotations

import logging

import pytest

from shared.logs import setup_logging


@pytest.fixture
def restore_root_logger():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_a_skipped_scheduler_run_is_not_a_warning_line_but_other_warnings_are(capsys, restore_root_logger):
    setup_logging("dispatcher")
    scheduler = logging.getLogger("apscheduler.scheduler")
    scheduler.warning(
        'Execution of job "run (trigger: interval[0:00:00.250000])" skipped: '
        "maximum number of running instances reached (1)"
    )
    scheduler.warning("Job run raised an exception")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "raised an exception" in lines[0]
