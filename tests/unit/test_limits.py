"""Sharing a workload's limits over its partitions, and a group's own limits (shared/core/limits.py)."""

from decimal import Decimal

import pytest

from recheck.shared.core.limits import NO_LIMIT, own_limits, partition_limits


def test_one_partition_keeps_the_whole_limits():
    (only,) = partition_limits(200, 20, 1)
    assert (only.rate, only.burst, only.in_flight) == (200, 20, 20)


def test_partitions_share_the_rate_and_every_check_in_flight():
    parts = partition_limits(200, 20, 3)
    assert sum(p.rate for p in parts) == 200
    assert [p.in_flight for p in parts] == [7, 7, 6]
    assert all(p.burst == 7 for p in parts)


def test_a_low_rate_still_grants_one_token_at_a_time():
    (only,) = partition_limits(0.5, 0, 1)
    assert only.burst == 1 and only.limited
    assert not NO_LIMIT.limited and not partition_limits(0, 0, 2)[0].limited


def test_a_groups_own_limits_are_spelled_for_the_take_and_nulls_keep_the_workloads():
    assert own_limits(12.5, 3, 2) == "12.5:3:2"
    assert own_limits(None, None, 3) == "::3"
    assert own_limits(Decimal("0.5"), 0, None) == "0.5:0:"


@pytest.mark.parametrize(
    ("rate", "room", "weight"),
    [
        (-1, None, None),
        (None, -2, None),
        (None, 1.5, None),
        (None, None, 0),
        (None, None, 1001),
        (float("inf"), None, None),
    ],
)
def test_a_groups_own_limits_refuse_what_no_limit_can_be(rate, room, weight):
    with pytest.raises(ValueError):
        own_limits(rate, room, weight)
