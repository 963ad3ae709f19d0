"""An uptime monitor's probe: RECHECK_CHECK=uptime_checks.probe:check, RECHECK_COLUMNS=url.

A per-row async check: it gets each monitor's row (its `url` column, read by recheck for the
whole take in one statement) and GETs the URL. The result is "up", or "down: <why>" with the
monitor due again after UPTIME_RETRY_S seconds instead of its interval. Its own settings
(UPTIME_*) come from the compose file's env_file, like any setting of the application.
"""

from __future__ import annotations

import os

import httpx

from recheck import Recheck

TIMEOUT_S = float(os.environ.get("UPTIME_TIMEOUT_S", "5"))
RETRY_S = float(os.environ.get("UPTIME_RETRY_S", "30"))
USER_AGENT = os.environ.get("UPTIME_USER_AGENT", "recheck-uptime")

_client: httpx.AsyncClient | None = None


def client() -> httpx.AsyncClient:
    """One client (one connection pool) per worker lane, made inside its event loop."""
    global _client
    if _client is None:
        _client = httpx.AsyncClient(timeout=TIMEOUT_S, headers={"User-Agent": USER_AGENT})
    return _client


async def check(row) -> str | Recheck:
    try:
        response = await client().get(row["url"])
    except httpx.HTTPError as error:
        return Recheck(f"down: {type(error).__name__}", after=RETRY_S)
    if response.status_code >= 400:
        return Recheck(f"down: HTTP {response.status_code}", after=RETRY_S)
    return "up"
