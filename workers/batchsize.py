"""How many ids a batch-check worker takes next: more while the queue is deep, fewer when not.

Every take costs a round trip to Redis, a write-back statement and an acknowledgement whatever
its size (measured with 3 workers and a batch of 100: fixed takes 30,000-32,600 checks/s at
2.2-2.4x the floor's CPU per check, growing takes 48,700-50,800 at 1.6-1.7x), but users set
RECHECK_WORKER_BATCH for their check (often an API's limit), not for those costs. So a worker
takes up to RECHECK_WORKER_TAKE_MAX ids at once, calls the check on them in slices of at most
RECHECK_WORKER_BATCH, and writes all the outcomes back in one statement. The take doubles while
takes come back full (the queue is deep) and its checks answer quickly (so a bigger take adds
little lateness and little to redo if the worker dies); it halves back toward
RECHECK_WORKER_BATCH as soon as the checks are slow.

A take that comes back short leaves the size as it is: the size only bounds a take, which gets
what waits, so a shallow queue costs nothing at a large size. It used to halve (less than half
full), and at moderate rates that split the dispatcher's pages: at 200,000 rows every 10 s a page
of about 1,200 ids went to takes of 500-2,000 that halved and doubled in turn, 1.6 takes and
wake-ups a page where one does (docs/performance.md, "Moderate rates: one take a page, one
hand-off a take"). Pure logic: no I/O.
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
        elif check_s >= 2 * self.quick_s:
            self.size = max(self.size // 2, self.base)


def slices(count: int, width: int) -> list[range]:
    """Index ranges of at most `width` covering 0..count-1, in order."""
    return [range(start, min(start + width, count)) for start in range(0, count, width)]
