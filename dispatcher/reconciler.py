"""Maintenance jobs run by APScheduler inside the dispatcher process.

Each job is an object with run_once(), an ordinary function tests call directly:

- Reclaimer: gives back the ids held by workers whose heartbeat expired (kill -9, OOM, a
  paused process), and quarantines ids that were reclaimed max_reclaims times, twice alone.
- Sweeper: rows overdue by more than sweep_grace that nothing holds (Redis lost its data,
  rows inserted with an old due time) are dispatched again.
- OrphanCollector: in-flight ids that no queue or worker holds any more are released, so they
  cannot block their rows forever.
- Housekeeper: trims what is kept only for a while (error groups, the change feed, done rows).
- Settler: the lists right for the leader's ordering (entries in another ordering's lists moved
  or asked for again), when it comes to lead and every few seconds after.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from recheck.dispatcher.dispatcher import END, START, DuePusher
from recheck.dispatcher.lease import NotLeader
from recheck.shared.config import Workload
from recheck.shared.core.entries import Key, datetime_to_ms, entry_key
from recheck.shared.core.keys import KeyKind
from recheck.shared.core.limits import own_limits
from recheck.shared.core.partitions import reclaim_split
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.probe import DueProbe, overdue_part
from recheck.shared.mysql.rows import Rows
from recheck.shared.process.metrics import dispatcher_metrics
from recheck.shared.redis.store import Store, group_name

log = logging.getLogger(__name__)

SPLIT_WAYS = 8  # a dead worker's entries come back as this many batches (see reclaim.lua)
ERRORS_KEPT_S = 86_400.0  # failures grouped by error are forgotten a day after the last one
GROUP_LIMITS_EVERY = 5.0  # seconds between copies of the group limits table into Redis
SETTLE_EVERY = 5.0  # seconds between the leader's looks at other orderings' lists (Settler)
IDLE_RECLAIM_EVERY = 10.0  # seconds between the reclaimer's looks at the workers while nothing is in flight
FORGET_EVERY = 60.0  # seconds between the reclaimer's removals of dead dispatchers from their registry


class Job:
    """What the MySQL-and-Redis jobs share; subclasses define run_once()."""

    def __init__(self, workload: Workload, db: Database, store: Store):
        self.workload = workload
        self.rows = Rows(workload, db)
        self.store = store

    @property
    def keys(self) -> KeyKind:
        """The id column's kind: entries are parsed and batches written by it (read once)."""
        return self.rows.keys


class Settler:
    """Keeps a workload's lists right for the ordering its leader runs (Store.settle, settle.lua):
    when the dispatcher comes to lead (an ordering changed since the lists were filled is said in
    one line), then every SETTLE_EVERY seconds for entries given back since into another
    ordering's lists by a worker whose settings differ (a line when it finds any)."""

    def __init__(
        self, workload: Workload, store: Store, owner: str, quiet: Callable[[], bool] = lambda: False
    ):
        """quiet: whether nothing can have been given back since the last run (Reclaimer.quiet:
        nothing was in flight, so nothing in any list, and nothing pushed since): the job's run
        then reads nothing. A new leader's settle (the lane's) runs whatever it says."""
        self.workload = workload
        self.store = store
        self.owner = owner
        self.quiet = quiet

    def run_once(self) -> int:
        """The job's run: settle, unless nothing can have changed since (quiet)."""
        return 0 if self.quiet() else self.settle()

    def settle(self) -> int:
        """Entries moved or released; NotLeader if the lease went meanwhile (nothing moved). The
        change of ordering is said by whichever call finds it first (the new leader's, or this
        job's should it run between the lease and the first page)."""
        done = self.store.settle(self.owner)
        if done is None:
            raise NotLeader(self.owner)
        found = done.moved + done.released
        if done.changed and (done.before or found):
            log.warning(
                "%sordering is now %s (the lists were settled for %s): %d queued entries moved to its lists, "
                "%d released and asked for again", self.workload.log_prefix, done.now,
                done.before or "an older version", done.moved, done.released,
            )  # fmt: skip
        elif found:
            log.warning(
                "%s%d queued entries found in lists the %s ordering does not read (given back by a worker "
                "whose settings differ?): %d moved to its lists, %d released and asked for again",
                self.workload.log_prefix, found, done.now, done.moved, done.released,
            )  # fmt: skip
        return found


