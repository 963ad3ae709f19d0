"""What status concludes from its facts (shared/views/status.py): pure logic, no servers."""

from __future__ import annotations

from recheck.shared.core.records import GroupFacts, OneShotFacts, StatusFacts, WorkerBeat
from recheck.shared.views.status import (
    biggest_held,
    headline,
    limited_by,
    split_overdue,
    verdict,
    waiting_reason,
)


def test_waiting_rows_are_told_from_rows_in_flight():
    detail = [[1000, 9_000_000, 5_000_000], [1000, 9_000_000, 5_000_000], [2000, 8_000_000, 60_000_000]]
    held = split_overdue(3, detail, in_hand=[1000, 1000, 2000])
    assert (held.overdue_waiting, held.overdue_in_flight, held.waiting_intervals) == (0, 3, 0.0)
    one_waits = split_overdue(3, detail, in_hand=[1000, 2000])  # two rows share a due time, one held
    assert (one_waits.overdue_waiting, one_waits.oldest_waiting_s) == (1, 9.0)
    assert one_waits.waiting_intervals == 1.8 and one_waits.overdue_interval == 1  # 9 s of its 5 s
    assert split_overdue(10_000, detail, in_hand=[1000]).overdue_waiting == 9_999  # beyond the detail


def facts(**values) -> StatusFacts:
    base = {"table": "db.users", "interval_s": 10, "count_cap": 10_000, "live_workers": 2,
            "live_dispatchers": 1, "leader": "d-1", "rows": 1000}  # fmt: skip
    return StatusFacts(**{**base, **values})


def test_fresh_says_so_and_names_rows_in_flight():
    shown = facts(fresh=True, overdue_in_flight=3)
    assert headline(shown) == "All 1,000 rows fresh"
    assert verdict(shown).startswith("every row fresh") and "3 rows past due are being checked" in verdict(
        shown
    )


def test_overdue_rows_say_why_they_wait():
    behind = facts(overdue_waiting=40, oldest_waiting_s=3.2, queue_depth=500)
    assert headline(behind) == "40 rows overdue"
    assert "500 ids waiting for a worker: workers are behind" in verdict(behind)
    limited = facts(overdue_waiting=40, queue_depth=500, limited_by="rate", rate_limit=5, needed_rate=100)
    assert waiting_reason(limited).startswith("rate-limited: 500 ids waiting for tokens (rate_limit 5/s")
    no_one = facts(overdue_waiting=1, live_workers=0)
    assert "no live workers" in verdict(no_one)
    capped = facts(overdue_waiting=10_000)
    assert headline(capped) == "10,000+ rows overdue"


def test_failing_checks_are_not_fresh():
    failing = facts(checks_failing=True, recent_checks=100, recent_failed=50, failing_threshold=0.1,
                    last_error="ValueError: boom")  # fmt: skip
    assert headline(failing) == "Checks failing"
    assert "50% of the 100 checks in the last minute failed" in verdict(failing)


def test_the_limits_a_worker_reports_lead_to_one_reason():
    workers = [
        WorkerBeat(id="a", limited="in_flight"),
        WorkerBeat(id="b", limited="rate"),
        WorkerBeat(id="c"),
    ]
    assert limited_by(workers) == "rate" and limited_by(workers[:1]) == "in_flight" and limited_by([]) == ""
    backing_off = [*workers, WorkerBeat(id="d", limited="backoff")]
    assert limited_by(backing_off) == "backoff"  # a failing provider explains the wait first
    waiting = facts(overdue_waiting=40, queue_depth=500, limited_by="backoff")
    assert waiting_reason(waiting).startswith("backing off a failing provider: 500 ids waiting")


def test_a_groups_limits_name_the_group_held_back_with_the_most_rows_waiting():
    """Workers report the group that last held back one of their takes; status names the group
    held back with the most rows waiting (the list is the biggest first, Store.group_overview)."""
    held = GroupFacts(column="tenant", rate_limit=5, waiting=26, at_rate=26,
                      held=[{"group": "big", "waiting": 19_986}, {"group": "s91", "waiting": 1}])  # fmt: skip
    reported = limited_by([WorkerBeat(id="a", limited="group s103"), WorkerBeat(id="b", limited="group s7")])
    assert reported == "group s103"  # (the least name of those reported)
    assert biggest_held(reported, held) == "group big"
    assert biggest_held(reported, GroupFacts(column="tenant")) == "group s103"  # none listed: as reported
    assert biggest_held("rate", held) == "rate"  # the workload's own limits are said as they are
    shown = facts(overdue_waiting=40, queue_depth=20_036, limited_by="group big", groups=held)
    assert waiting_reason(shown).startswith("limited by group big: 20,036 ids waiting, 26 of 26 groups")


def test_dead_rows_are_not_reported_healthy():
    """Issue 45, item 9: with dead rows status said "every row fresh" and exited 0."""
    from recheck.shared.views.status import DEAD_ROWS, NOT_FRESH, exit_code

    dead = facts(fresh=True, one_shot=OneShotFacts(dead=384))
    assert headline(dead) == "384 dead rows"
    assert verdict(dead).startswith("DEAD ROWS: 384 dead rows") and "recheck retry" in verdict(dead)
    assert exit_code(dead) == DEAD_ROWS
    assert exit_code(facts(fresh=True, one_shot=OneShotFacts())) == 0
    overdue_and_dead = facts(fresh=False, overdue_waiting=3, one_shot=OneShotFacts(dead=384))
    assert exit_code(overdue_and_dead) == NOT_FRESH  # the more urgent
