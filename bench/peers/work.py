"""The peers' task body: run the check on some ids, write them back with plain UPDATEs.

Called by the Celery tasks (bench/peers/celery_app.py) and directly as RQ's job functions.
Each worker process keeps one MySQL connection and the loaded check for its lifetime.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import defaultdict
from functools import cache

from recheck.shared.config import Workload, load_settings
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.sql import Queries
from recheck.workers.checks import Outcome, batch_outcomes, check_kind, load_check, outcome_of


class CheckFailed(Exception):
    """Some row's check failed: the whole task fails, none of its rows written (as a team's
    one-UPDATE job does)."""


class Job:
    def __init__(self, workload: Workload):
        self.db = Database(workload)
        self.queries = Queries(workload, "bench")
        self.check = load_check(workload.check)
        self.kind = check_kind(self.check, workload.check_kind)
        self.interval_us = round(workload.interval * 1_000_000)

    def outcomes(self, ids: list[int]) -> list[Outcome]:
        """The same check as every strategy: a batch check gets the list, a per-row one each id."""
        if self.kind != "row":
            return batch_outcomes(ids, self.check(list(ids)))
        if inspect.iscoroutinefunction(self.check):
            return [outcome_of(asyncio.run(self.check(i))) for i in ids]
        return [outcome_of(self.check(i)) for i in ids]

    def results(self, ids: list[int]) -> list:
        """The check's results, as a team's task would take them: a batch check's list as it
        comes (no per-row wrapping: recheck's own Outcome handling is not the peer's cost), a
        per-row check's one by one; any failure fails the whole task."""
        if self.kind == "row":
            outcomes = self.outcomes(ids)
            failed = [outcome.text for outcome in outcomes if not outcome.ok]
            if failed:
                raise CheckFailed(f"{len(failed)} of {len(ids)} rows failed, e.g. {failed[0]}")
            return [outcome.text for outcome in outcomes]
        results = self.check(list(ids))
        if len(results) != len(ids) or any(isinstance(result, BaseException) for result in results):
            raise CheckFailed(f"the check failed for some of the {len(ids)} rows")
        return results

    def run(self, ids: list[int]) -> int:
        """Check and write `ids`; the rows written. One UPDATE per distinct result (the no-op
        check: one), no fence, no transaction around them."""
        by_result: dict[str | None, list[int]] = defaultdict(list)
        for row_id, result in zip(ids, self.results(ids), strict=True):
            by_result[None if result is None else str(result)].append(row_id)
        written = 0
        for result, same in by_result.items():
            args = {"result": result, "interval_us": self.interval_us, "ids": same}
            written += self.db.execute(self.queries.bench_peer_write, args)
        return written


@cache
def job() -> Job:
    """This process's Job, from the RECHECK_* variables the bench gave it."""
    return Job(load_settings().default_workload())


def check_batch(ids: list[int]) -> None:
    """RQ's job function for a batch (and the Celery task's body)."""
    job().run(ids)


def check_row(row_id: int) -> None:
    """RQ's job function for one row (and the Celery task's body): the same write, one id."""
    job().run([row_id])
