"""The Celery side of the peers: `celery -A bench.peers.celery_app worker --pool solo`.

The broker is the bench's own Redis (RECHECK_REDIS_URL), every key under CELERY_KEY_PREFIX.
Results are ignored (no backend); acknowledgement is Celery's default, early: a task is
acknowledged as it starts, so a worker that dies mid-task loses it.
"""

from __future__ import annotations

from celery import Celery

from bench.peers import CELERY_KEY_PREFIX, QUEUE, work
from recheck.shared.config import load_settings


def make_app(redis_url: str) -> Celery:
    app = Celery("bench-peers", broker=redis_url, set_as_current=False)
    app.conf.update(
        broker_transport_options={"global_keyprefix": CELERY_KEY_PREFIX},
        broker_connection_retry_on_startup=True,
        task_default_queue=QUEUE,
        task_ignore_result=True,
    )
    return app


app = make_app(load_settings().redis_url)


@app.task(name="bench.check_batch", ignore_result=True)
def check_batch(ids: list[int]) -> None:
    """One batch: check, then one plain UPDATE per result value (bench/peers/work.py)."""
    work.check_batch(ids)


@app.task(name="bench.check_row", ignore_result=True)
def check_row(row_id: int) -> None:
    """One row: check, then the same UPDATE for that one id."""
    work.check_row(row_id)
