"""The peers: what a team would hand-write instead of recheck, measured by `recheck bench`.

A periodic job reads the due ids from MySQL by primary-key keyset and enqueues them on a Redis
broker (`--peer-job first`: all of them before the workers take any; `overlap`: while they
drain, see bench/peers/run.py); worker processes run the same check as every other strategy
and write the rows back with one plain `UPDATE ... SET result, checked, due = NOW() + interval,
count = count + 1 WHERE id IN (...)` per result value (bench/queries.sql: bench_peer_write).

- celery_batched: Celery, one task per --batch ids (500), `celery worker --pool solo` processes
- rq_batched:     RQ, one job per --batch ids, SimpleWorker processes
- celery_per_row, rq_per_row: one task or job per row, the same write for that one id

What they guarantee: in a drain where every worker stays up and every check succeeds, each
due id is checked and written exactly once (one run of the job enqueues each due id once, and
the broker hands each task to one worker). Each UPDATE is atomic; a batch whose rows got
several result values is written in as many autocommit statements.

What they do not (recheck does):
- no dedup: a run of the job that overlaps the previous one enqueues the same ids again, and
  they are checked twice;
- no fence: the UPDATE has no due-time condition, so a late or repeated task overwrites a newer
  result and moves the row's next check again;
- no per-row failure: a row whose check fails fails its whole task, none of its rows written
  (Celery logs it; RQ keeps the job in its failed registry), until the next run of the job;
- work lost with a worker: Celery acknowledges a task as it starts (its default), so a worker
  that dies mid-task loses it (its prefetched, unstarted tasks come back after the broker's
  visibility timeout, an hour); RQ moves a dead worker's started job to its failed registry;
- nothing re-enqueues a row when it comes due again but the next run of the job, and the whole
  due set waits in Redis at once (no backpressure); no jitter, no lateness or freshness figures.

Drain mode only: the job runs once. `--consumers` does not apply: one consumer per process.

Everything of theirs lives in the bench's own Redis under their own key prefixes, so the
bench removes exactly their keys and nothing else.
"""

from __future__ import annotations

import importlib.util

CELERY_PEERS = ("celery_batched", "celery_per_row")
RQ_PEERS = ("rq_batched", "rq_per_row")
PEERS = (*CELERY_PEERS, *RQ_PEERS)
QUEUE = "bench-peers"
CELERY_KEY_PREFIX = "bench-peers-celery:"  # kombu's global_keyprefix: every key and channel
RQ_KEY_PREFIX = "bench-peers-rq"  # RQ reads RQ_KEY_PREFIX from the environment at import
EXTRA = "pip install -e '.[peers]'"


def per_row(strategy: str) -> bool:
    return strategy.endswith("_per_row")


def missing_packages(strategies) -> list[str]:
    """The peers' packages the chosen strategies need and this environment lacks."""
    wanted = {"celery" for s in strategies if s in CELERY_PEERS} | {"rq" for s in strategies if s in RQ_PEERS}
    return sorted(name for name in wanted if importlib.util.find_spec(name) is None)
