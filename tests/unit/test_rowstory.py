"""Client.state's record (issue 46, item 5): typed fields, the JSON `recheck inspect --json` and
the dashboard give unchanged, and the dict form callers wrote against still reading."""

from __future__ import annotations

import dataclasses
import json

import pytest

from recheck import RowStory
from recheck.shared.views.rowstory import render_story

PAUSED = RowStory(
    workload="default", table="app.users", id=42, due="2026-11-28 10:00:00", late_s=None,
    checked="2026-11-28 09:59:50", result="ok", check_count=3, fail_count=0, last_error=None,
    quarantined=False, paused=True, dead=False, done=False, reclaims=0, now="2026-11-28 10:00:01",
    state="paused", where="paused: not checked until resumed", resume="recheck resume 42",
)  # fmt: skip


def test_its_json_has_the_fields_in_order_and_only_the_action_that_applies():
    shown = PAUSED.as_json()
    assert list(shown) == [
        "workload", "table", "id", "due", "late_s", "checked", "result", "check_count", "fail_count",
        "last_error", "quarantined", "paused", "dead", "done", "reclaims", "now", "state", "where", "resume",
    ]  # fmt: skip
    assert json.loads(json.dumps(shown))["resume"] == "recheck resume 42"


def test_the_dict_form_still_reads():
    assert PAUSED["state"] == "paused" and PAUSED.get("where").startswith("paused")
    assert PAUSED.get("retry") is None
    assert "resume" in PAUSED and "retry" not in PAUSED
    with pytest.raises(KeyError):
        PAUSED["retry"]  # an action that does not apply was never a key


def test_inspect_prints_the_action():
    assert "to check it again: recheck resume 42" in render_story(PAUSED)
    done = dataclasses.replace(PAUSED, paused=False, done=True, state="done", where="done: handled once",
                               resume=None, enqueue="recheck now 42")  # fmt: skip
    text = render_story(done)
    assert "recheck now 42" in text and "resume" not in text
