"""Logging setup: one line per event, text by default, JSON with RECHECK_LOG_FORMAT=json."""

from __future__ import annotations

import json
import logging
import os
import sys
import time


class JsonFormatter(logging.Formatter):
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


def setup_logging(role: str, level: str = "INFO", fmt: str = "text") -> None:
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
    root.setLevel(level)
    # APScheduler logs every job run at INFO; keep only its warnings, less the expected ones.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    scheduler_log = logging.getLogger("apscheduler.scheduler")  # a filter sees only its own logger's records
    if not any(isinstance(f, SkippedRunFilter) for f in scheduler_log.filters):
        scheduler_log.addFilter(SkippedRunFilter())


class SkippedRunFilter(logging.Filter):
    """A job still running when its next run is due is skipped (max_instances=1, coalesce): the
    expected thing on a slow server, not a warning worth a line every period."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in record.getMessage()
