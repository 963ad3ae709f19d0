"""Freshness samples cost MySQL O(cap) whatever the backlog, and one serves the whole deployment.

Before: every sampler (each dispatcher's monitor, `recheck run`'s live line, `recheck watch`)
counted due rows three times a second, each up to 100,000 index entries: while a backlog existed
MySQL read up to 600,000 entries a second just to say how far behind it was.
"""

from __future__ import annotations

from bench.pollcost import handler_reads, status_overhead
from shared.db import Database
from shared.sql import Queries
from shared.status import SAMPLED_COUNT_CAP, Sampler, freshness
from tests.support.helpers import make_store, query, scalar, seed_rows


def spread_due_times(sql, settings) -> None:
    """Row i due (i mod 7) seconds ago, minus a little: 0..6 s overdue, all due now."""
    table, due = settings.table, settings.due_column
    query(sql, f"UPDATE {table} SET {due} = NOW(3) - INTERVAL ({settings.id_column} MOD 7) SECOND "
               "- INTERVAL 50000 MICROSECOND")  # fmt: skip


def exact(sql, settings, lateness_s: float) -> int:
    table, due = settings.table, settings.due_column
    statement = f"SELECT COUNT(*) FROM {table} WHERE {due} <= NOW(3) - INTERVAL %s MICROSECOND"
    return scalar(sql, statement, (round(lateness_s * 1e6),))


def test_one_pass_counts_are_exact_under_the_cap_and_the_cap_above(make_settings, sql):
    settings = make_settings(interval=3.0)
    seed_rows(settings, 700)
    spread_due_times(sql, settings)
    db = Database(settings)
    queries = Queries(settings)
    under = freshness(settings, db, queries, cap=1_000)
    assert under["due_now"] == exact(sql, settings, 0.0) == 700
    assert under["overdue_1s"] == exact(sql, settings, 1.0) == 600
    assert under["overdue_interval"] == exact(sql, settings, 3.0) == 400
    assert 6.0 < under["oldest_lateness_s"] < 8.0
    # Above the cap each count is the cap: the oldest 350 entries are all 3 s or more overdue.
    over = freshness(settings, db, queries, cap=350)
    assert (over["due_now"], over["overdue_1s"], over["overdue_interval"]) == (350, 350, 350)
    # 450 oldest: 400 of them are past one interval, all of them past 1 s.
    mixed = freshness(settings, db, queries, cap=450)
    assert (mixed["due_now"], mixed["overdue_1s"], mixed["overdue_interval"]) == (450, 450, 400)
    db.close()


def test_a_sample_reads_o_cap_index_entries_and_one_serves_every_sampler(settings, sql):
    backlog = 3 * SAMPLED_COUNT_CAP
    seed_rows(settings, backlog)
    spread_due_times(sql, settings)  # 6/7 of them overdue by more than 1 s
    store = make_store(settings)
    first_db, second_db = Database(settings), Database(settings)
    first, second = Sampler(settings, first_db, store), Sampler(settings, second_db, store)
    for sampler in (first, second):
        sampler.sample()  # the first sample also takes the slow counts (rows, failing): not typical
    store.client.delete(store.keys.freshness)

    def index_reads(db: Database, sampler: Sampler) -> int:
        overhead = status_overhead(db)[0]
        before = handler_reads(db)[0]
        facts = sampler.sample()
        assert facts["overdue_1s"] == SAMPLED_COUNT_CAP and facts["count_cap"] == SAMPLED_COUNT_CAP
        return handler_reads(db)[0] - before - overhead

    taken = index_reads(first_db, first)
    # One pass over at most cap + 1 entries of the due index, plus a probe for the oldest row and
    # the quarantine count; the old three counts read 3 x min(backlog, 100,000) = 90,000 here.
    assert SAMPLED_COUNT_CAP <= taken <= SAMPLED_COUNT_CAP + 20, taken
    # A second sampler within the second reads the shared sample, not the due index.
    assert index_reads(second_db, second) <= 20
    for db in (first_db, second_db):
        db.close()