class GroupLimitsCopier(Job):
    """Copies the group limits table (group_limits_table) into Redis, where takes read it: an
    operator's change reaches the workers within a run, without a restart. A row no limit can be
    (a negative rate, a weight of 0) is left out, with a warning line when the rows left out change."""

    warned: tuple[str, ...] = ()  # the rows left out that the last warning named

    def run_once(self) -> int:
        own, bad = {}, []
        for name, rate, room, weight in self.rows.group_limits():
            try:
                own[name] = own_limits(rate, room, weight)
            except ValueError as error:
                bad.append(f"{group_name(name)} ({error})")
        if tuple(bad) != self.warned:  # once per change, not every run
            self.warned = tuple(bad)
        else:
            bad = []
        if bad:
            log.warning(
                "%sgroup limits table %s: left out %d rows no limit can be: %s",
                self.workload.log_prefix, self.workload.group_limits_table, len(bad), ", ".join(bad[:5]),
            )  # fmt: skip
        self.store.set_group_limits(own)
        return len(own)


class Reclaimer(Job):
    def __init__(
        self,
        workload: Workload,
        db: Database,
        store: Store,
        clock: Callable[[], float] = time.monotonic,
        pushes: Callable[[], object] = lambda: None,
    ):
        """pushes: what changes whenever something may have been put in flight since (this
        process's pushes and the times it came to lead: another leader may have pushed between);
        None: unknown, read the in-flight hash every run."""
        super().__init__(workload, db, store)
        self.clock = clock
        self.full_due = 0.0  # when a run goes through the workers even with nothing in flight
        self.pushes = pushes
        self.empty_at: object = None  # `pushes` when the in-flight hash was last seen empty
        self.forget_due = 0.0  # when dead dispatchers are next removed from the registry

    def quiet(self) -> bool:
        """The in-flight hash was empty at a run, and nothing was pushed since (nor has this
        dispatcher come to lead again): no entry is queued or held anywhere, in any list."""
        seen = self.pushes()
        return seen is not None and seen == self.empty_at

    def run_once(self) -> tuple[int, int]:
        """Returns (ids reclaimed, ids quarantined) in this run. With nothing in flight no worker
        holds anything: one read (none while nothing was pushed since it found the hash empty),
        and the workers are looked at every IDLE_RECLAIM_EVERY seconds only (a dead one's
        registration and its running count go then). Every FORGET_EVERY seconds, dispatchers
        whose heartbeat expired leave their registry too (Store.forget_dead_dispatchers)."""
        now = self.clock()
        if now >= self.forget_due:
            self.forget_due = now + FORGET_EVERY
            forgotten = self.store.forget_dead_dispatchers()
            if forgotten:
                prefix = self.workload.log_prefix
                log.info("%sforgot %d dispatchers whose heartbeats had expired", prefix, forgotten)
        if now < self.full_due:
            seen = self.pushes()  # read before the hash: a push after it changes it again
            if seen is not None and seen == self.empty_at:
                return 0, 0
            if self.store.nothing_in_flight():
                self.empty_at = seen
                return 0, 0
        self.empty_at = None
        self.full_due = now + IDLE_RECLAIM_EVERY
        reclaimed = quarantined = 0
        holdings: dict[str, list[int]] = {}  # a dead worker's, in each partition, read once a run
        for partition in range(self.store.count):  # each partition of the workload (one when unpartitioned)
            look = self.store.reclaim_look(partition)
            held, poisoned = self.reclaim_part(partition, look.gone, holdings)
            reclaimed += held
            # Ids set aside by this run's reclaims are parked now too: read again (rare)
            quarantined += self.quarantine_pending(partition, None if poisoned else look.pending)
        return reclaimed, quarantined

    def split_ways(self, partition: int, worker: str, holdings: dict[str, list[int]]) -> int:
        """Into how many batches this partition's share of a dead worker's entries comes back:
        SPLIT_WAYS over all partitions together, not in each (reclaim_split). A partition whose
        entries include one reclaimed before splits SPLIT_WAYS ways whatever this says
        (reclaim.lua): a group that kills again is split again, so a poison id ends up alone."""
        if self.store.count == 1:
            return SPLIT_WAYS
        if worker not in holdings:
            gone = self.store.heartbeat_gone(worker)
            holdings[worker] = self.store.held_in_each(worker) if gone else []
        shares = holdings[worker]
        if not shares:  # alive: reclaim.lua will say so
            return SPLIT_WAYS
        # At least 1: what the script finds is what counts (0 groups would drop entries counted
        # a moment before, should a stopped worker have run on in between).
        return max(1, reclaim_split(shares[partition], sum(shares), SPLIT_WAYS))

    def reclaim_part(
        self, partition: int, gone: list[str], holdings: dict[str, list[int]]
    ) -> tuple[int, int]:
        """What the workers whose heartbeat has gone held in this partition, given back:
        (ids reclaimed, of which set aside for quarantine)."""
        reclaimed = set_aside = 0
        for worker in gone:
            ways = self.split_ways(partition, worker, holdings)
            result = self.store.reclaim(partition, worker, self.workload.max_reclaims, ways, SPLIT_WAYS)
            if result:
                held, poisoned = result
                reclaimed += held
                set_aside += poisoned
                dispatcher_metrics(self.workload.name).reclaimed.inc(held)
                log.warning(
                    "%sworker %s stopped heartbeating; reclaimed %d ids (%d to quarantine)",
                    self.workload.log_prefix,
                    worker,
                    held,
                    poisoned,
                )
        return reclaimed, set_aside

    def quarantine_pending(self, partition: int, pending: dict[bytes, bytes] | None = None) -> int:
        """Park ids that killed workers again and again: MySQL first, then Redis lets go.
        pending: the ids set aside as read before (None: read them now)."""
        if pending is None:
            pending = self.store.pending_quarantine(partition)
        if not pending:
            return 0
        keys = self.keys
        items, malformed = keys.parse(list(pending.values()))
        if items:
            reason = (
                "quarantined: its worker died twice while checking this row alone, "
                f"after {self.workload.max_reclaims}+ deaths in all; `recheck release ID` to check it again"
            )
            self.rows.quarantine([(keys.ref(item), item.due_ms) for item in items], reason)
            shown = ", ".join(str(keys.show(item.id)) for item in items)
            log.error("%squarantined ids %s: %s", self.workload.log_prefix, shown, reason)
        ids = [entry_key(item.entry) for item in items] + [entry_key(m) for m in malformed]
        self.store.forget_quarantined(partition, ids, list(pending.keys()), len(items))
        dispatcher_metrics(self.workload.name).quarantined.inc(len(items))
        return len(items)


