"""How many ids a batch-check worker takes next: more while the queue is deep, fewer when not.

MySQL's cost per check falls with the rows per write-back statement (measured: one statement of
2,000 rows costs about a third per row of twenty of 100), but users set RECHECK_WORKER_BATCH for
their check (often an API's limit), not for MySQL. So a worker takes up to RECHECK_WORKER_TAKE_MAX
ids at once, calls the check on them in slices of at most RECHECK_WORKER_BATCH, and writes all
the outcomes back in one statement. The take doubles while takes come back full (the queue is
deep) and its checks answer quickly (so a bigger take adds little lateness and little to redo if
the worker dies); it halves back toward RECHECK_WORKER_BATCH as soon as the checks are slow or a
take comes back less than half full. Pure logic: no I/O.
"""

from __future__ import annotations

QUICK_TAKE_S = 0.2  # a take whose checks (all its slices) took less than this may grow


class TakeSizer:
    def __init__(self, base: int, ceiling: int, quick_s: float = QUICK_TAKE_S):
        self.base = base
        self.ceiling = max(ceiling, base)  # a ceiling at or below the base: fixed takes
        self.quick_s = quick_s
        self.size = base

    def observe(self, asked: int, got: int, check_s: float) -> None:
        """What the last take asked for and got, and how long its checks took."""
        if got >= asked and check_s < self.quick_s:
            self.size = min(self.size * 2, self.ceiling)
        elif got * 2 < asked or check_s >= 2 * self.quick_s:
            self.size = max(self.size // 2, self.base)


def slices(count: int, width: int) -> list[range]:
    """Index ranges of at most `width` covering 0..count-1, in order."""
    return [range(start, min(start + width, count)) for start in range(0, count, width)]
