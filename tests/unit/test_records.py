"""The typed records that cross processes (shared/core/records.py): JSON keys as users see them,
and tolerance of a record of another version (a rolling upgrade must not break a reader)."""

from __future__ import annotations

import json

from recheck.shared.core.records import DispatcherBeat, ErrorGroup, Freshness, StatusFacts, WorkerBeat


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


def test_a_shared_freshness_sample_reads_back():
    sample = Freshness(due_now=3, overdue_1s=2, count_cap=10, overdue_detail=[[1, 2, 3]], db_epoch=5.5)
    assert Freshness.from_json(json.loads(json.dumps(sample.as_json()))) == sample
