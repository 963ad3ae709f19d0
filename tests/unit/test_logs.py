"""Log setup: one line per event that matters."""

from __future__ import annotations

import json
import logging

import pytest

from recheck.shared.config import ConfigError
from recheck.shared.process.logs import setup_logging
from tests.support.helpers import docs_text


@pytest.fixture
def restore_root_logger():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    own = {name: logging.getLogger(name).level for name in ("recheck", "bench", "httpx")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, was in own.items():
        logger = logging.getLogger(name)
        logger.setLevel(was)
        logger.handlers[:] = []
        logger.propagate = True


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


def test_only_recheck_logs_at_info_other_loggers_from_warning(capsys, restore_root_logger):
    setup_logging("worker")
    logging.getLogger("recheck.workers.lane").info("recheck's own line")
    logging.getLogger("httpx").info("HTTP Request: GET http://example 200 OK")
    logging.getLogger("httpx").warning("a library's warning")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "recheck's own line" in lines[0] and "a library's warning" in lines[1]


def test_a_dictconfig_file_brings_a_librarys_info_lines_back_in_json(capsys, restore_root_logger, tmp_path):
    """The example of docs/operating.md, as written: its formatter is the public recheck.JsonFormatter."""
    example = docs_text("operating.md").split("as JSON for a log shipper:", 1)[1]
    config = tmp_path / "logging.json"
    config.write_text(example.split("```json", 1)[1].split("```", 1)[0])
    assert '"recheck.JsonFormatter"' in config.read_text()
    setup_logging("worker", config_file=str(config))
    logging.getLogger("httpx").info("HTTP Request: GET http://example 200 OK")
    logging.getLogger("recheck.workers.lane").info("still here")
    lines = capsys.readouterr().err.splitlines()
    shown = json.loads(lines[0])
    assert shown["logger"] == "httpx" and shown["level"] == "info" and shown["role"] == "worker"
    assert "still here" in lines[1]


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("missing.json", None, "cannot read"),
        ("broken.json", "{not json", "is not valid json"),
        ("broken.toml", "version = ", "is not valid toml"),
        ("list.json", "[1, 2]", "must hold one object"),
        ("bad.json", '{"handlers": {"h": {"class": "no.such.Handler"}}}', "Unable to configure handler"),
    ],
)
def test_a_bad_dictconfig_file_is_a_configuration_error(tmp_path, restore_root_logger, name, text, said):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError, match="RECHECK_LOG_CONFIG") as raised:
        setup_logging("worker", config_file=str(path))
    assert said in str(raised.value)
