"""`recheck bench`'s report: the table of every strategy's figures, the drains as the table tells
them (recheck against each peer), and the plot."""

from __future__ import annotations

from pathlib import Path

from bench.peers import PEERS
from bench.runs import ALONE, ON_CLUSTER, BenchConfig, Result
from bench.strategies import FLOOR, STRATEGIES

# Issue 34's targets for one-shot jobs, judged in the run that measured them (jobs_lines).
JOBS_DRAIN_TIMES_BEST = 10.0  # 24 consumers x batch 100: recheck's jobs/s over the best queue table's
STEADY_START_P99_S = 0.25  # producers at 2,000 jobs/s: p99 from commit to the check starting
SATURATED_SHARE = 0.5  # jobs handled/s beside full-speed producers, over what they insert alone


def table(results: list[Result], redis_bytes: float | None) -> str:
    def f(value, fmt: str = "{:,.0f}") -> str:
        return "-" if value is None else fmt.format(value)

    best = max((r.checks_per_second for r in results if r.strategy in STRATEGIES), default=0)
    floor = next((r.mysql_us_per_check for r in results if r.strategy == FLOOR), None)

    def times_floor(us: float | None) -> str:
        return f"{us / floor:.2f}x" if floor and us is not None else "-"

    lines = [
        f"{'strategy':<15} {'checks/s':>10} {'vs best seed':>12} {'p50 late':>9} {'p99 late':>9} "
        f"{'max late':>9} {'>1s max':>9} {'>2s max':>9} {'dups':>6} {'deadlocks':>9} {'CPU us/check':>13} "
        f"{'MySQL us':>9} {'MySQL/floor':>11} {'all/floor':>9} {'conns':>6} {'lock waits':>10} "
        f"{'history':>8}",
    ]
    for r in results:
        ratio = f"{r.checks_per_second / best:.1f}x" if best and r.strategy == "recheck" else ""
        lines.append(
            f"{r.strategy:<15} {f(r.checks_per_second):>10} {ratio:>12} {f(r.lateness_p50_s, '{:.2f}s'):>9} "
            f"{f(r.lateness_p99_s, '{:.2f}s'):>9} {f(r.lateness_max_s, '{:.2f}s'):>9} "
            f"{f(r.overdue_1s_max):>9} {f(r.overdue_2s_max):>9} {r.duplicates:>6} {r.lock_conflicts:>9} "
            f"{f(r.cpu_us_per_check, '{:.1f}'):>13} {f(r.mysql_us_per_check, '{:.1f}'):>9} "
            f"{times_floor(r.mysql_us_per_check):>11} {times_floor(r.cpu_us_per_check):>9} "
            f"{r.mysql_connections_max:>6} {r.row_lock_waits:>10,} {r.history_length_max:>8,}"
        )
    for r in results:
        if r.take_mean is not None:
            asked = f"{r.take_mean:,.0f}"
            lines.append(
                f"  {r.strategy}: workers asked for {asked} ids a take on average (got: what waited)"
            )
    for r in results:
        parts = ", ".join(f"{name} {sec:.1f}s" for name, sec in sorted(r.cpu_seconds.items()) if sec)
        lines.append(f"  CPU {r.strategy}: {parts}")
        workers = sum(sec for name, sec in r.cpu_seconds.items() if name.startswith("worker"))
        # issue 50's moderate-rate figure: this at 200,000 rows every 10 s over a drain's
        if r.checks and workers:
            lines.append(f"  CPU us per check of the workers, {r.strategy}: {workers / r.checks * 1e6:.2f}")
    for r in results:
        redis = {name: sec for name, sec in sorted(r.cpu_seconds.items()) if name.startswith("redis")}
        if r.checks and r.strategy in ("recheck", ON_CLUSTER):
            each = ", ".join(f"{name} {sec / r.checks * 1e6:.2f}" for name, sec in redis.items())
            total = sum(redis.values()) / r.checks * 1e6
            lines.append(f"  Redis CPU us per check, {r.strategy}: {each} (all {total:.2f})")
    if redis_bytes is not None:
        lines.append(f"Redis memory per queued id (queue entry + in-flight entry): {redis_bytes:.0f} bytes")
    lines += drain_lines(results)
    return "\n".join(lines)


def drain_lines(results: list[Result]) -> list[str]:
    """The drains as the table tells them (first to last checked_at), the peers' with their job's
    read and enqueue too, CPU per check by role, and recheck against each peer."""
    drained = [r for r in results if r.drain_checks_per_second]
    if not drained:
        return []
    lines = ["drain, rows / (last - first checked_at); a peer also from the start of its job's read:"]
    for r in drained:
        line = f"  {r.strategy:<15} {r.drained_rows:>10,} rows {r.drain_checks_per_second:>10,.0f}/s"
        if r.with_enqueue_checks_per_second:
            line += (f"   with its read ({r.read_seconds:.1f} s) and enqueue ({r.enqueue_seconds:.1f} s): "
                     f"{r.with_enqueue_checks_per_second:,.0f}/s")  # fmt: skip
        if r.repeated_checks:
            line += f"   {r.repeated_checks:,} repeated checks"
        lines.append(line)
    for r in drained:
        roles = ", ".join(f"{role} {us:.1f}" for role, us in (r.drain_cpu_us_per_check or {}).items())
        lines.append(f"  CPU us per check over the drain, {r.strategy}: {roles}")
    ours = next((r for r in drained if r.strategy == "recheck"), None)
    for peer in (r for r in drained if r.strategy in PEERS and ours):
        ratio = ours.drain_checks_per_second / peer.drain_checks_per_second
        line = f"  recheck / {peer.strategy}: drain {ratio:.2f}x"
        if peer.with_enqueue_checks_per_second:
            ratio = ours.drain_checks_per_second / peer.with_enqueue_checks_per_second
            line += f", counting its read + enqueue {ratio:.2f}x"
        lines.append(line)
    return lines


