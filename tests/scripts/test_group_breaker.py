"""A breaker per group (issue 47, item 1), on the scripts' clock: a group whose checks fail in a
row is held in Redis (no call) while the others go on; one probe after the open time, doubled
after each failed probe; closed again by a probe's success. Only a real Redis, no MySQL."""

from __future__ import annotations

import pytest

from recheck.shared.redis.store import Counts, Store
from tests.scripts.conftest import OWNER, Clock

ACME, GLOBEX = b"acme".hex().encode(), b"globex".hex().encode()
SECOND_US = 1_000_000


@pytest.fixture
def grouped(make_store):
    clock = Clock()
    store = make_store(clock, group_column="merchant", group_breaker_failures=5, group_breaker_open=5.0)
    store.push(OWNER, [b"%d:1000:%s" % (i, ACME) for i in range(1, 201)])
    return store, clock


def of(taken: list[bytes]) -> list[int]:
    return [int(entry.split(b":")[0]) for entry in taken]


def ack(store: Store, taken: list[bytes], failed: bool):
    counts = Counts(failed=len(taken)) if failed else Counts(checked=len(taken))
    return store.acknowledge("w1", taken, [], counts, whole=False, failed=taken if failed else ())


def test_a_group_failing_in_a_row_waits_then_one_probe_goes_and_its_success_closes_it(grouped):
    store, clock = grouped
    first = store.take("w1", 5).entries
    assert ack(store, first[:4], failed=True).opened == []  # 4 in a row: not yet
    acked = ack(store, first[4:], failed=True)
    assert acked.opened == ["acme"] and acked.still_held == 1
    store.push(OWNER, [b"%d:1000:%s" % (i, GLOBEX) for i in range(1001, 1004)])
    assert of(store.take("w1", 50).entries) == [1001, 1002, 1003]  # the others go on, acme waits
    assert "held back by its breaker: 5 checks failed in a row; next probe in" in store.group_state(ACME)
    assert store.group_overview().open_count == 1 and store.group_overview().open == ("acme",)
    clock.now_us += 5 * SECOND_US - 1000
    assert store.take("w1", 50).entries == []  # not before its open time
    clock.now_us += 1000
    probe = store.take("w1", 50).entries
    assert of(probe) == [6]  # one probe, however much the take could hold
    assert store.take("w1", 50).entries == []  # none while its outcome is awaited
    acked = ack(store, probe, failed=False)
    assert (acked.closed, acked.opened, acked.kept_open) == (["acme"], [], [])
    assert len(store.take("w1", 50).entries) == 50  # closed: its rows go at once, at full rate
    assert store.group_overview().open_count == 0


def test_a_failed_probe_doubles_the_wait_and_a_lost_one_is_followed_by_another(grouped):
    store, clock = grouped
    ack(store, store.take("w1", 5).entries, failed=True)
    clock.now_us += 5 * SECOND_US
    probe = store.take("w1", 50).entries
    assert ack(store, probe, failed=True).kept_open == ["acme"]
    clock.now_us += 10 * SECOND_US - 1000
    assert store.take("w1", 50).entries == []  # 10 s now, not 5
    clock.now_us += 1000
    lost = store.take("w1", 50).entries  # this probe's worker dies: its outcome never comes
    assert len(lost) == 1
    clock.now_us += 10 * SECOND_US
    again = store.take("w2", 50).entries
    assert len(again) == 1 and again != lost  # another probe, one open time later
    assert ack(store, lost, failed=False).closed == []  # a late outcome of an older probe: nothing
    assert store.acknowledge("w2", again, [], Counts(checked=1), whole=False).closed == ["acme"]


def test_outcomes_of_checks_taken_before_it_opened_change_nothing_and_a_success_starts_over(grouped):
    store, clock = grouped
    taken = store.take("w1", 9).entries
    ack(store, taken[:4], failed=True)
    ack(store, taken[4:5], failed=False)  # a success: the count starts over
    assert ack(store, taken[5:8], failed=True).opened == []  # 3 in a row
    store.take("w1", 3)
    opened = ack(store, taken[8:] + of_held(store, "w1")[:1], failed=True).opened
    assert opened == ["acme"]
    late = of_held(store, "w1")  # taken before it opened, acknowledged while it is open
    acked = ack(store, late, failed=True)
    assert (acked.opened, acked.kept_open, acked.closed) == ([], [], [])
    clock.now_us += 4 * SECOND_US
    assert store.take("w1", 50).entries == []  # the open time did not move


def of_held(store: Store, worker: str) -> list[bytes]:
    return sorted(store.held(worker))


def test_without_a_breaker_failures_hold_nothing_back(make_store):
    store = make_store(Clock(), group_column="merchant")
    store.push(OWNER, [b"%d:1000:%s" % (i, ACME) for i in range(1, 101)])
    for _ in range(5):
        taken = store.take("w1", 10).entries
        assert len(taken) == 10 and ack(store, taken, failed=True).opened == []
