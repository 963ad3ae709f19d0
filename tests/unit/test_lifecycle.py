"""The lifecycle policy: which one a workload's settings choose, and what each decides."""

from recheck.shared.config import Settings, Workload
from recheck.shared.policies.lifecycle import ONE_SHOT, RECURRING, lifecycle_of, rhythm_of


def test_once_chooses_the_one_shot_lifecycle_and_nothing_else_does():
    assert lifecycle_of(Settings(_env_file=None).default_workload()) is RECURRING
    assert lifecycle_of(Settings(_env_file=None, once=True).default_workload()) is ONE_SHOT


def test_each_lifecycle_decides_every_question_its_own_way():
    decisions = (
        "done_is_null",
        "success_done",
        "failure_backoff_only",
        "looks_back",
        "follows_arrivals",
        "has_rhythm",
        "adopts_rows",
    )
    for name in decisions:  # no question both answer alike: else it is not the lifecycle's to decide
        assert getattr(RECURRING, name) != getattr(ONE_SHOT, name), name
    assert RECURRING.rhythm(2.5) == "interval 2.5s"
    assert ONE_SHOT.rhythm(2.5) == "one-shot rows"
    assert rhythm_of(Workload()).says == "interval 10s" and not rhythm_of(Workload()).calendar
    assert rhythm_of(Workload(schedule="0 9 * * MON", time_zone="Europe/Paris")).says == (
        "schedule '0 9 * * MON' in time zone Europe/Paris"
    )
    assert rhythm_of(Workload(schedule_column="cron", time_zone_column="tz")).says == (
        "each row's schedule (cron) in each row's time zone (tz, else UTC)"
    )


def test_a_one_shot_pass_polls_again_soon_after_a_page_that_read_rows_and_a_recurring_one_does_not():
    from recheck.dispatcher.dispatcher import pause_after

    deployment = Settings(_env_file=None, poll_interval=0.05, busy_poll_interval=0.01).deployment()
    for lifecycle in (ONE_SHOT, RECURRING):
        assert pause_after(deployment, lifecycle, read=500, limit=500) == 0.0  # a full page: at once
        assert pause_after(deployment, lifecycle, read=0, limit=500) == 0.05  # caught up
    assert pause_after(deployment, ONE_SHOT, read=7, limit=500) == 0.01  # jobs are arriving
    assert pause_after(deployment, RECURRING, read=7, limit=500) == 0.05  # rows come on their schedule
    slow = Settings(_env_file=None, poll_interval=0.005, busy_poll_interval=0.01).deployment()
    assert pause_after(slow, ONE_SHOT, read=7, limit=500) == 0.005  # never slower than when caught up


def test_an_idle_probe_waits_idle_poll_interval_and_never_less_than_poll_interval():
    from recheck.dispatcher.dispatcher import idle_pause

    assert idle_pause(Settings(_env_file=None).deployment()) == 0.08  # the default: 50 ms busy, 80 idle
    assert idle_pause(Settings(_env_file=None, idle_poll_interval=0.02).deployment()) == 0.05
    assert idle_pause(Settings(_env_file=None, poll_interval=0.2).deployment()) == 0.2
    fast = Settings(_env_file=None, poll_interval=0.01, idle_poll_interval=0.01).deployment()
    assert idle_pause(fast) == 0.01
