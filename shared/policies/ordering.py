"""The order rows are taken in: first in, first out (by due time); priority (rows whose priority
column is 1 first, docs/priorities.md); groups (each group of the group column in turn, within
its own limits, docs/groups.md); or groups with priority (each group's priority rows first, within
its limits).

Each decision the ordering makes for the rest of recheck is one named field or method, so the
SQL, the dispatcher and the store ask it instead of testing `workload.priority_column` or
`workload.group_column`.
"""

from __future__ import annotations

from dataclasses import dataclass

from recheck.shared.config import Workload
from recheck.shared.core.limits import GroupLimit


@dataclass(frozen=True)
class Ordering:
    name: str  # "fifo", "priority", "groups" or "groups with priority"
    # The column whose value 1 makes a row a priority row ("" unless priority): the dispatcher
    # reads such rows in a pass of their own, into a list taken before the rest's.
    priority_by: str = ""
    # While both lists wait, this share of each take comes from the rest's all the same; None:
    # no priority list (the leader moves what an older configuration left there: settle.lua).
    rest_share: float | None = None
    # The column whose value names a row's group ("" unless groups): a queue entry carries the
    # group, and the row waits in its group's list.
    group_by: str = ""
    group_limit: GroupLimit | None = None  # each group's rate and room (groups only)
    # The table of limits and weights per group that the leader copies into Redis ("": none).
    group_limits_from: str = ""

    @property
    def take_script(self) -> str:
        """The Lua script a worker's take runs (shared/redis/lua/): each reads its own lists only;
        the leader moves what an older configuration left in others (settle.lua)."""
        if self.group_by:
            return "take_grouped"  # groups, and groups with priority (their priority lists)
        return "take_priority" if self.priority_by else "take_fifo"

    @property
    def passes(self) -> tuple[bool, ...]:
        """The dispatch passes over the due index, each with its cursor: True for the priority
        rows' pass, which comes first."""
        return (True, False) if self.priority_by else (False,)

    def queued(self, entry: bytes) -> bytes:
        """A pushed entry as the queue holds it: a grouped workload's ends with ":" and its group
        in hex (never part of the key or the due time), which the queue does not keep."""
        return entry.rsplit(b":", 1)[0] if self.group_by else entry


FIFO = Ordering("fifo")


def ordering_of(workload: Workload) -> Ordering:
    """The workload's ordering, as its settings chose it."""
    priority_by = workload.priority_column
    rest_share = workload.priority_share if priority_by else None
    if workload.group_column:
        limit = GroupLimit(
            workload.group_rate_limit,
            workload.group_max_in_flight,
            workload.group_breaker_failures,
            workload.group_breaker_open,
            workload.group_breaker_open_max,
        )
        return Ordering(
            "groups with priority" if priority_by else "groups",
            priority_by=priority_by,
            rest_share=rest_share,
            group_by=workload.group_column,
            group_limit=limit,
            group_limits_from=workload.group_limits_table,
        )
    if priority_by:
        return Ordering("priority", priority_by=priority_by, rest_share=rest_share)
    return FIFO
