"""`recheck status`: is every row fresh, and if not, why? Facts from MySQL and Redis.

Fresh means no row overdue by more than 1 s AND checks not failing (a failed check is not a
fresh row: see shared/core/failures.py). Every figure sampled again and again is read through the
(due, id) index and capped, or from the workers' heartbeats, so sampling stays cheap on a table
of millions of rows with a large backlog; the count of failing rows is a capped scan, taken by
one-shot `recheck status` and at most every few seconds by a Sampler.

Freshness samples cost O(SAMPLED_COUNT_CAP) whatever the backlog: one pass over the oldest due
index entries gives all three counts, beyond the cap a count reads "N+" and the oldest lateness
(one index probe) tells how far behind. And one sample a second serves the whole deployment:
whoever samples first (a dispatcher's monitor, `recheck run`'s live line, `recheck watch`)
shares it in Redis for SHARE_MS, and the others read it instead of asking MySQL again.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from recheck.shared.config import DEFAULT_WORKLOAD, Workload, redact_url
from recheck.shared.core.failures import Recent, failing
from recheck.shared.core.limits import GroupLimit
from recheck.shared.core.records import (
    ErrorGroup,
    Freshness,
    GroupFacts,
    OneShotFacts,
    Overdue,
    PriorityFacts,
    StatusFacts,
    WorkerBeat,
)
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.policies.lifecycle import lifecycle_of, rhythm_of
from recheck.shared.policies.ordering import ordering_of
from recheck.shared.redis.store import Store
from recheck.shared.views.buckets import SECONDS_BUCKETS, quantile

COUNT_CAP = 1_000_000  # one-shot `recheck status`
SAMPLED_COUNT_CAP = 10_000  # counts taken every second (dashboard, live line, watch): O(cap) each
SHARE_MS = 1000  # how long one freshness sample serves every sampler of a deployment
SLOW_EVERY = 30.0  # seconds between exact row counts and failing-rows samples in a Sampler
FAILING_EVERY = 5.0  # ... and between failing-rows samples while checks are failing
NOT_FRESH = 3  # `recheck status` exit code when rows are overdue or checks failing
DEAD_ROWS = 4  # `recheck status` exit code when every row is fresh but a one-shot workload has dead rows
OVERDUE_DETAIL = 2_000  # the oldest overdue rows a sample reads one by one (only when any are)


def shown_key(key: int | str | bytes) -> str:
    """A key as status, JSON and the dashboard show it: text, binary keys as hex. Never a JSON
    number: JavaScript reads numbers as doubles, so 9007199254740993 would arrive as ...992 and a
    dashboard action would hit the wrong row."""
    return key.hex() if isinstance(key, bytes | bytearray) else str(key)


def freshness(rows: Rows, cap: int) -> Freshness:
    """Due and overdue counts (each exactly min(true count, cap)), the oldest lateness, and the
    oldest overdue rows themselves (OVERDUE_DETAIL at most: due time, lateness, own interval),
    from which split_overdue() tells waiting rows from rows in flight."""
    due_now, overdue_1s, db_epoch, oldest_lateness_s = rows.freshness(cap)
    detail = rows.overdue_rows(OVERDUE_DETAIL) if overdue_1s else []
    return Freshness(
        due_now=due_now,
        overdue_1s=overdue_1s,
        count_cap=cap,
        oldest_lateness_s=oldest_lateness_s,
        overdue_detail=[[int(due), int(late), int(every)] for due, late, every in detail],
        db_epoch=db_epoch,
    )


def shared_freshness(rows: Rows, store: Store, shared: dict | None) -> Freshness:
    """The deployment's latest sample (`shared`, as Store.status_reads found it) if one is under
    SHARE_MS old, else a new one, shared."""
    sample = Freshness.from_json(shared) if shared is not None else None
    if sample is None or sample.count_cap != SAMPLED_COUNT_CAP:
        sample = freshness(rows, SAMPLED_COUNT_CAP)
        store.share_sample(sample.as_json(), SHARE_MS)
    return sample


def split_overdue(overdue_1s: int, detail: list[list[int]], in_hand: list[int]) -> Overdue:
    """Overdue rows waiting (for a worker, or for rate-limit tokens) apart from rows in flight
    (a worker is checking them: slow checks inside their timeout are being checked, not late).

    detail: the oldest overdue rows as (due_ms, late_us, own interval_us); in_hand: the due
    times of the rows workers hold that are due (their heartbeats: rows due less than a second
    ago too, so a row that crossed the second since the last beat is not taken for waiting). A
    row of the detail whose due time a worker holds is in flight (multiset: two rows may share
    one due time). Pure logic."""
    held: dict[int, int] = {}
    for due_ms in in_hand:
        held[due_ms] = held.get(due_ms, 0) + 1
    waiting = []
    for due_ms, late_us, interval_us in detail:
        if held.get(due_ms):
            held[due_ms] -= 1
        else:
            waiting.append((late_us, max(interval_us, 1)))
    matched = len(detail) - len(waiting)
    if len(detail) < overdue_1s:  # more overdue rows than the detail shows: those held beyond it too
        matched += min(sum(held.values()), overdue_1s - len(detail))
    return Overdue(
        overdue_in_flight=matched,
        overdue_waiting=max(overdue_1s - matched, 0),
        oldest_waiting_s=round(max((late for late, _ in waiting), default=0) / 1e6, 3),
        # Lateness in each row's own interval: an interval column's 5 s rows late by 12 s are
        # 2.4 intervals late even if the workload's interval says 60 s.
        waiting_intervals=round(max((late / every for late, every in waiting), default=0.0), 3),
        overdue_interval=sum(late > every for late, every in waiting),
    )


def gather(
    workload: Workload,
    db: Database,
    store: Store,
    *,
    count_rows: bool = True,
    sampled: bool = False,
    rows: Rows | None = None,
) -> StatusFacts:
    """Every fact status shows. count_rows: also the counts that scan the table (rows, failing,
    the range of the rows' intervals). sampled: taken again and again (counts capped at
    SAMPLED_COUNT_CAP, the sample shared). rows: the workload's on `db`, if the caller keeps one
    (rendering its statements was a sixth of a sample's CPU)."""
    rows = rows if rows is not None else Rows(workload, db)
    # Round trips, not bytes, are what a sample costs a process that samples at rest (each wakes
    # a thread): the counts in one statement beside the freshness pass, Redis' facts in two.
    # MySQL first: with both servers refusing, the first error said is MySQL's, as it always was.
    cap = SAMPLED_COUNT_CAP if sampled else COUNT_CAP
    one_shot = lifecycle_of(workload).one_shot
    counts = rows.counts(pending_cap=cap if one_shot else 0)
    reads = store.status_reads()
    fresh = shared_freshness(rows, store, reads.shared_freshness) if sampled else freshness(rows, cap)
    interval_range = rows.interval_range() if count_rows else None
    counted = rows.slow_counts(cap) if count_rows else None
    quarantined = counts.quarantined
    workers = reads.workers
    overview = reads.overview
    recent = Recent(sum(w.recent_checked for w in workers), sum(w.recent_failed for w in workers))
    in_hand = [due for w in workers for due in w.overdue_in_hand]
    split = split_overdue(fresh.overdue_1s, fresh.overdue_detail, in_hand)
    facts = StatusFacts(
        workload=workload.name,
        table=f"{workload.mysql.database}.{workload.table}",
        mysql=redact_url(workload.mysql_url),
        redis=redact_url(workload.deployment.redis_url),
        interval_s=workload.interval,
        interval_range_s=list(interval_range) if interval_range else None,
        failing_threshold=workload.failing_threshold,
        rows=counted.rows if counted else None,
        due_now=fresh.due_now,
        overdue_1s=fresh.overdue_1s,
        count_cap=cap,
        oldest_lateness_s=fresh.oldest_lateness_s,
        db_epoch=fresh.db_epoch,
        **{f.name: getattr(split, f.name) for f in dataclasses.fields(split)},
        quarantined=quarantined,
        paused=counts.paused,
        failing_rows=counted.failing if counted else None,
        due_ahead_unchecked=counted.due_ahead_unchecked if counted else None,
        quarantined_ids=[
            {"id": shown_key(i), "reason": reason}
            for i, reason in (rows.quarantined(limit=20) if quarantined else [])
        ],
        queue_depth=overview.queue_depth,
        suspects=overview.suspects,
        in_flight=overview.in_flight,
        live_workers=len(workers),
        live_dispatchers=0,
        leader=overview.leader,
        checks_per_second=round(sum(w.rate for w in workers), 1),
        workers=workers,
        counters=overview.counters,
        checks_past_timeout=sum(w.abandoned for w in workers),
        recent_checks=recent.checked + recent.failed,
        recent_failed=recent.failed,
        checks_failing=failing(recent, workload.failing_threshold),
        last_error=next((w.last_error for w in workers if w.last_error), None),
        errors=error_groups(reads.errors, fresh.db_epoch),
        rate_limit=workload.rate_limit,
        max_in_flight=workload.max_in_flight,
        limited_by=limited_by(workers),
    )
    ordering = ordering_of(workload)
    if ordering.priority_by:
        share, depth = ordering.rest_share or 0.0, overview.priority_depth
        facts.priority = PriorityFacts(ordering.priority_by, share, depth)
    if ordering.group_by and ordering.group_limit:
        facts.groups = group_facts(ordering.group_by, ordering.group_limit, store)
        facts.limited_by = biggest_held(facts.limited_by, facts.groups)
    rhythm = rhythm_of(workload)
    if rhythm.calendar:
        facts.schedule = rhythm.says
    if one_shot:
        dead = counts.dead
        facts.one_shot = OneShotFacts(
            pending=counts.pending,
            dead=dead,
            dead_ids=[
                {"id": shown_key(i), "fails": int(n), "error": error} for i, n, error in rows.dead(limit=20)
            ] if dead else [],
        )  # fmt: skip
    facts.dispatchers = reads.dispatchers
    facts.live_dispatchers = len(facts.dispatchers)
    facts.fresh = facts.overdue_waiting == 0 and not facts.checks_failing
    facts.needed_rate = (
        round(facts.rows / workload.interval, 1) if facts.rows and not facts.schedule else None
    )
    return facts


def group_facts(column: str, limit: GroupLimit, store: Store) -> GroupFacts:
    """A grouped workload's section: its limits per group and what its groups' lists hold."""
    groups = store.group_overview()
    return GroupFacts(
        column=column,
        rate_limit=limit.rate,
        max_in_flight=limit.in_flight,
        waiting=groups.waiting,
        at_rate=groups.at_rate,
        at_room=groups.at_room,
        held=[{"group": name, "waiting": size} for name, size in groups.biggest],
        open=groups.open_count,
        open_names=list(groups.open),
    )


def limited_by(workers: list[WorkerBeat]) -> str:
    """ "backoff" when a live worker is backing off a failing provider, else "rate" or
    "in_flight" when a live worker's takes were held back by the limits lately, else "group X"
    when a group's own limits did (a grouped workload)."""
    held = {w.limited for w in workers}
    found = next((why for why in ("backoff", "rate", "in_flight") if why in held), "")
    return found or min((why for why in held if why.startswith("group ")), default="")


def biggest_held(reason: str, groups: GroupFacts) -> str:
    """A group's own limits held takes back ("group X", as workers report it): the group held back
    with the most rows waiting, not whichever group last held back one worker's take (with 26
    groups at their rate, that was one with a row waiting while another had 19,986). Pure logic."""
    if reason.startswith("group ") and groups.held:
        return f"group {groups.held[0]['group']}"
    return reason


class Sampler:
    """Facts sampled again and again (dashboard, --watch): cheap queries each time, the exact
    row count every 30 s and failing rows every 30 s (every 5 s while checks fail); checks/s
    from the cluster-wide counters and lateness percentiles from the histograms workers
    publish, both since the last sample."""

    def __init__(
        self, workload: Workload, db: Database, store: Store, clock: Callable[[], float] = time.monotonic
    ):
        self.workload = workload
        self.db = db
        self.store = store
        self.clock = clock  # when the slow counts and the failing rows are due again
        self.rows = Rows(workload, db)
        self.cap = SAMPLED_COUNT_CAP
        self._slow_at = -SLOW_EVERY
        self._failing_at = -SLOW_EVERY
        self._rows: int | None = None
        self._interval_range: list[float] | None = None
        self._due_ahead: int | None = None
        self._failing_rows: int | None = None
        self._failing: list[dict] = []
        self._previous: tuple[float, int] | None = None  # (time, checked + failed)
        self._worker_buckets: dict[str, list[int]] = {}

    def sample(self) -> StatusFacts:
        now = self.clock()
        slow = now - self._slow_at >= SLOW_EVERY
        facts = gather(self.workload, self.db, self.store, count_rows=False, sampled=True, rows=self.rows)
        # The row count is 30 s old at most; paused and quarantined rows are counted every time,
        # so rows inserted since could show more of them than rows: count again then.
        stale = self._rows is not None and facts.paused + facts.quarantined > self._rows
        counted = None
        if slow or stale:
            self._slow_at = now
            counted = self.rows.slow_counts(self.cap)  # the rows, due ahead, failing: one statement
            self._rows = counted.rows
            interval_range = self.rows.interval_range()  # a scan with an interval column
            self._interval_range = list(interval_range) if interval_range else None
            self._due_ahead = counted.due_ahead_unchecked
        # Failing rows: a scan, so every 30 s, but every 5 s while checks fail or rows are failing.
        # Listed only when some are counted (none, most of the time: a statement saved).
        hurry = facts.recent_failed or self._failing
        if slow or (hurry and now - self._failing_at >= FAILING_EVERY):
            self._failing_at = now
            self._failing_rows = counted.failing if counted else self.rows.count_failing(self.cap)
            self._failing = [
                {"id": shown_key(i), "fails": int(n), "error": error}
                for i, n, error in (self.rows.failing(limit=20) if self._failing_rows else [])
            ]
        facts.rows = self._rows
        facts.interval_range_s = self._interval_range
        facts.due_ahead_unchecked = self._due_ahead
        facts.failing_rows = self._failing_rows
        facts.failing = self._failing
        facts.needed_rate = (
            round(facts.rows / self.workload.interval, 1) if facts.rows and not facts.schedule else None
        )
        facts.checks_per_second = self._rate(now, facts.counters)
        facts.lateness_p50_s, facts.lateness_p99_s = self._recent_lateness(facts.workers)
        facts.sampled_at = time.time()
        return facts

    def _rate(self, now: float, counters: dict[str, int]) -> float:
        done = counters.get("checked", 0) + counters.get("failed", 0)
        previous, self._previous = self._previous, (now, done)
        if previous is None or now <= previous[0] or done < previous[1]:  # first sample, or Redis lost data
            return 0.0
        return round((done - previous[1]) / (now - previous[0]), 1)

    def _recent_lateness(self, workers: list[WorkerBeat]) -> tuple[float | None, float | None]:
        """p50 and p99 of rows written since the previous sample, all workers together."""
        delta = [0] * (len(SECONDS_BUCKETS) + 1)
        seen = {}
        for worker in workers:
            buckets = worker.lateness_buckets
            if len(buckets) != len(delta):
                continue
            previous = self._worker_buckets.get(worker.id)
            if previous is not None:
                for i, (now_n, then_n) in enumerate(zip(buckets, previous, strict=True)):
                    delta[i] += max(now_n - then_n, 0)
            seen[worker.id] = buckets
        self._worker_buckets = seen
        return quantile(delta, SECONDS_BUCKETS, 0.5), quantile(delta, SECONDS_BUCKETS, 0.99)


ERRORS_SHOWN = 10
ERRORS_RECENT_S = 3600.0  # groups seen in the last hour are shown


def error_groups(recorded: dict[str, dict], now: float) -> list[ErrorGroup]:
    """Failures of the last hour grouped by their (normalised) error: the ERRORS_SHOWN seen most
    recently (so a new error always shows), most frequent first; the counts workers keep in
    Redis (shared/lua/errors.lua; `recorded`, as Store.error_groups reads them), so no scan of
    the table. `now`: the database clock (Unix seconds), the one the groups are stamped on."""
    groups = [
        ErrorGroup(error=message, count=int(group.get("count", 0)),
                   examples=[str(e) for e in group["examples"]],
                   first_seen=group.get("first"), last_seen=group.get("last"))
        for message, group in recorded.items()
        if float(group.get("last", 0)) >= now - ERRORS_RECENT_S
    ]  # fmt: skip
    latest = sorted(groups, key=lambda g: -float(g.last_seen or 0))[:ERRORS_SHOWN]  # a new one shows
    return sorted(latest, key=lambda g: -g.count)


def clock(unix: float | None) -> str:
    return "-" if unix is None else time.strftime("%H:%M:%S", time.localtime(float(unix)))


def capped(count: int, facts: StatusFacts) -> str:
    """A sampled count, with a '+' when it reached the cap (there may be more)."""
    return f"{count:,}" + ("+" if count >= facts.count_cap else "")


def rhythm(facts: StatusFacts) -> str:
    """'every 10 s', or the range of the rows' own intervals ('every 5-60 s'); 'one-shot rows'; a
    calendar schedule ("each row's schedule (cron) in time zone UTC")."""
    if facts.one_shot:
        return "one-shot rows"
    if facts.schedule:
        return facts.schedule
    low, high = facts.interval_range_s or (facts.interval_s, facts.interval_s)
    return f"every {low:g} s" if low == high else f"every {low:g}-{high:g} s"


def headline(facts: StatusFacts) -> str:
    """The one line a screen leads with (the dashboard's page says the same in its own code)."""
    rows = "All" if facts.rows is None else f"All {facts.rows:,}"
    if facts.fresh and facts.dead:
        return f"{facts.dead:,} dead rows"
    if facts.fresh:
        return f"{rows} rows fresh"
    if facts.overdue_waiting:
        return f"{capped(facts.overdue_waiting, facts)} rows overdue"
    return "Checks failing"


def exit_code(facts: StatusFacts) -> int:
    """`recheck status`'s verdict for a cron job or a monitoring check: 0 fresh, NOT_FRESH, or
    DEAD_ROWS (fresh, but dead rows wait for someone to retry or delete them)."""
    if not facts.fresh:
        return NOT_FRESH
    return DEAD_ROWS if facts.dead else 0


def verdict(facts: StatusFacts) -> str:
    """Fresh, or why not. "Overdue" counts rows WAITING more than 1 s past their due time: a row
    a worker is checking (a slow check inside its timeout) is being checked, not late."""
    in_flight = ""
    if facts.overdue_in_flight:
        in_flight = f"{facts.overdue_in_flight:,} rows past due are being checked (slow checks, in flight)"
    if facts.checks_past_timeout:
        in_flight += ("; " if in_flight else "") + (
            f"{facts.checks_past_timeout:,} checks ran past their timeout and were abandoned"
        )
    if facts.fresh:
        fresh = "every row fresh: no row has waited more than 1 s past its due time, and checks succeed"
        fresh += f" ({in_flight})" if in_flight else ""
        if facts.dead:  # on time, but jobs that will never run again unless someone acts
            return f"DEAD ROWS: {dead_line(facts)}; otherwise {fresh}"
        return fresh
    failing_part = ""
    if facts.checks_failing:
        share = facts.recent_failed / max(facts.recent_checks, 1)
        failing_part = (
            f"checks failing: {share:.0%} of the {facts.recent_checks:,} checks in the last minute "
            f"failed, more than the {facts.failing_threshold:.0%} this workload allows "
            f"(last error: {facts.last_error or 'unknown'})"
        )
    parts = [failing_part] if failing_part else []
    if facts.overdue_waiting:
        reasons = []
        if facts.live_workers == 0:
            reasons.append("no live workers")
        if facts.live_dispatchers == 0:
            reasons.append("no live dispatcher")
        elif facts.leader is None:
            reasons.append("no dispatcher holds the leader lease")
        if facts.queue_depth and facts.live_workers:
            reasons.append(waiting_reason(facts))
        why = f" ({'; '.join(reasons)})" if reasons else ""
        late = f"{facts.oldest_waiting_s:.1f} s"
        if facts.waiting_intervals:
            late += f", {facts.waiting_intervals:.1f} of its own interval"
        overdue = f"{capped(facts.overdue_waiting, facts)} rows overdue by more than 1 s and waiting"
        parts.insert(0, f"{overdue}, the oldest by {late}{why}")
    if in_flight:
        parts.append(in_flight)
    return "NOT FRESH: " + "; ".join(parts)


def dead_line(facts: StatusFacts) -> str:
    """What dead rows (one-shot workloads) ask of the operator."""
    named = f"--workload {facts.workload} " if facts.workload not in ("", DEFAULT_WORKLOAD) else ""
    return (
        f"{facts.dead:,} dead rows: failed max_attempts times, kept, never dispatched; `recheck "
        f"inspect {named}ID` tells one's story, `recheck retry {named}ID...` puts it back"
    )


def waiting_reason(facts: StatusFacts) -> str:
    """Why ids wait in the queue while workers live: the limits, or workers that are behind."""
    queued = f"{facts.queue_depth:,} ids waiting"
    if facts.priority and facts.priority.depth:
        queued += f" ({facts.priority.depth:,} priority rows first)"
    if facts.limited_by == "backoff":
        return (f"backing off a failing provider: {queued} while workers probe with a few checks a "
                "second until they succeed (backoff_threshold)")  # fmt: skip
    if facts.limited_by == "rate":
        needs = f"; the table needs about {facts.needed_rate:,.0f}/s" if facts.needed_rate else ""
        return f"rate-limited: {queued} for tokens (rate_limit {facts.rate_limit:g}/s{needs})"
    if facts.limited_by == "in_flight":
        return f"limited: {queued} while max_in_flight ({facts.max_in_flight}) checks run"
    if facts.limited_by.startswith("group ") and facts.groups:
        return f"limited by {facts.limited_by}: {queued}, {held_groups(facts.groups)}"
    return f"{queued} for a worker: workers are behind"


def held_groups(groups: GroupFacts) -> str:
    """ "150 of 201 groups held back by their own limits (group_rate_limit 5/s); e.g. big (19,210
    waiting)"."""
    limits = [
        *([f"group_rate_limit {groups.rate_limit:g}/s"] if groups.rate_limit else []),
        *([f"group_max_in_flight {groups.max_in_flight}"] if groups.max_in_flight else []),
    ]
    text = (
        f"{groups.at_rate + groups.at_room:,} of {groups.waiting:,} groups held back by "
        f"their own limits ({', '.join(limits) or 'none set'})"
    )
    if groups.held:
        text += "; e.g. " + ", ".join(f"{g['group']} ({g['waiting']:,} waiting)" for g in groups.held)
    if groups.open:
        text += f"; breaker open for {groups.open:,}: " + ", ".join(groups.open_names)
    return text


def groups_line(groups: GroupFacts) -> str:
    return f"  groups            by {groups.column}: {held_groups(groups)}"


def priority_line(priority: PriorityFacts) -> str:
    """Which rows go first, what the rest keep, and how many priority rows wait."""
    return (
        f"  priority          {priority.column} = 1 first ({priority.depth:,} waiting); "
        f"{priority.share:.0%} of takes kept for the rest"
    )


def limits_line(facts: StatusFacts) -> str:
    """The limits after the checks/s figure: "   (rate_limit 200/s, rate-limited now)"."""
    parts = []
    if facts.rate_limit:
        parts.append(f"rate_limit {facts.rate_limit:g}/s")
    if facts.max_in_flight:
        parts.append(f"max_in_flight {facts.max_in_flight}")
    if facts.limited_by:
        parts.append({"rate": "rate-limited now", "in_flight": "at max_in_flight now",
                      "backoff": "backing off a failing provider now"}.get(
            facts.limited_by, f"limited by {facts.limited_by} now"))  # fmt: skip
    return f"   ({', '.join(parts)})" if parts else ""


def render(facts: StatusFacts, workload: str | None = None) -> str:
    """The text `recheck status` prints for one workload (named when there are several)."""

    def n(value) -> str:
        return "-" if value is None else f"{value:,}"

    named = f"workload {workload}: " if workload else ""
    lines = [
        f"recheck status: {named}{facts.table} {rhythm(facts)}",
        f"  rows              {n(facts.rows)}",
        f"  due now           {n(facts.due_now)}",
        f"  overdue > 1 s     {n(facts.overdue_waiting)} waiting, {n(facts.overdue_in_flight)} being checked",
        f"  oldest waiting    {facts.oldest_waiting_s:.2f} s   (any row: {facts.oldest_lateness_s:.2f} s)",
        f"  failing rows      {n(facts.failing_rows)}"
        f"   (checks in the last minute {facts.recent_checks:,}, failed {facts.recent_failed:,})",
        f"  quarantined       {n(facts.quarantined)}   paused {n(facts.paused)}",
        *(
            [
                f"  one-shot          pending {n(facts.one_shot.pending)}   dead {n(facts.dead)}"
                f"   done {facts.checks_per_second:,.0f}/s"
            ]
            if facts.one_shot
            else []
        ),
        f"  queue depth       {n(facts.queue_depth)}   suspects {n(facts.suspects)}",
        *([priority_line(facts.priority)] if facts.priority else []),
        *([groups_line(facts.groups)] if facts.groups else []),
        f"  in flight         {n(facts.in_flight)}",
        f"  live workers      {facts.live_workers}   dispatchers {facts.live_dispatchers}"
        f" (leader {facts.leader or 'none'})",
        f"  checks/s          {facts.checks_per_second:,.0f}" + limits_line(facts),
    ]
    for worker in facts.workers:
        lines.append(
            f"    {worker.id:<32} {worker.rate:>9,.0f}/s"
            f"  checked {worker.checked:,}  failed {worker.failed:,}"
        )
    for row in facts.quarantined_ids:
        lines.append(f"    quarantined id {row['id']}: {row['reason']}")
    for row in facts.one_shot.dead_ids if facts.one_shot else []:
        lines.append(f"    dead id {row['id']} after {row['fails']} failures: {row['error']}")
    if facts.errors:
        lines.append("  failures in the last hour, by error:")
    for group in facts.errors:
        examples = ", ".join(group.examples[:3])
        lines.append(
            f"    {group.count:>9,}x  {group.error}  (e.g. {examples}; "
            f"first {clock(group.first_seen)}, last {clock(group.last_seen)})"
        )
    lines.append(f"  {verdict(facts)}")
    if facts.dead:
        lines.append(f"  {dead_line(facts)}")
    if facts.due_ahead_unchecked:
        lines.append(f"  warning: {due_ahead_warning(facts)}")
    return "\n".join(lines)


def due_ahead_warning(facts: StatusFacts) -> str:
    return (
        f"{capped(facts.due_ahead_unchecked or 0, facts)} rows never checked are due more than their "
        "interval ahead: rows are due when inserted, so were they inserted from a session in another "
        "time zone? (`recheck config` tells; docs/application-api.md)"
    )