def jobs_lines(results: list[Result], config: BenchConfig) -> list[str]:
    """The one-shot jobs figures (bench/jobs.py) and issue 34's targets, met or missed."""
    lines = ["one-shot jobs:"]
    for r in results:
        line = f"  {r.strategy:<15}"
        if r.inserts_per_second is not None:
            line += f" inserted {r.inserts_per_second:>9,.0f}/s ({r.inserted:,} in all)"
        if r.strategy != ALONE:
            line += f" handled {r.checks_per_second:>9,.0f}/s"
        if r.start_p50_s is not None or r.start_unseen:
            line += f" | commit -> check start p50 {ms(r.start_p50_s)}, p99 {ms(r.start_p99_s)}"
            line += f", max {ms(r.start_max_s)}"
        lines.append(line)
        if r.jobs_rows is not None and r.strategy != ALONE:
            line = f"  {'':<15} {r.jobs_rows:,} rows: left pending {r.left_pending:,}, dead {r.dead:,}"
            line += f", checked twice {r.checked_twice or 0:,}, written twice {r.written_twice:,}"
            if r.tail_seconds is not None:
                line += f"; the consumers finished {r.tail_seconds:.1f} s after the producers stopped"
            lines.append(line)
    if config.is_steady and any(r.lateness_p99_s is not None for r in results):
        lines.append(
            "  (p50/p99/max late above: the workers' own due time -> written back, on the database "
            "clock, an upper bound of commit -> check start)"
        )
    return lines + jobs_targets(results, config)


def jobs_targets(results: list[Result], config: BenchConfig) -> list[str]:
    """Issue 34's target for the mode, judged on this run's figures."""
    ours = next((r for r in results if r.strategy == "recheck"), None)
    if ours is None:
        return []
    if config.mode == "jobs":
        return drain_target(ours, results, config)
    if config.mode == "jobs-steady":
        p99, rate = ours.start_p99_s, ours.inserts_per_second or 0
        clean = not (ours.left_pending or ours.dead or ours.checked_twice or ours.written_twice)
        return [
            f"target: p99 commit -> check start {ms(p99)} with {rate:,.0f} jobs/s inserted "
            f"(<= {STEADY_START_P99_S * 1000:.0f} ms at 2,000/s): "
            + verdict(p99 is not None and p99 <= STEADY_START_P99_S),
            f"target: nothing left behind, no job handled twice: {verdict(clean)}",
        ]
    alone = next((r for r in results if r.strategy == ALONE), None)
    if alone is None or not alone.inserts_per_second:
        return []
    share = ours.checks_per_second / alone.inserts_per_second
    return [
        f"target: recheck handled {ours.checks_per_second:,.0f} jobs/s beside producers inserting "
        f"{ours.inserts_per_second or 0:,.0f}/s; alone they inserted {alone.inserts_per_second:,.0f}/s: "
        f"{share:.2f}x (>= {SATURATED_SHARE:g}x): {verdict(share >= SATURATED_SHARE)}"
    ]


def drain_target(ours: Result, results: list[Result], config: BenchConfig) -> list[str]:
    """recheck's drain rate over the best queue table's, as the table tells them."""
    rates = {r.strategy: r.drain_checks_per_second or 0.0 for r in results if r.strategy in STRATEGIES}
    if not rates or not ours.drain_checks_per_second:
        return []
    best = max(rates, key=rates.__getitem__)
    ratio = ours.drain_checks_per_second / rates[best] if rates[best] else float("inf")
    judged = "the target is for 24 consumers x batch 100"
    if config.workers == 24 and config.batch == 100 and not config.consumers:
        judged = f">= {JOBS_DRAIN_TIMES_BEST:g}x: {verdict(ratio >= JOBS_DRAIN_TIMES_BEST)}"
    return [
        f"target: recheck {ours.drain_checks_per_second:,.0f} jobs/s = {ratio:.1f}x the best queue table "
        f"({best}, {rates[best]:,.0f}/s, as the table tells them); {judged}"
    ]


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def ms(seconds: float | None) -> str:
    return "never (jobs not started)" if seconds is None else f"{seconds * 1000:,.1f} ms"


def plot(results: list[Result], config: BenchConfig, path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    steady = config.is_steady
    fig, axes = plt.subplots(2 if steady else 1, 1, figsize=(10, 7 if steady else 4), squeeze=False)
    for r in results:
        t = [p["t"] for p in r.series]
        axes[0][0].plot(t, [p["checks_per_second"] for p in r.series], label=r.strategy)
        if steady:
            axes[1][0].plot(t, [p["lateness_p99_s"] or 0 for p in r.series], label=f"{r.strategy} p99")
    axes[0][0].set_ylabel("checks / s")
    axes[0][0].set_title(f"{config.mode}: {config.rows:,} rows, {config.workers} workers")
    if steady:
        axes[1][0].set_ylabel("lateness p99 (s)")
        axes[1][0].set_yscale("log")
    for row in axes:
        row[0].axvline(config.warmup, color="grey", linestyle=":", linewidth=1)
        row[0].set_xlabel("seconds")
        row[0].legend(loc="best", fontsize=8)
        row[0].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
