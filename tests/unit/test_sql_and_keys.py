"""Every statement renders with quoted identifiers; every Redis key shares one hash tag."""

from __future__ import annotations

from recheck.shared.config import Workload
from recheck.shared.mysql.sql import Queries, raw_queries
from recheck.shared.redis.keys import Keys


def test_every_query_renders_with_quoted_identifiers_and_no_leftover_braces():
    settings = Workload(table="devices", id_column="device_id", due_column="due_at")
    queries = Queries(settings)
    for name in raw_queries():
        sql = getattr(queries, name)
        assert "{" not in sql and "}" not in sql, name
    assert "`devices`" in queries.due_page and "`due_at`" in queries.due_page
    # The keyset must be spelled out, never a row constructor (see queries.sql).
    assert "(`due_at`, `device_id`) >" not in queries.due_page
    assert "RETURNING" not in " ".join(raw_queries().values()).upper()


def test_keys_share_one_hash_tag_for_redis_cluster():
    keys = Keys("acme")
    names = [keys.queue, keys.inflight, keys.suspects, keys.workers, keys.stats, keys.reclaims,
             keys.quarantine, keys.leader, keys.epoch, keys.processing("w1"), keys.landing("w1"),
             keys.heartbeat("w1"), keys.priority_queue, keys.turns]  # fmt: skip
    assert all(name.startswith("{acme}:") for name in names)
    assert len(set(names)) == len(names)


def test_with_a_priority_column_each_row_is_read_by_one_of_two_pages():
    plain = Queries(Workload(table="devices"))
    assert "<=>" not in plain.due_page and plain.due_page == plain.due_page_priority
    queries = Queries(Workload(table="devices", priority_column="premium"))
    assert "AND NOT (`premium` <=> 1)" in queries.due_page  # NULL and any other value: the rest
    assert "AND `premium` = 1" in queries.due_page_priority
    assert (
        queries.due_page.replace("AND NOT (`premium` <=> 1)", "AND `premium` = 1")
        == queries.due_page_priority
    )


def test_results_and_errors_travel_as_long_text_only_for_a_text_column():
    short, long = (
        Queries(Workload(), text_limits=(255, None)),
        Queries(Workload(), text_limits=(65535, 65535)),
    )
    for statement in ("write_success", "write_done"):
        assert "result VARCHAR(1024) PATH" in getattr(short, statement)
        assert "result MEDIUMTEXT PATH" in getattr(long, statement)
    assert (
        "error VARCHAR(1024) PATH" in short.record_failure and "error MEDIUMTEXT PATH" in long.record_failure
    )
    assert "VARCHAR(1024) PATH '$[2]'" in Queries(Workload()).write_done  # the table not read yet
