"""SliceRun: a take's slices called in turn in one thread, each call's time watched by the lane."""

from __future__ import annotations

import threading

from recheck.workers.slicerun import SliceRun
from tests.support.clock import ManualClock


def test_each_slice_is_called_in_turn_with_its_own_list_and_its_time():
    clock = ManualClock(100.0)
    seen: list[list[int]] = []

    def check(ids: list[int]) -> list[str]:
        seen.append(ids)
        clock.now += len(ids)  # a second a row
        return ["ok"] * len(ids)

    run = SliceRun(check, [[1, 2], [3, 4, 5], [6]], clock=clock)
    assert run.running() is None and run.calls() == []
    run()
    assert seen == [[1, 2], [3, 4, 5], [6]]
    calls = run.calls()
    assert [call.value for call in calls] == [["ok"] * 2, ["ok"] * 3, ["ok"]]
    assert [call.seconds for call in calls] == [2.0, 3.0, 1.0]
    assert all(call.error is None for call in calls)
    assert run.running() is None


def test_a_call_that_raises_fails_alone_and_the_next_ones_still_run():
    def check(ids: list[int]) -> list[str]:
        if 2 in ids:
            raise SystemExit("the check called sys.exit()")  # BaseException, not Exception
        return ["ok"] * len(ids)

    run = SliceRun(check, [[1], [2], [3]], clock=ManualClock())
    run()
    calls = run.calls()
    assert [call.error is None for call in calls] == [True, False, True]
    assert isinstance(calls[1].error, SystemExit) and calls[1].value is None


def test_the_lane_sees_which_call_runs_and_abandons_it_only_past_the_timeout():
    """The second call blocks; the lane's view of it moves with the clock, and once past the
    timeout the run is abandoned: the third call never starts."""
    clock = ManualClock()
    inside, release = threading.Event(), threading.Event()
    called: list[list[int]] = []

    def check(ids: list[int]) -> list[str]:
        called.append(ids)
        if ids == [2]:
            inside.set()
            release.wait(10)
        return ["ok"] * len(ids)

    run = SliceRun(check, [[1], [2], [3]], clock=clock)
    thread = threading.Thread(target=run)
    thread.start()
    assert inside.wait(10)
    assert run.running() == (1, 0.0)  # the second call, just begun
    clock.now += 4.9
    assert run.running() == (1, 4.9)
    assert run.abandon_if_past(5.0) is None  # not yet: nothing changes
    clock.now += 0.1
    finished = run.abandon_if_past(5.0)
    assert finished is not None and [call.value for call in finished] == [["ok"]]
    release.set()
    thread.join(10)
    assert called == [[1], [2]]  # abandoned: the third was left for a fresh thread
    assert len(run.calls()) == 2  # the hung call, when it came back, is recorded all the same


def test_between_calls_nothing_is_past_its_timeout():
    clock = ManualClock()
    run = SliceRun(lambda ids: ["ok"] * len(ids), [[1]], clock=clock)
    run()
    clock.now += 1000
    assert run.abandon_if_past(5.0) is None
    assert len(run.abandon()) == 1  # a graceful stop's deadline: what finished, whatever runs
