"""The built-in demo check (RECHECK_CHECK=recheck.workers.demo:check).

It stands in for "is this user blocked?": a batch check, CPU-cheap, with a result that
changes over time so the status column visibly moves.
"""

from __future__ import annotations

import os
import time


def check(ids: list[int]) -> list[str]:
    minute = int(time.time() // 60)
    return ["blocked" if (row_id + minute) % 97 == 0 else "ok" for row_id in ids]


def noop(ids: list[int]) -> list[None]:
    """Does nothing: for measuring recheck's own overhead."""
    return [None] * len(ids)


async def sleepy(row_id: int) -> str:
    """Waits like an HTTP call would (a per-row async check): DEMO_CHECK_SECONDS, 0.05 by default."""
    import asyncio

    await asyncio.sleep(float(os.environ.get("DEMO_CHECK_SECONDS") or 0.05))
    return "ok"
