"""A worker whose settings order a workload otherwise than its leader's says so, once a minute
(workers/intake.py warn_settled), with the clock passed in."""

from __future__ import annotations

import logging

import redis

from recheck.shared.policies.ordering import FIFO
from recheck.shared.redis.keys import Keys
from recheck.shared.redis.store import Store
from recheck.workers.intake import SETTLED_WARN_EVERY, Intake


def test_a_worker_ordering_otherwise_than_its_leader_warns_once_a_minute(caplog):
    store = Store(redis.Redis(port=1), Keys("unit"), ordering=FIFO)  # never asked: no server needed
    intake = Intake(store, "w1", prefix="[orders] ")
    with caplog.at_level(logging.WARNING, logger="recheck.workers.intake"):
        assert intake.warn_settled("groups", now=1000.0)
        assert not intake.warn_settled("groups", now=1000.0 + SETTLED_WARN_EVERY - 1)
        assert intake.warn_settled("groups", now=1000.0 + SETTLED_WARN_EVERY)
    assert len(caplog.records) == 2
    said = caplog.records[0].getMessage()
    assert said.startswith("[orders] the dispatcher leading this workload orders its rows by groups, "), said
    assert "this worker's settings by fifo" in said, said