class Sweeper:
    """Dispatch rows overdue by more than sweep_grace that are not in flight.

    Only rows behind the dispatcher's cursor, and the row it rests on: the dispatcher itself
    reads everything after it, and reading the same rows twice at once (as both would while
    catching up on a backlog) lets a row finished between one's read and the other's push be
    queued again. The row under the cursor is the sweep's: the dispatcher has read it, and if it
    was in flight then (the application forced it due meanwhile) nobody else will read it again.
    """

    def __init__(self, workload: Workload, pusher: DuePusher, dispatcher_cursor=lambda: END):
        self.workload = workload
        self.pusher = pusher
        self.guarded = False  # this run has set the sweep's guard (run_once ends it)
        self.passes: list[tuple[DuePusher, Callable[[], tuple]]] = [(pusher, dispatcher_cursor)]
        # Passes a SweepProbe has just found nothing overdue in (run_once reads them no more); it
        # holds for the next run only.
        self.clear: set[int] = set()

    def also(self, pusher: DuePusher, dispatcher_cursor: Callable[[], tuple]) -> None:
        """Sweep another pass's rows too (the priority rows, behind the priority pass's cursor),
        after this one's, in the same run."""
        self.passes.append((pusher, dispatcher_cursor))

    def run_once(self, max_pages: int = 1000) -> int:
        """Returns how many overdue ids were dispatched again (0 in healthy running)."""
        workload = self.workload
        pushed = 0
        self.guarded = False
        clear, self.clear = self.clear, set()
        try:
            for number, (pusher, dispatcher_cursor) in enumerate(self.passes):
                if number not in clear:
                    pushed += self.sweep(pusher, dispatcher_cursor(), max_pages)
        finally:
            if self.guarded:
                self.pusher.store.end_guard("sweep")
        if pushed:
            log.warning(
                "%ssweep: %d rows overdue by more than %.1fs were not in flight; dispatched them again",
                workload.log_prefix,
                pushed,
                workload.deployment.sweep_grace,
            )
        return pushed

    def sweep(self, pusher: DuePusher, before: tuple, max_pages: int) -> int:
        """One pass's overdue rows behind its cursor (`before`), under the sweep's guard. In
        healthy running there are none: one unguarded read of a single row says so, and the
        guard (which must be set before a read whose rows are pushed) and the queue's depth are
        left alone: an idle workload's sweep costs Redis nothing."""
        workload = self.workload
        if not pusher.any_due(START, before, workload.deployment.sweep_grace):
            return 0
        self.guarded = True
        cursor, pushed, depth = START, 0, pusher.depth()
        for _ in range(max_pages):
            room = workload.waiting_limit - depth
            if room <= 0:
                break
            limit = min(workload.dispatch_batch, room)
            page = pusher.push_page(
                cursor, limit, lateness_s=workload.deployment.sweep_grace, before=before, guard="sweep"
            )
            if page.read == 0:
                break
            pushed += page.pushed
            cursor, depth = page.cursor, page.depth
            if page.read < limit:
                break
        return pushed


