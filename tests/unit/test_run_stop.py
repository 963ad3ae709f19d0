"""`recheck run` stopping its children: which exit codes count as a failed run."""

import shutil
import subprocess
import sys

from recheck.commands.run import Child, Runner, duration_over
from recheck.shared.config import Settings, Workload
from recheck.shared.core.records import StatusFacts


def python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_crash_waiting_for_its_restart_and_a_child_stopped_before_its_handler_are_not_failures():
    runner = Runner(Settings(_env_file=None), workers=3, duration=None)
    shutil.rmtree(runner.private_folder)
    crashed = python("import sys; sys.exit(99)")
    crashed.wait()  # died earlier; the supervisor would restart it after a pause
    ready = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit({})); print(flush=True); time.sleep(60)"  # noqa: E501
    graceful = subprocess.Popen([sys.executable, "-c", ready.format(0)], stdout=subprocess.PIPE)
    failing = subprocess.Popen([sys.executable, "-c", ready.format(1)], stdout=subprocess.PIPE)
    for process in (graceful, failing):
        assert process.stdout is not None and process.stdout.readline()  # its handler is in place
    runner.children = [
        Child("dispatcher", 0, process=python("import time; time.sleep(60)")),  # no handler: -SIGTERM
        Child("worker", 0, process=crashed),
        Child("worker", 1, process=graceful),
        Child("worker", 2, process=failing),
    ]
    assert dict(runner.stop_children()) == {"dispatcher 0": 0, "worker 1": 0, "worker 2": 1}


def test_the_run_summary_says_a_scheduled_workloads_rows_are_on_their_calendar():
    facts = StatusFacts(rows=1200, failing_rows=3, schedule="schedule '0 9 * * MON' in time zone UTC")
    line = Runner.rows_line(Workload(schedule="0 9 * * MON"), facts, 20.0, 0)
    assert (
        line == "rows 1,200, each on its calendar (schedule '0 9 * * MON' in time zone UTC); failing now: 3"
    )
    assert "not attempted in the last 20 s: 7" in Runner.rows_line(Workload(), facts, 20.0, 7)


def test_the_duration_counts_from_when_every_process_is_up():
    assert not duration_over(8.0, elapsed=12.0, up_at=None)  # a slow start does not eat the run
    assert not duration_over(8.0, elapsed=12.0, up_at=5.0)
    assert duration_over(8.0, elapsed=13.0, up_at=5.0)
    assert not duration_over(None, elapsed=1e6, up_at=0.0)  # no --duration: runs until stopped
