"""The ordering policy: which one a workload's settings choose, and what each decides."""

from recheck.shared.config import Settings
from recheck.shared.core.limits import GroupLimit
from recheck.shared.policies.ordering import ordering_of


def ordering(**values):
    return ordering_of(Settings(_env_file=None, **values).default_workload())


def test_fifo_has_one_pass_and_no_lists_of_its_own():
    fifo = ordering()
    assert (fifo.name, fifo.passes, fifo.rest_share, fifo.group_limit) == ("fifo", (False,), None, None)
    assert fifo.queued(b"42:1700000000000") == b"42:1700000000000"


def test_priority_reads_its_rows_in_a_pass_of_their_own_first():
    priority = ordering(priority_column="urgent", priority_share=0.25)
    assert (priority.name, priority.priority_by, priority.passes) == ("priority", "urgent", (True, False))
    assert priority.rest_share == 0.25


def test_groups_keep_each_groups_limits_and_queue_entries_without_their_group():
    groups = ordering(group_column="merchant_id", group_rate_limit=5.0, group_max_in_flight=3)
    assert (groups.name, groups.group_by, groups.passes) == ("groups", "merchant_id", (False,))
    assert groups.group_limit == GroupLimit(5.0, 3)
    assert groups.queued(b"42:1700000000000:3432") == b"42:1700000000000"
    assert groups.queued(b"7:1700000000000:NULL") == b"7:1700000000000"  # a NULL group


def test_groups_with_priority_keep_both_the_priority_pass_and_each_groups_limits():
    both = ordering(group_column="merchant_id", group_max_in_flight=10, priority_column="express")
    assert (both.name, both.passes, both.priority_by, both.group_by) == (
        "groups with priority",
        (True, False),
        "express",
        "merchant_id",
    )
    assert both.rest_share == 0.1 and both.group_limit == GroupLimit(0.0, 10)
    assert both.queued(b"42:1700000000000:3432") == b"42:1700000000000"


def test_each_ordering_has_its_own_take_script_and_both_grouped_ones_share_one():
    scripts = {
        o.name: o.take_script
        for o in (ordering(), ordering(priority_column="urgent"), ordering(group_column="merchant_id"),
                  ordering(group_column="merchant_id", priority_column="express"))
    }  # fmt: skip
    assert scripts == {
        "fifo": "take_fifo", "priority": "take_priority", "groups": "take_grouped",
        "groups with priority": "take_grouped",
    }  # fmt: skip
