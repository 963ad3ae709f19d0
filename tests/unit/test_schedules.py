"""Calendar schedules (issue 48, item 1), without servers: the ticks recheck computes for a row
(shared/core/schedules.py), DST days as docs/schedules.md states them, a row checked late, the
database clock's conversions, and a simulated day of 100,000 rows on 50 schedules in 20 zones.
The write-back that writes them is tested on real servers in tests/integration/test_schedules.py.
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from recheck.shared.core.schedules import (
    ScheduleError,
    Ticks,
    db_clock_ms,
    db_zone_of,
    expression_of,
    unix_of_db_ms,
    validate,
)


def local(zone: str, *fields: int, fold: int = 0) -> datetime:
    return datetime(*fields, tzinfo=ZoneInfo(zone), fold=fold)  # type: ignore[misc]


def ticks_after(schedule: str, zone: str, start: datetime, count: int) -> list[datetime]:
    """`count` ticks from `start`, each the next after the one before, as recheck computes them,
    in the zone's wall clock."""
    ticks, moment, out = Ticks(), start.timestamp(), []
    for _ in range(count):
        moment = ticks.next_after(schedule, zone, moment)
        out.append(datetime.fromtimestamp(moment, ZoneInfo(zone)))
    return out


# -- DST: each case as docs/schedules.md says it ---------------------------------------------------
def test_a_tick_in_the_hour_spring_forward_skips_runs_when_the_clock_jumps():
    # Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that day.
    got = ticks_after("30 2 * * *", "Europe/Paris", local("Europe/Paris", 2026, 3, 28, 12), 3)
    assert [t.isoformat() for t in got] == [
        "2026-03-29T03:00:00+02:00",  # run at the jump, not skipped, not at 03:30
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_a_tick_in_the_hour_fall_back_repeats_runs_once():
    # New York, 2026-11-01: 01:00-02:00 happens twice (EDT, then EST); 01:30 runs the first time only.
    got = ticks_after("30 1 * * *", "America/New_York", local("America/New_York", 2026, 10, 31, 12), 3)
    assert [t.isoformat() for t in got] == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
        "2026-11-03T01:30:00-05:00",
    ]


def test_a_schedule_finer_than_an_hour_keeps_its_wall_clock_ticks_in_a_repeated_hour():
    got = ticks_after("*/30 * * * *", "Europe/Paris", local("Europe/Paris", 2026, 10, 25, 1, 40), 5)
    assert [t.isoformat() for t in got] == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:00:00+01:00",  # the repeated hour: its ticks again, an hour later in real time
        "2026-10-25T02:30:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


def test_a_schedule_finer_than_an_hour_skips_nothing_real_on_spring_forward():
    got = ticks_after("*/30 * * * *", "America/New_York", local("America/New_York", 2026, 3, 8, 1, 10), 3)
    assert [t.isoformat() for t in got] == [
        "2026-03-08T01:30:00-05:00",
        "2026-03-08T03:00:00-04:00",  # 02:00 and 02:30 do not exist; 30 real minutes later
        "2026-03-08T03:30:00-04:00",
    ]


def test_a_zone_without_dst_and_one_with_a_half_hour_offset():
    got = ticks_after("0 9 * * *", "Asia/Kolkata", local("Asia/Kolkata", 2026, 3, 29, 12), 2)
    assert [t.astimezone(UTC).isoformat() for t in got] == [
        "2026-03-30T03:30:00+00:00",
        "2026-03-31T03:30:00+00:00",
    ]


# -- what a row gets ------------------------------------------------------------------------------
def test_a_row_checked_hours_late_gets_the_first_tick_after_its_check_not_the_missed_ones():
    ticks = Ticks()
    due = local("UTC", 2026, 11, 27, 9, 0).timestamp()
    checked = due + 3 * 3600 + 17  # recheck was down for three hours
    assert datetime.fromtimestamp(ticks.next_after("0 * * * *", "UTC", max(due, checked)), UTC) == datetime(
        2026, 11, 27, 13, 0, tzinfo=UTC
    )


def test_the_next_tick_is_strictly_after_the_moment_even_on_a_tick():
    ticks = Ticks()
    nine = local("Europe/Paris", 2026, 11, 27, 9, 0).timestamp()
    assert ticks.next_after("0 9 * * *", "Europe/Paris", nine) == nine + 86_400
    assert ticks.next_after("0 9 * * *", "Europe/Paris", nine - 0.001) == nine


