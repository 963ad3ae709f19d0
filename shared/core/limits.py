"""A workload's rate_limit and max_in_flight, shared out over its partitions (pure logic).

The limits are kept by the take scripts (_take_grant.lua), in each partition's keys, when a
worker takes entries: a take is granted as many tokens as it may have in one call (no round trip
per id, no polling). A
partitioned workload's partitions live on different Redis Cluster slots, so each keeps its
share: rate_limit / K each, and max_in_flight split as evenly as whole checks allow. Ids are
spread over the partitions by a hash, so each has about 1/K of the work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GRANT_WINDOW = 0.1  # seconds of rate one grant may hand out at most (over all workers)


@dataclass(frozen=True)
class PartLimit:
    rate: float = 0.0  # checks per second in this partition (0: no limit)
    burst: int = 1  # the most tokens one grant hands out
    in_flight: int = 0  # checks running at once in this partition (0: no limit)

    @property
    def limited(self) -> bool:
        return self.rate > 0 or self.in_flight > 0

    def args(self) -> list[str | int]:
        """What the take scripts take as ARGV[3..5] (_take.lua)."""
        return [repr(self.rate), self.burst, self.in_flight]


NO_LIMIT = PartLimit()


def partition_limits(rate_limit: float, max_in_flight: int, partitions: int) -> list[PartLimit]:
    """Each partition's share of the workload's limits."""
    rate = rate_limit / partitions
    burst = max(1, round(rate * GRANT_WINDOW))
    base, extra = divmod(max_in_flight, partitions)
    return [PartLimit(rate, burst, base + (index < extra)) for index in range(partitions)]


def own_limits(rate: object, in_flight: object, weight: object) -> str:
    """A group's own limits as take_grouped.lua reads them ("rate:in flight:weight", '' where the group has
    the workload's: a NULL of the group limits table). ValueError for a value no limit can be: a
    negative rate or room, a weight not a whole number from 1 to 1,000."""
    parts = []
    for name, value, whole in (
        ("rate_limit", rate, False),
        ("max_in_flight", in_flight, True),
        ("weight", weight, True),
    ):
        if value is None:
            parts.append("")
            continue
        number = float(str(value))
        if (
            not math.isfinite(number)
            or number < 0
            or (whole and number != int(number))
            or (name == "weight" and not 1 <= number <= 1000)
        ):
            raise ValueError(f"{name} {value!r}")
        parts.append(str(int(number)) if whole else repr(number))
    return ":".join(parts)


@dataclass(frozen=True)
class GroupLimit:
    """A grouped workload's limits per group (group_column): the same cell rate as a partition's
    rate limit, kept for each group, and checks running at once per group."""

    rate: float = 0.0  # checks per second per group (0: no limit)
    in_flight: int = 0  # checks of one group running at once (0: no limit)
    # The breaker per group: checks of one group failed in a row that open it (0: no breaker);
    # its rows then wait breaker_open seconds for a probe, doubled after each failed probe, at
    # most breaker_open_max (ack.lua, docs/groups.md)
    breaker_failures: int = 0
    breaker_open: float = 5.0
    breaker_open_max: float = 300.0

    @property
    def burst(self) -> int:
        """The most tokens one grant hands a group: about GRANT_WINDOW of its rate, at least 1."""
        return max(1, round(self.rate * GRANT_WINDOW))

    def args(self) -> list[str | int]:
        """What take_grouped.lua takes as ARGV[11..13]."""
        return [repr(self.rate), self.burst, self.in_flight]

    def breaker_arg(self) -> str:
        """What ack.lua takes as ARGV[12]: "failures:open ms:most open ms", "" for no breaker."""
        if not self.breaker_failures:
            return ""
        open_ms = max(1, round(self.breaker_open * 1000))
        return f"{self.breaker_failures}:{open_ms}:{max(open_ms, round(self.breaker_open_max * 1000))}"
