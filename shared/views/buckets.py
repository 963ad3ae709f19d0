"""Histogram buckets of every seconds figure (lateness, check durations) and the quantile of
per-bucket counts: the workers export them as metrics, status and the dashboard read them back
from heartbeats. Pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

# Lateness (due time -> written back) and check durations: from 5 ms to 30 min.
# Finer around 1-3 s, where the lateness targets (p99 <= 1 s, nothing over 2 s) are judged.
SECONDS_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0
)  # fmt: skip


def quantile(counts: Sequence[int], bounds: Sequence[float], q: float) -> float | None:
    """The q-quantile of per-bucket counts, interpolated inside its bucket as Prometheus's
    histogram_quantile() does (the +Inf bucket reports the highest finite bound)."""
    total = sum(counts)
    if not total:
        return None
    rank, below = q * total, 0
    for i, n in enumerate(counts):
        if n and below + n >= rank:
            if i == len(bounds):
                return bounds[-1]
            low = bounds[i - 1] if i else 0.0
            return low + (bounds[i] - low) * (rank - below) / n
        below += n
    return bounds[-1]