def test_the_kept_tick_answers_only_for_moments_it_is_right_for():
    ticks, zone = Ticks(), "Europe/Paris"
    nine = local(zone, 2026, 11, 27, 9, 0).timestamp()
    assert ticks.next_after("0 * * * *", zone, nine + 60) == nine + 3600
    assert ticks.next_after("0 * * * *", zone, nine - 60) == nine  # earlier than the kept moment
    assert ticks.next_after("0 * * * *", zone, nine + 3600) == nine + 7200  # at the kept tick: the next
    assert ticks.next_after("0 * * * *", "UTC", nine + 60) == nine + 3600  # another zone, its own


@pytest.mark.parametrize(
    ("schedule", "expression"),
    [("@daily", "0 0 * * *"), ("@HOURLY", "0 * * * *"), ("  0  9 * *   MON ", "0 9 * * MON")],
)
def test_shorthands_and_spacing(schedule, expression):
    assert expression_of(schedule) == expression


def test_six_fields_are_seconds_first():
    got = ticks_after("*/20 * * * * *", "UTC", local("UTC", 2026, 11, 27, 9, 0, 5), 3)
    assert [t.strftime("%H:%M:%S") for t in got] == ["09:00:20", "09:00:40", "09:01:00"]


@pytest.mark.parametrize(
    ("schedule", "zone", "message"),
    [
        ("61 * * * *", "UTC", "Bad minute"),
        ("0 9 * *", "UTC", "Wrong number of fields"),
        ("0 0 30 2 *", "UTC", "Bad day-of-month"),
        ("", "UTC", "not a cron expression"),
        ("0 9 * * *", "Europe/Pariss", "not an IANA time zone name"),
        ("0 9 * * *", "", "not an IANA time zone name"),
        ("0 9 * * *", "../etc/passwd", "not an IANA time zone name"),
        ("x" * 300, "UTC", "not a cron expression"),
    ],
)
def test_a_schedule_or_zone_that_cannot_be_used_says_why(schedule, zone, message):
    with pytest.raises(ScheduleError, match=message):
        validate(schedule, zone)


# -- the database's clock --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("db_zone", "measured_ms", "wall"),
    [
        ("+00:00", 0.0, datetime(2026, 3, 29, 1, 30)),
        ("-05:30", 0.0, datetime(2026, 3, 28, 20, 0)),
        ("Europe/Paris", 0.0, datetime(2026, 3, 29, 3, 30)),  # CEST already
        ("", 3_600_000 + 412.0, datetime(2026, 3, 29, 2, 30)),  # the server's zone: +01:00 measured
    ],
)
def test_a_moment_is_written_on_the_database_clock_and_read_back(db_zone, measured_ms, wall):
    moment = datetime(2026, 3, 29, 1, 30, tzinfo=UTC).timestamp()
    db_tz = db_zone_of(db_zone, measured_ms)
    written = db_clock_ms(moment, db_tz)
    assert written == round((wall - datetime(1970, 1, 1)).total_seconds() * 1000)
    assert unix_of_db_ms(written, db_tz) == moment


def test_a_fixed_offset_database_zone_is_exact():
    assert db_zone_of("+05:45", 0.0) == timezone(timedelta(hours=5, minutes=45))


# -- a simulated day ---------------------------------------------------------------------------------
SCHEDULES = [
    "0 * * * *", "30 * * * *", "15,45 * * * *", "*/20 * * * *", "0 */2 * * *", "0 */3 * * *",
    "0 9 * * *", "30 2 * * *", "30 1 * * *", "0 0 * * *", "59 23 * * *", "0 12 * * *",
    "0 9 * * MON-FRI", "0 9-17 * * *", "*/30 9-17 * * *", "0 2,3,4 * * *", "45 2 * * *", "0 3 * * *",
    "0 6,18 * * *", "10 */4 * * *", "0 0 * * SUN", "0 9 25 * *", "0 0 1 * *", "5 4 * * *",
    "0 1 * * *", "0 22 * * *", "0 8-20/4 * * *", "20 2 * * SUN", "0 0,12 * * *", "0 7 * * SAT,SUN",
    "@hourly", "@daily", "@weekly", "0 5 L * *", "0 23 * * 6L", "*/10 1-3 * * *", "0 4 * * *",
    "0 9 * * MON", "30 9 * * *", "0 13 * * *", "0 18 * * *", "15 3 * * *", "45 1 * * *",
    "0 10,14 * * *", "*/15 2 * * *", "0 11 * * *", "0 16 * * *", "0 21 * * *", "0 2 * * *", "0 0 * * 0",
]  # fmt: skip
ZONES = [
    "UTC", "Europe/Paris", "Europe/London", "America/New_York", "America/Los_Angeles", "America/Sao_Paulo",
    "Asia/Tokyo", "Asia/Kolkata", "Australia/Sydney", "Australia/Lord_Howe", "Pacific/Auckland",
    "Pacific/Chatham", "Asia/Tehran", "Africa/Cairo", "America/Santiago", "Asia/Kathmandu",
    "America/St_Johns", "Europe/Dublin", "America/Havana", "Atlantic/Azores",
]  # fmt: skip
ROWS = 100_000


