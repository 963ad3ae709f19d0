"""The typed records that cross processes (shared/core/records.py): JSON keys as users see them,
and tolerance of a record of another version (a rolling upgrade must not break a reader)."""

from __future__ import annotations

import json

from recheck.shared.core.records import (
    DispatcherBeat,
    ErrorGroup,
    Freshness,
    GroupFacts,
    OneShotFacts,
    PriorityFacts,
    StatusFacts,
    WorkerBeat,
)


def test_a_heartbeat_round_trips_through_json_with_its_documented_keys():
    beat = WorkerBeat(id="h-1-ab", host="h", pid=1, started=2.5, kind="batch", workload="users", checked=7,
                      rate=1.5, lateness_buckets=[1, 2], overdue_in_hand=[1000], last_error="E")  # fmt: skip
    data = json.loads(json.dumps(beat.as_json()))
    assert {
        "id",
        "kind",
        "workload",
        "checked",
        "rate",
        "lateness_buckets",
        "mysql_up_for",
        "limited",
    } <= set(data)
    assert WorkerBeat.from_json(data) == beat


def test_a_heartbeat_of_another_version_is_read_with_defaults():
    old = {"id": "h-1", "checked": "7", "rate": 2, "surprise": 1, "lateness_buckets": [1, "x"]}
    beat = WorkerBeat.from_json(old)
    assert (beat.id, beat.checked, beat.rate, beat.lateness_buckets) == ("h-1", 0, 2.0, [])
    assert WorkerBeat.from_json(None, id="member").id == "member"  # unreadable: alive, by its member
    assert (
        DispatcherBeat.from_json({"role": "leader", "dispatched": True}).dispatched == 0
    )  # bool is no count


def test_status_facts_as_json_keep_their_keys_and_nest_their_records():
    facts = StatusFacts(table="db.t", workers=[WorkerBeat(id="w", lateness_buckets=[3])],
                        errors=[ErrorGroup(error="E", count=2, examples=["1"])])  # fmt: skip
    data = facts.as_json()
    assert data["workers"][0]["id"] == "w" and data["errors"][0] == {
        "error": "E", "count": 2, "examples": ["1"], "first_seen": None, "last_seen": None}  # fmt: skip
    assert data["workers"][0]["lateness_buckets"] == [3]  # one-shot status shows them
    facts.sampled_at = 1.0
    assert "lateness_buckets" not in facts.as_json()["workers"][0]  # a sample leaves the bulk out
    json.dumps(data)  # plain JSON all the way down


# The keys `recheck status --json` and /api/status gave before the policies' sections (issue 46).
FLAT_SECTION_KEYS = [
    "once", "pending", "dead", "dead_ids", "priority_depth", "priority_column", "priority_share",
    "group_column", "group_rate_limit", "group_max_in_flight", "groups_waiting", "groups_at_rate",
    "groups_at_room", "groups_held", "groups_open", "groups_open_names",
]  # fmt: skip


def test_the_policies_sections_are_written_flat_under_their_old_names():
    plain = StatusFacts(table="db.t").as_json()
    assert not any(isinstance(value, dict) for key, value in plain.items() if key != "counters")
    assert {key: plain[key] for key in FLAT_SECTION_KEYS} == {
        "once": False, "pending": None, "dead": 0, "dead_ids": [], "priority_depth": 0, "priority_column": "",
        "priority_share": 0.0, "group_column": "", "group_rate_limit": 0.0, "group_max_in_flight": 0,
        "groups_waiting": 0, "groups_at_rate": 0, "groups_at_room": 0, "groups_held": [], "groups_open": 0,
        "groups_open_names": [],
    }  # fmt: skip
    assert not {"one_shot", "priority", "groups"} & set(plain)
    every = StatusFacts(
        one_shot=OneShotFacts(pending=5, dead=1, dead_ids=[{"id": "7", "fails": 3, "error": "E"}]),
        priority=PriorityFacts(column="express", share=0.25, depth=9),
        groups=GroupFacts(column="merchant", rate_limit=5.0, waiting=3, held=[{"group": "a", "waiting": 2}],
                          open=1, open_names=["a"]),
    ).as_json()  # fmt: skip
    assert (every["once"], every["pending"], every["dead"], every["dead_ids"][0]["id"]) == (True, 5, 1, "7")
    priority = (every["priority_column"], every["priority_share"], every["priority_depth"])
    assert priority == ("express", 0.25, 9)
    assert (every["group_column"], every["group_rate_limit"], every["groups_held"]) == (
        "merchant", 5.0, [{"group": "a", "waiting": 2}])  # fmt: skip
    assert (every["groups_open"], every["groups_open_names"]) == (1, ["a"])
    assert list(every) == list(plain)  # the same keys in the same order
    json.dumps(every)


def test_a_shared_freshness_sample_reads_back():
    sample = Freshness(due_now=3, overdue_1s=2, count_cap=10, overdue_detail=[[1, 2, 3]], db_epoch=5.5)
    assert Freshness.from_json(json.loads(json.dumps(sample.as_json()))) == sample
