"""TakeSizer and slices: how much a batch-check worker takes, and how a take is cut for the check."""

from __future__ import annotations

from recheck.workers.batchsize import TakeSizer, slices


def test_full_quick_takes_double_up_to_the_ceiling():
    sizer = TakeSizer(base=100, ceiling=800)
    seen = []
    for _ in range(6):
        seen.append(sizer.size)
        sizer.observe(asked=sizer.size, got=sizer.size, check_s=0.01)
    assert seen == [100, 200, 400, 800, 800, 800]


def test_a_slow_take_halves_back_to_the_base():
    sizer = TakeSizer(base=100, ceiling=800)
    sizer.size = 800
    sizer.observe(asked=800, got=800, check_s=0.5)  # slow: 2.5x the quick bound
    assert sizer.size == 400
    for _ in range(5):
        sizer.observe(asked=sizer.size, got=sizer.size, check_s=1.0)
    assert sizer.size == 100  # never below the check's own batch


def test_a_shallow_queue_keeps_the_size():
    """A take bounds what it gets: at moderate rates a short take must not shrink the next,
    or one page of ids is split over several takes (and wake-ups)."""
    sizer = TakeSizer(base=100, ceiling=800)
    sizer.size = 800
    sizer.observe(asked=800, got=150, check_s=0.01)  # less than half full: the queue ran low
    assert sizer.size == 800
    for _ in range(5):
        sizer.observe(asked=sizer.size, got=0, check_s=0.0)  # nothing waiting
    assert sizer.size == 800


def test_in_between_the_take_holds_its_size():
    sizer = TakeSizer(base=100, ceiling=800)
    sizer.size = 400
    sizer.observe(asked=400, got=300, check_s=0.05)  # not full, but over half: keep
    sizer.observe(asked=400, got=400, check_s=0.3)  # full, neither quick nor slow: keep
    assert sizer.size == 400


def test_a_ceiling_at_or_below_the_base_keeps_takes_fixed():
    for ceiling in (50, 100):
        sizer = TakeSizer(base=100, ceiling=ceiling)
        sizer.observe(asked=100, got=100, check_s=0.0)
        assert sizer.size == 100


def test_slices_cover_a_take_in_order_at_most_width_each():
    assert slices(0, 100) == []
    assert slices(250, 100) == [range(0, 100), range(100, 200), range(200, 250)]
    assert slices(100, 100) == [range(0, 100)]
    assert [i for part in slices(1234, 7) for i in part] == list(range(1234))
