"""Logging setup: one line per event, text by default, JSON with RECHECK_LOG_FORMAT=json.

recheck's own loggers (and the benchmark's) log at RECHECK_LOG_LEVEL; every other logger, a
check's libraries included, only from WARNING on: an HTTP client that logs each request at INFO
would otherwise add a line per check. RECHECK_LOG_CONFIG names a `logging.config.dictConfig`
file (JSON or TOML) applied on top, for anything else (a library's INFO lines, a file handler,
this module's JsonFormatter for a log shipper).
"""

from __future__ import annotations

import json
import logging
import logging.config
import os
import sys
import time
import tomllib
from pathlib import Path

from recheck.shared.config import ConfigError

OWN_LOGGERS = ("recheck", "bench")  # the product's modules log as recheck.*, the benchmark's as bench.*


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, role, pid, logger, msg (and exc)."""

    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "role": ROLE,
            "pid": record.process,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload)


ROLE = "recheck"


def setup_logging(role: str, level: str = "INFO", fmt: str = "text", config_file: str = "") -> None:
    global ROLE
    ROLE = role
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s %(levelname)s {role}[{os.getpid()}] %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(level)
    # APScheduler logs every job run at INFO; keep only its warnings, less the expected ones.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    scheduler_log = logging.getLogger("apscheduler.scheduler")  # a filter sees only its own logger's records
    if not any(isinstance(f, SkippedRunFilter) for f in scheduler_log.filters):
        scheduler_log.addFilter(SkippedRunFilter())
    if config_file:
        apply_config_file(config_file)


def apply_config_file(path: str) -> None:
    """logging.config.dictConfig from a JSON or TOML file; ConfigError naming what is wrong.
    Loggers configured before (recheck's) stay unless the file says otherwise."""
    file = Path(path)
    try:
        text = file.read_text()
        config = tomllib.loads(text) if file.suffix == ".toml" else json.loads(text)
    except OSError as error:
        raise ConfigError(f"RECHECK_LOG_CONFIG: cannot read {path}: {error.strerror}") from None
    except (ValueError, tomllib.TOMLDecodeError) as error:
        kind = "toml" if file.suffix == ".toml" else "json"
        raise ConfigError(f"RECHECK_LOG_CONFIG: {path} is not valid {kind}: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"RECHECK_LOG_CONFIG: {path} must hold one object (a dictConfig dictionary)")
    config.setdefault("version", 1)
    config.setdefault("disable_existing_loggers", False)
    try:
        logging.config.dictConfig(config)
    except (ValueError, TypeError, AttributeError, ImportError) as error:
        raise ConfigError(f"RECHECK_LOG_CONFIG: {path}: {error}") from None


class SkippedRunFilter(logging.Filter):
    """A job still running when its next run is due is skipped (max_instances=1, coalesce): the
    expected thing on a slow server, not a warning worth a line every period."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in record.getMessage()