class SweepProbe:
    """The sweeps of the workloads on one MySQL server, asked together: one statement says which
    of their passes have a row overdue behind the cursor (queries.sql `overdue_probe`), and only
    those read for themselves; in healthy running, none. Ten idle workloads' sweeps cost one round
    trip every sweep_interval instead of ten. If the probe fails, each sweep reads as before (its
    own outage handled by its lane's lifeline)."""

    def __init__(self, db: Database):
        self.probe = DueProbe(db)  # a connection of its own

    def mark(self, sweepers: Sequence[Sweeper]) -> None:
        """Set each sweeper's `clear` passes for its next run; raises what MySQL raises."""
        passes = [(sweeper, number) for sweeper in sweepers for number in range(len(sweeper.passes))]
        parts = []
        for sweeper, number in passes:
            pusher, dispatcher_cursor = sweeper.passes[number]
            grace = sweeper.workload.deployment.sweep_grace
            parts.append(overdue_part(pusher.rows.queries, dispatcher_cursor(), grace, pusher.priority))
        due = self.probe.due(parts)
        for index, (sweeper, number) in enumerate(passes):
            if index not in due:
                sweeper.clear.add(number)

    def close(self) -> None:
        self.probe.close()


class Housekeeper(Job):
    """What is kept only for a while: error groups nobody saw for a day, the change feed's
    oldest, a one-shot workload's done rows older than keep_done. A job of its own, beside the
    orphan collector: a trim that waits on the application's locks never holds up a release."""

    trim_after: Key | None = None  # where the walk of done rows goes on (keep_done); None: from the first

    def run_once(self) -> int:
        """Returns how many done rows were deleted."""
        _, db_epoch = self.rows.clock()
        self.store.prune_errors(db_epoch - ERRORS_KEPT_S)  # groups nobody saw for a day
        if self.workload.changes:  # the change feed keeps its newest changes_keep
            self.rows.trim_changes(self.workload.changes_keep)
        if not self.workload.keep_done:
            return 0
        trimmed, self.trim_after = self.rows.trim_done(self.workload.keep_done, self.trim_after)
        if trimmed:
            log.info("%sdeleted %d done rows older than keep_done (%g s)", self.workload.log_prefix,
                     trimmed, self.workload.keep_done)  # fmt: skip
        return trimmed


class OrphanCollector(Job):
    """Release in-flight ids (due more than orphan_after ago) that nothing holds."""

    CANDIDATES = 10_000  # in-flight ids judged per run and partition at most

    def __init__(self, workload: Workload, db: Database, store: Store):
        super().__init__(workload, db, store)
        self.cursors: dict[int, int] = {}  # partition -> where the in-flight scan goes on

    def candidates(self, partition: int, cutoff_ms: int) -> list[bytes]:
        """id, due pairs in flight for a due time older than the cutoff, about CANDIDATES a run
        (HSCAN: never blocks Redis). The scan goes on where the last run stopped: under a backlog
        older than orphan_after every queued id is a candidate, and starting over each run would
        look at the same ones each time and never reach an orphan further on."""
        cursor = self.cursors.get(partition, 0)
        self.cursors[partition], found = self.store.in_flight_before(
            partition, cutoff_ms, cursor, self.CANDIDATES
        )
        return found

    def run_once(self) -> list[Key]:
        db_now, _ = self.rows.clock()
        now_ms = datetime_to_ms(db_now)
        cutoff_ms = now_ms - round(self.workload.deployment.orphan_after * 1000)
        ids: list[Key] = []
        for partition in range(self.store.count):  # each partition of the workload (one when unpartitioned)
            decoded = (self.keys.decode(r) for r in self.release_part(partition, cutoff_ms))
            ids += [key for key in decoded if key is not None]
        if ids:
            log.warning(
                "%sreleased %d in-flight ids nothing held (e.g. %s); they will be swept",
                self.workload.log_prefix, len(ids), ids[:5],
            )  # fmt: skip
        return ids

    def release_part(self, partition: int, cutoff_ms: int) -> list[bytes]:
        candidates = self.candidates(partition, cutoff_ms)
        for _ in range(5):
            workers = self.store.worker_ids(partition)
            # What is seen waiting or held is no orphan. What the reads missed is read for again:
            # an orphan stays unseen, an entry that moved past the reads is seen the second time.
            # Only the rest goes to the one script that reads everything at once (orphans.lua).
            for _ in range(2):
                if candidates:
                    candidates = self.store.not_seen_anywhere(partition, candidates, workers)
            if not candidates:
                return []
            released = self.store.release_orphans(partition, candidates, workers)
            if released is not None:
                return released
        return []  # workers kept changing; the next run will try again
