"""The dispatcher's job groups start apart (dispatcher/service.py job_phases): with whole-second
periods, jobs at distinct phases within a second never fire in the same instant."""

from __future__ import annotations

from recheck.dispatcher.service import JOB_SPREAD, job_phases


def test_job_groups_start_at_distinct_phases_within_a_second_none_at_the_heartbeats():
    phases = job_phases(7)
    assert len(set(phases)) == 7 and phases == sorted(phases)
    assert all(0 < phase < JOB_SPREAD for phase in phases)  # 0 is the heartbeat's
    gaps = [b - a for a, b in zip([0.0, *phases], [*phases, JOB_SPREAD], strict=True)]
    assert max(gaps) - min(gaps) < 1e-9  # evenly apart, the heartbeat's 0 and the next second too


def test_no_two_jobs_with_whole_second_periods_ever_fire_together():
    phases = job_phases(5)
    periods = [1.0, 1.0, 2.0, 5.0, 30.0]
    fires = [round(phase + k * period, 6) for phase, period in zip(phases, periods, strict=True)
             for k in range(1, int(60 / period) + 1)]  # fmt: skip
    assert len(fires) == len(set(fires))
