"""Example checks. Use one with RECHECK_CHECK=acme_checks.blocklist:check (or :probe).

`check` is a batch check: one call for a whole batch of ids, here answered from a blocklist
file (one id per line, ACME_BLOCKLIST, re-read when it changes). A real one would run one
query or one API call per batch.

`probe` is a per-row async check for I/O-bound work: it opens a TCP connection to
ACME_PROBE_ADDRESS (host:port) as a stand-in for "is this user's endpoint up?". A raised
error records fail_count/last_error for that row only and retries it with backoff.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

_cache: dict[str, tuple[float, frozenset[int]]] = {}


def _blocked_ids() -> frozenset[int]:
    path = os.environ.get("ACME_BLOCKLIST", "")
    if not path:
        return frozenset()
    mtime = Path(path).stat().st_mtime
    cached = _cache.get(path)
    if cached is None or cached[0] != mtime:
        lines = Path(path).read_text().split()
        cached = (mtime, frozenset(int(line) for line in lines))
        _cache[path] = cached
    return cached[1]


def check(ids: list[int]) -> list[str]:
    blocked = _blocked_ids()
    return ["blocked" if row_id in blocked else "ok" for row_id in ids]


async def probe(row_id: int) -> str:
    host, _, port = os.environ.get("ACME_PROBE_ADDRESS", "127.0.0.1:80").rpartition(":")
    _reader, writer = await asyncio.open_connection(host, int(port))
    writer.close()
    await writer.wait_closed()
    return "up"
