"""tests/support/turns.py: the serial layer's two at a time, and a test marked `alone` by itself."""

from __future__ import annotations

import threading
import time

from tests.support.turns import machine_turn


def test_two_tests_share_the_machine_and_one_alone_waits_for_both_and_holds_back_the_next(tmp_path):
    events: list[str] = []
    first_in = threading.Event()
    release_first = threading.Event()

    def shared(name: str, hold: threading.Event | None = None) -> None:
        with machine_turn(tmp_path, alone=False):
            events.append(f"{name} in")
            if hold is not None:
                first_in.set()
                hold.wait(5)
            events.append(f"{name} out")

    def alone() -> None:
        with machine_turn(tmp_path, alone=True):
            events.append("alone in")
            time.sleep(0.2)
            events.append("alone out")

    first = threading.Thread(target=shared, args=("first", release_first))
    first.start()
    first_in.wait(5)
    shared("beside")  # a second shared turn is not held back by the first
    waiting = threading.Thread(target=alone)
    waiting.start()
    time.sleep(0.2)  # the alone test waits at the turnstile's far side for the first to end
    later = threading.Thread(target=shared, args=("later",))
    later.start()
    time.sleep(0.2)
    assert events == ["first in", "beside in", "beside out"]  # neither the alone test nor the later one
    release_first.set()
    for thread in (first, waiting, later):
        thread.join(5)
    assert events[3:] == ["first out", "alone in", "alone out", "later in", "later out"]
