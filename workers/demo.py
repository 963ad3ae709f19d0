"""The built-in demo check (RECHECK_CHECK=recheck.workers.demo:check).

It stands in for "is this user blocked?": a batch check, CPU-cheap, with a result that
changes over time so the status column visibly moves.
"""

from __future__ import annotations

import time


def check(ids: list[int]) -> list[str]:
    minute = int(time.time() // 60)
    return ["blocked" if (row_id + minute) % 97 == 0 else "ok" for row_id in ids]


def noop(ids: list[int]) -> list[None]:
    """Does nothing: for measuring recheck's own overhead."""
    return [None] * len(ids)


async def sleepy(row_id: int) -> str:
    """Waits 50 ms like an HTTP call would (a per-row async check)."""
    import asyncio

    await asyncio.sleep(0.05)
    return "ok"
