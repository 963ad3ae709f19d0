"""A scheduled workload's next due times (docs/schedules.md): each checked row's next tick.

The write-back asks before it writes: the rows' schedules and time zones are read in one
statement (only when they are columns; a workload's own schedule needs no read), each row's next
tick is the first after the later of now and its due time (shared/core/schedules.py: a row
checked late runs once for the ticks it missed), and it travels in the batch as a due time on the
database's clock. A row whose schedule or time zone cannot be used is parked (quarantined) with
the reason, and `recheck release ID` puts it back once the application has fixed it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recheck.shared.config import Workload
from recheck.shared.core.entries import Item
from recheck.shared.core.schedules import ScheduleError, Ticks, db_clock_ms, db_zone_of, unix_of_db_ms
from recheck.shared.mysql.rows import Rows
from recheck.shared.policies.lifecycle import rhythm_of

PARKED = "quarantined: its schedule cannot be used ({why}); fix it, then `recheck release ID`"
KNOWN_MOST = 200_000  # schedules kept from takes for their write-backs (a worker holds far fewer)


def text_of(value: Any) -> str | None:
    """A schedule or zone as the check's read gives it: text, bytes of a binary column, or None."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return None if value is None else str(value)


@dataclass
class NextTicks:
    """What a batch's schedules say: entry -> the row's next tick (due_ms, the database's clock);
    reason -> the entries of rows parked for it; the entries of rows no longer there."""

    at_ms: dict[bytes, int] = field(default_factory=dict)
    parked: dict[str, list[Item]] = field(default_factory=dict)
    gone: list[Item] = field(default_factory=list)


class RowSchedules:
    def __init__(self, workload: Workload, rows: Rows, clock: Callable[[], float] = time.time):
        self.workload = workload
        self.rows = rows
        self.clock = clock  # this host's Unix time (a test's clock)
        self.ticks = Ticks()
        self.per_row = rhythm_of(workload).per_row
        # entry -> (schedule, zone) read with the check's rows (`columns`) at the take: no read
        # of the write-back's own then. Filled by the loop's thread, emptied by the writer's.
        self.known: dict[bytes, tuple[str | None, str | None]] = {}

    def remember(self, items: Sequence[Item], rows: Mapping[Any, Mapping[str, Any]]) -> None:
        """The schedules of a take's rows, as the check's read found them (by key)."""
        if not self.per_row:
            return
        if len(self.known) > KNOWN_MOST:  # entries given back and never written: forget them all
            self.known.clear()
        schedule, zone = self.workload.schedule_column, self.workload.time_zone_column
        for item in items:
            row = rows.get(item.id)
            if row is not None:
                self.known[item.entry] = (
                    text_of(row[schedule]) if schedule else None,
                    text_of(row[zone]) if zone else None,
                )

    def next_ticks(self, items: Sequence[Item], clock_offset_ms: float, epoch_offset_s: float) -> NextTicks:
        """The batch's next ticks. clock_offset_ms, epoch_offset_s: the database clock against
        this host's (as due times read it, and in Unix seconds: WriteBack measures both)."""
        s = self.workload
        stored: dict[bytes, tuple[str | None, str | None]] = {}
        if self.per_row:
            unknown = []
            for item in items:
                known = self.known.pop(item.entry, None)
                if known is None:
                    unknown.append(item)
                else:
                    stored[item.entry] = known
            if unknown:  # no `columns`, or not read at the take: one statement for them
                keys = self.rows.keys
                read = self.rows.schedules([keys.ref(item) for item in unknown])
                stored.update((unknown[n - 1].entry, pair) for n, pair in read.items())
        db_tz = db_zone_of(s.deployment.db_time_zone, clock_offset_ms)
        now = self.clock() + epoch_offset_s
        now_ms = db_clock_ms(now, db_tz)
        out = NextTicks()
        on_db_clock: dict[float, int] = {}  # tick -> due_ms: the rows of one tick share it
        for item in items:
            schedule, zone = s.schedule, s.time_zone
            if self.per_row:
                if item.entry not in stored:  # deleted since its dispatch: nothing to write
                    out.gone.append(item)
                    continue
                row_schedule, row_zone = stored[item.entry]
                schedule = row_schedule.strip() if row_schedule else schedule
                zone = row_zone.strip() if row_zone else zone
            # The first tick after the later of now and its due time (a row checked early when
            # this host's clock is a little behind the database's keeps its tick).
            moment = now if item.due_ms <= now_ms else max(now, unix_of_db_ms(item.due_ms, db_tz))
            try:
                if not schedule:
                    raise ScheduleError("its schedule column is empty and the workload has no schedule")
                tick = self.ticks.next_after(schedule, zone, moment)
            except ScheduleError as error:
                out.parked.setdefault(PARKED.format(why=error), []).append(item)
                continue
            at_ms = on_db_clock.get(tick)
            if at_ms is None:
                at_ms = on_db_clock[tick] = db_clock_ms(tick, db_tz)
            out.at_ms[item.entry] = at_ms
        return out
