"""Calendar schedules (docs/schedules.md): a row due at the ticks of a cron expression, read in an
IANA time zone, instead of every interval.

Pure: the write-back (workers/writing/schedules.py) asks for each checked row's next tick and
writes it as the row's due time. Cron expressions are evaluated by cronsim, which follows
Debian's cron, DST included: a tick in the hour a spring-forward day skips runs when the clock
jumps (02:30 -> 03:00), a tick in the hour a fall-back day repeats runs once (the first 01:30);
a schedule finer than an hour ('*/15 * * * *') keeps its wall-clock ticks in both. A row checked
late (recheck down for an hour) gets the first tick after the moment it was checked: the ticks
it missed run once, not once each.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

# The shorthands Vixie and Debian cron accept (cronsim does not): each is a plain expression.
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MAX_TEXT = 200  # characters of a schedule or a zone name; longer is an error, not a parse
CACHE_SIZE = 4096  # (schedule, zone) pairs whose last tick is kept


class ScheduleError(ValueError):
    """A schedule or time zone that cannot be used; its message says which and why."""


def zone_of(name: str) -> ZoneInfo:
    """The IANA time zone named so ('Europe/Paris', 'UTC')."""
    if not name or len(name) > MAX_TEXT:
        raise ScheduleError(f"time zone {name[:MAX_TEXT]!r}: not an IANA time zone name")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ScheduleError(f"time zone {name!r}: not an IANA time zone name ({error})") from None


def expression_of(text: str) -> str:
    """The cron expression a schedule names: 5 fields (minute hour day month weekday), 6 with
    seconds first, or a shorthand such as @daily."""
    text = " ".join(text.split())
    if not text or len(text) > MAX_TEXT:
        raise ScheduleError(f"schedule {text[:MAX_TEXT]!r}: not a cron expression")
    return MACROS.get(text.lower(), text)


def validate(schedule: str, zone: str) -> None:
    """Raise ScheduleError unless the schedule parses and fires in that zone."""
    Ticks().next_after(schedule, zone, 0.0)


class Ticks:
    """Next ticks, with the last answer kept per (schedule, zone): the rows of one schedule
    checked after one tick all get the same next one, computed once (a cron walk costs tens of
    microseconds; a lookup, well under one)."""

    def __init__(self) -> None:
        # (schedule, zone) -> (since, tick): every moment in [since, tick) has `tick` next.
        self._last: dict[tuple[str, str], tuple[float, float]] = {}

    def next_after(self, schedule: str, zone: str, moment: float) -> float:
        """The first tick strictly after `moment` (Unix seconds), in Unix seconds."""
        key = (schedule, zone)
        known = self._last.get(key)
        if known is not None and known[0] <= moment < known[1]:
            return known[1]
        tick = self._walk(schedule, zone, moment)
        if len(self._last) >= CACHE_SIZE:
            self._last.clear()
        self._last[key] = (moment, tick)
        return tick

    @staticmethod
    def _walk(schedule: str, zone: str, moment: float) -> float:
        expression, tz = expression_of(schedule), zone_of(zone)
        start = datetime.fromtimestamp(moment, UTC).astimezone(tz)
        if start.fold:
            # In the hour a fall-back day repeats, second time round: cronsim walks from the same
            # wall time first time round, so that the repeated hour's ticks are those of a walk
            # through the whole day (a schedule finer than an hour runs in both, the others once).
            start = start.replace(fold=0)
        try:
            walk = CronSim(expression, start)
        except CronSimError as error:
            raise ScheduleError(f"schedule {schedule!r}: {error}") from None
        except (ValueError, TypeError, IndexError) as error:  # text the parser did not expect
            raise ScheduleError(f"schedule {schedule!r}: not a cron expression ({error})") from None
        try:
            tick = next(walk).timestamp()
            while tick <= moment:
                tick = next(walk).timestamp()
            return tick
        except StopIteration:
            raise ScheduleError(f"schedule {schedule!r}: never fires in the next 50 years") from None


def db_zone_of(db_zone: str, measured_offset_ms: float) -> ZoneInfo | timezone:
    """The time zone of recheck's database sessions (RECHECK_DB_TIME_ZONE: '+00:00' by default, an
    offset, or a named zone; empty, the server's own zone, which only the measured offset of its
    clock tells, rounded to the minute)."""
    if not db_zone:
        return timezone(timedelta(minutes=round(measured_offset_ms / 60_000)))
    if db_zone[0] in "+-":
        hours, minutes = db_zone[1:].split(":")
        offset = timedelta(hours=int(hours), minutes=int(minutes))
        return timezone(-offset if db_zone[0] == "-" else offset)
    return zone_of(db_zone)


EPOCH = datetime(1970, 1, 1)


def db_clock_ms(moment: float, db_tz: ZoneInfo | timezone) -> int:
    """A Unix time as recheck's due times are written: the session's wall clock, in milliseconds
    since 1970-01-01 00:00 (shared/core/entries.py: due_ms)."""
    wall = datetime.fromtimestamp(moment, UTC).astimezone(db_tz).replace(tzinfo=None)
    return round((wall - EPOCH) / timedelta(milliseconds=1))


def unix_of_db_ms(due_ms: int, db_tz: ZoneInfo | timezone) -> float:
    """The Unix time of a due time as written (the inverse of db_clock_ms; in the hour a named
    zone repeats, the first of the two)."""
    return (EPOCH + timedelta(milliseconds=due_ms)).replace(tzinfo=db_tz).timestamp()
