"""How many ids the application asked to check now go onto a queue at high water (pure)."""

from recheck.dispatcher.dispatcher import ASKED_PER_READ, asked_room


def test_asked_ids_go_past_high_water_by_a_tenth_and_no_further():
    assert asked_room(40_000, 0) == 44_000
    assert asked_room(40_000, 40_000) == 4_000  # a backlog at high water: `now` still gets in
    assert asked_room(40_000, 44_000) == 0
    assert asked_room(40_000, 50_000) < 0  # past it: asked ids wait in their list


def test_a_small_high_water_still_lets_one_read_of_asked_ids_in():
    assert asked_room(100, 100) == ASKED_PER_READ
