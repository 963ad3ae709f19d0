"""A clock the test sets: code that waits for time takes a clock as an argument (seconds)."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
