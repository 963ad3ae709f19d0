"""An uptime monitor's probe: RECHECK_CHECK=uptime_checks.probe:check, RECHECK_COLUMNS=url.

A per-row async check: it gets each monitor's row (its `url` column, read by recheck for the
whole take in one statement) and GETs the URL. The result is "up", or "down: <why>" with the
monitor due again after UPTIME_RETRY_S seconds instead of its interval. Its own settings
(UPTIME_*) come from the compose file's env_file, like any setting of the application.

aiohttp, one session per worker process: with httpx a worker process tops out at about 800
calls/s whatever RECHECK_CONCURRENCY (docs/performance.md, "A per-row HTTP check: which client").
"""

from __future__ import annotations

import os

import aiohttp

from recheck import Recheck

TIMEOUT_S = float(os.environ.get("UPTIME_TIMEOUT_S", "5"))
RETRY_S = float(os.environ.get("UPTIME_RETRY_S", "30"))
USER_AGENT = os.environ.get("UPTIME_USER_AGENT", "recheck-uptime")

_session: aiohttp.ClientSession | None = None


def session() -> aiohttp.ClientSession:
    """One session (one connection pool) per worker process, made inside its event loop, with no
    connection cap of its own: RECHECK_CONCURRENCY already bounds the calls (aiohttp's default
    cap of 100 would queue the rest)."""
    global _session
    if _session is None:
        _session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
            headers={"User-Agent": USER_AGENT},
        )
    return _session


async def check(row) -> str | Recheck:
    try:
        async with session().get(row["url"]) as response:
            status = response.status
    except (TimeoutError, aiohttp.ClientError) as error:
        return Recheck(f"down: {type(error).__name__}", after=RETRY_S)
    if status >= 400:
        return Recheck(f"down: HTTP {status}", after=RETRY_S)
    return "up"
