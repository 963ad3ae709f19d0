"""Sharing a workload's limits over its partitions (shared/core/limits.py)."""

from recheck.shared.core.limits import NO_LIMIT, partition_limits


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