@pytest.mark.parametrize("day", ["2026-03-29", "2026-10-25", "2026-11-01"])
def test_a_simulated_day_of_100000_rows_runs_each_row_at_each_tick_once(day):
    """100,000 rows, 50 schedules x 20 zones (100 rows on each pair), over one UTC day that holds
    DST changes (Europe on 03-29 and 10-25, Chile and the US around them, Lord Howe's half hour):
    each row runs a little late at each tick (up to a third of the gap to its next), and what
    recheck gives it next must be exactly its next tick, as cronsim walks them, never a missed or
    a repeated one. The DST rules themselves are the cases above."""
    assert len(set(SCHEDULES)) == 50 and len(set(ZONES)) == 20
    rng = random.Random(day)
    start = datetime.fromisoformat(day).replace(tzinfo=UTC)
    end = (start + timedelta(days=1)).timestamp()
    ticks = Ticks()  # one, as a worker's: every row through the same kept ticks
    runs = 0
    per_pair = ROWS // (len(SCHEDULES) * len(ZONES))
    for index in range(len(SCHEDULES) * len(ZONES)):
        schedule, zone = SCHEDULES[index % len(SCHEDULES)], ZONES[index // len(SCHEDULES)]
        walk = CronSim(expression_of(schedule), start.astimezone(ZoneInfo(zone)))
        expected = []  # the pair's ticks in the day, and the first after it
        while not expected or expected[-1] < end:
            expected.append(next(walk).timestamp())
        first = ticks.next_after(schedule, zone, start.timestamp())
        assert first == expected[0], (schedule, zone)
        for tick, following in itertools.pairwise(expected):
            if tick >= end:
                break
            late = [rng.uniform(0, (following - tick) / 3) for _ in range(per_pair)]
            for lateness in late:  # each row of the pair checked at this tick, a little late
                assert ticks.next_after(schedule, zone, tick + lateness) == following, (
                    schedule, zone, datetime.fromtimestamp(tick, ZoneInfo(zone)), lateness,
                )  # fmt: skip
            runs += per_pair
    assert runs > ROWS * 5  # every row ran several times over the day (6 on average)


# -- a batch's next ticks, on the clock a test passes in (workers/writing/schedules.py) ------------
def test_a_batch_gets_its_ticks_on_the_database_clock_from_the_clock_passed_in():
    from recheck.shared.config import Deployment, Workload
    from recheck.shared.core.entries import Item
    from recheck.workers.writing.schedules import RowSchedules

    now = datetime(2026, 3, 29, 0, 40, tzinfo=UTC).timestamp()  # 01:40 CET, 20 min before the jump
    # The database's sessions keep a +02:00 wall clock (RECHECK_DB_TIME_ZONE).
    workload = Workload(
        schedule="0 * * * *", time_zone="Europe/Paris", deployment=Deployment(db_time_zone="+02:00")
    )
    schedules = RowSchedules(workload, rows=None, clock=lambda: now)  # type: ignore[arg-type]
    db_tz = db_zone_of("+02:00", 0.0)
    due = db_clock_ms(now - 40 * 60, db_tz)  # due at 01:00 CET, checked 40 minutes late
    late = db_clock_ms(now + 3 * 3600, db_tz)  # due in three hours (checked early, by hand)
    items = [Item(b"1:%d" % due, 1, due), Item(b"2:%d" % late, 2, late)]
    ticks = schedules.next_ticks(items, clock_offset_ms=0.0, epoch_offset_s=0.0)
    # 02:00 CET does not exist that day: the next tick is 03:00 CEST, 01:00 UTC, 03:00 at +02:00.
    assert ticks.at_ms[items[0].entry] == db_clock_ms(
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp(), db_tz
    )
    # The one due in three hours keeps its own tick: the first after its due time, not after now.
    assert ticks.at_ms[items[1].entry] == db_clock_ms(
        datetime(2026, 3, 29, 4, 0, tzinfo=UTC).timestamp(), db_tz
    )
    assert not ticks.parked and not ticks.gone
