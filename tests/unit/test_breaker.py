"""Backing off a failing provider (shared/core/failures.py's Breaker), from made-up totals."""

from __future__ import annotations

import logging

from recheck.shared.core.failures import BACKOFF_MIN, PROBE_EVERY, PROBE_SHARE, Breaker
from tests.support.clock import ManualClock


def run(breaker: Breaker, clock: ManualClock, seconds: float, per_second: int, fail: bool, totals: list[int]):
    """Takes every 0.1 s for `seconds`; each allowed id is checked (failing or not) before the
    next take. Returns how many ids were allowed."""
    allowed = 0
    for _ in range(round(seconds * 10)):
        clock.now += 0.1
        cap, wait = breaker.allowance(*totals)
        ids = per_second // 10 if cap is None else cap
        assert (cap == 0) == (wait > 0)
        allowed += ids
        totals[1 if fail else 0] += ids
    return allowed


def test_off_by_default_it_never_caps():
    breaker = Breaker(0.0)
    assert breaker.allowance(0, 10_000) == (None, 0.0)


def test_a_failing_provider_gets_a_probe_a_second_then_full_rate_on_the_first_success(caplog):
    caplog.set_level(logging.WARNING)
    clock, totals = ManualClock(), [0, 0]
    breaker = Breaker(0.9, clock=clock)
    before = run(breaker, clock, 10, 300, False, totals)
    assert before == 3000 and not breaker.backing_off
    during = run(breaker, clock, 60, 300, True, totals)
    assert breaker.backing_off
    assert during <= 0.1 * before * 6, during  # at most 10 % of what the same 60 s got before
    assert breaker.probe == max(1, int(300 * PROBE_SHARE * PROBE_EVERY))
    after = run(breaker, clock, 3, 300, False, totals)
    assert not breaker.backing_off and after >= 300 * 1.5  # full rate within a probe or two
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "backing off" in lines[0] and "recovered" in lines[1]


def test_a_few_failures_or_too_few_checks_do_not_trip_it():
    clock, totals = ManualClock(), [0, 0]
    breaker = Breaker(0.5, clock=clock)
    totals[1] = BACKOFF_MIN - 1  # all failed, but too few to judge
    clock.now = 1.0
    breaker.allowance(*totals)
    assert breaker.allowance(*totals) == (None, 0.0) and not breaker.backing_off
    totals[0] += 100  # then mostly successes
    totals[1] += 40
    clock.now = 2.0
    assert breaker.allowance(*totals) == (None, 0.0) and not breaker.backing_off


def test_a_failing_probe_keeps_it_backing_off():
    clock, totals = ManualClock(), [0, 0]
    breaker = Breaker(0.5, clock=clock)
    run(breaker, clock, 3, 300, True, totals)
    assert breaker.backing_off
    run(breaker, clock, 5, 300, True, totals)
    assert breaker.backing_off
