"""`recheck health` against a real Redis: what it says for each state of the health file."""

from __future__ import annotations

import os
import subprocess
import sys

from recheck.shared.process.health import HealthFile, HealthRecord, check_health
from tests.support.helpers import REPO


def test_fresh_heartbeat_of_a_live_pid_is_healthy_until_the_key_expires(tmp_path, rds):
    path = tmp_path / "recheck.health"
    HealthFile(str(path)).write(HealthRecord("worker", "w-1", os.getpid(), ("test:health:w-1",)))
    rds.set("test:health:w-1", "{}", px=2000)
    healthy, why = check_health(path, rds)
    assert healthy and why.startswith(f"worker w-1 (pid {os.getpid()}) is alive"), why
    rds.delete("test:health:w-1")
    healthy, why = check_health(path, rds)
    assert not healthy and "has not heartbeaten in time" in why


def test_missing_malformed_or_dead_is_unhealthy(tmp_path, rds):
    path = tmp_path / "recheck.health"
    assert check_health(path, rds) == (False, f"no recheck process is running here ({path} is missing: "
                                              "not started yet, or stopping)")  # fmt: skip
    path.write_text("{not json")
    healthy, why = check_health(path, rds)
    assert not healthy and why.startswith(f"cannot read {path}")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    HealthFile(str(path)).write(HealthRecord("dispatcher", "d-1", gone.pid, ("test:health:d-1",)))
    rds.set("test:health:d-1", "{}", px=5000)  # a key left behind by a killed process
    assert check_health(path, rds) == (False, f"dispatcher d-1 (pid {gone.pid}) is gone")
    HealthFile(str(path)).remove()
    assert not path.exists()


def test_health_without_a_health_file_setting_is_a_usage_error():
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RECHECK_")}
    command = [sys.executable, "-m", "recheck", "health"]
    result = subprocess.run(command, env=environment, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2
    assert "RECHECK_HEALTH_FILE is not set" in result.stderr
