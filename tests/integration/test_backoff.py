"""Backing off a failing provider (issue 35): with backoff_threshold, workers that see most of
their checks fail stop calling but for a probe a second, and are back to full rate once a probe
succeeds. Real worker processes; the check stamps each call (the provider's view)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.integration.test_rate_limits import stamps
from tests.support.helpers import recheck, seed_rows
from tests.support.servers import wait_for

pytestmark = pytest.mark.serial  # call rates: serial layer (make test)


def calls_between(folder: Path, start: float, end: float) -> int:
    return sum(1 for at in stamps(folder) if start <= at < end)


def test_a_provider_failing_everything_gets_a_tenth_of_the_calls_and_full_rate_soon_after(
    make_settings, procs, tmp_path
):
    settings = make_settings(interval=10, rate_limit=300, backoff_threshold=0.9, check_kind="batch")
    record, down = tmp_path / "stamps", tmp_path / "provider-down"
    record.mkdir()
    seed_rows(settings, 3000, due_now=True)  # 300 a second at the limit: the limit sets the pace
    env = {"RECHECK_CHECK": "tests.support.checks:flaky_provider", "TEST_CHECK_RECORD": str(record),
           "TEST_PROVIDER_DOWN": str(down)}  # fmt: skip
    procs.start("dispatcher", settings)
    for _ in range(2):  # each worker judges its own checks: no coordination needed
        procs.start("worker", settings, env=env)
    wait_for(lambda: len(stamps(record)) >= 600, 20, "checks at full rate")

    start = time.time()
    time.sleep(4)
    before = calls_between(record, start, time.time()) / (time.time() - start)
    down.touch()  # the provider answers 500 to everything
    outage = time.time()

    def last_second() -> int:
        now = time.time()
        return calls_between(record, now - 1.0, now)

    # Each worker judges its last BACKOFF_WINDOW (1 s) of checks: a second of the calls go first.
    wait_for(lambda: last_second() <= 0.1 * before, 10, "the workers backing off")
    backing_off = time.time()
    tripped = backing_off - outage
    time.sleep(4)
    status = recheck("status", settings=settings).stdout
    during = calls_between(record, backing_off, time.time()) / (time.time() - backing_off)
    down.unlink()
    recovered = time.time()

    def full_rate() -> bool:
        return last_second() >= 0.8 * before

    wait_for(full_rate, 10, "back to full rate")
    took = time.time() - recovered
    print(f"backoff: {before:.0f} calls/s before, backing off {tripped:.1f} s after the provider "
          f"failed, {during:.1f}/s then ({during / before:.1%}), full rate {took:.1f} s after it "
          "recovered")  # fmt: skip
    assert 240 <= before <= 330, before  # the rate limit's pace
    assert during <= 0.1 * before, (before, during)
    assert tripped < 5.0, tripped
    assert "backing off a failing provider" in status, status
    assert took < 10.0
