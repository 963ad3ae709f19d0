"""What a guarded pass needs, on the scripts' clock (issue 46, item 3: time passed in to the
dispatch and ack scripts too): a check that completes while a pass rereads rows is recorded in
its time's window, and the pass's push skips the stale entry it read, in that window and the
next, not after. Twenty seconds of the scripts' clock, no sleep."""

from __future__ import annotations

from recheck.shared.redis.store import Counts
from tests.scripts.conftest import OWNER, Clock

WINDOW_US = 10_000_000  # _lib.lua COMPLETED_WINDOW_S


def test_a_completion_during_a_guarded_pass_keeps_its_stale_entry_out_for_two_windows(make_store):
    clock = Clock()
    clock.now_us -= clock.now_us % WINDOW_US  # the start of a window
    store = make_store(clock)
    assert store.push(OWNER, [b"7:1000"]).pushed == 1
    taken = store.take("w1", 10).entries
    store.begin_guard("sweep", 60_000)  # a sweep reads the row now, before its write-back
    store.acknowledge("w1", taken, [], Counts(checked=1), whole=True)
    clock.now_us += WINDOW_US - 1  # the end of the same window
    assert store.push(OWNER, [b"7:1000"]).pushed == 0  # the sweep's stale read: skipped
    clock.now_us += WINDOW_US  # the next window: the one before is read too
    assert store.push(OWNER, [b"7:1000"]).pushed == 0
    clock.now_us += WINDOW_US  # two windows on (a pass is shorter than a window)
    assert store.push(OWNER, [b"7:1000"]).pushed == 1


def test_without_a_guard_nothing_is_recorded_and_a_push_goes_through(make_store):
    clock = Clock()
    store = make_store(clock)
    store.push(OWNER, [b"7:1000"])
    store.acknowledge("w1", store.take("w1", 10).entries, [], Counts(checked=1), whole=True)
    assert store.push(OWNER, [b"7:1000"]).pushed == 1
