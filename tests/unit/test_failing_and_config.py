"""Pure rules: when checks count as failing, unknown variables, every command's help."""

from __future__ import annotations

import logging

import pytest

from recheck.cli import build_parser
from recheck.shared.config import unknown_variables
from recheck.shared.core.failures import MIN_CHECKS, FailureWatch, Recent, failing
from tests.support.clock import ManualClock


def test_failing_needs_enough_checks_and_a_share_at_the_threshold():
    assert not failing(Recent(0, MIN_CHECKS - 1), 0.1)  # too few to say
    assert failing(Recent(90, 10), 0.1)
    assert not failing(Recent(91, 9), 0.1)


def test_the_watch_judges_the_last_minute_and_logs_once_each_way(caplog):
    clock = ManualClock()
    watch = FailureWatch(0.1, window=60, clock=clock)
    checked = failed = 0
    with caplog.at_level(logging.WARNING):
        for _ in range(120):  # two minutes of healthy checks
            clock.now += 1
            checked += 100
            watch.observe(checked, failed, None)
        assert watch.observe(checked, failed, None) == Recent(6000, 0) and not caplog.text
        for _ in range(30):  # then everything fails for half a minute
            clock.now += 1
            failed += 100
            recent = watch.observe(checked, failed, "RuntimeError: upstream is down")
        assert recent.failed == 3000 and recent.checked == 3000
        assert caplog.text.count("checks failing") == 1 and "upstream is down" in caplog.text
        for _ in range(120):  # and recovers
            clock.now += 1
            checked += 100
            watch.observe(checked, failed, None)
    assert caplog.text.count("checks succeeding again") == 1 and not watch.alarmed


def test_a_typo_in_a_variable_is_named_with_the_closest_setting():
    warnings = unknown_variables(["RECHECK_INTERVALL", "RECHECK_INTERVAL", "PATH", "RECHECK_MYSQL_PASSWORD"])
    assert warnings == ["unknown variable RECHECK_INTERVALL is ignored; did you mean RECHECK_INTERVAL?"]
    assert "see `recheck --help`" in unknown_variables(["RECHECK_ZZZ"])[0]


@pytest.mark.parametrize(
    "command", ["init-db", "seed", "spread", "dispatcher", "worker", "run", "status", "health", "release"]
)
def test_every_command_says_what_it_does_and_which_variables_matter(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = capsys.readouterr().out
    flat = " ".join(text.split())
    assert "Uses RECHECK_" in flat or "Uses what" in flat, text
    for line in text.splitlines():
        if line.strip().startswith(("ID", "--rows")):
            assert len(line.split()) > 1, f"{command}: {line!r} has no help text"


def test_words_that_misled_a_user_of_a_one_shot_workload():
    """Issue 45, item 11: compose's own RECHECK_IMAGE (and RECHECK_SOURCE), passed to every
    container through env_file, were warned about as misspelt settings; `recheck config` showed a
    one-shot workload's retry as `interval`, a setting it never reads."""
    from recheck.commands.config import value_of
    from recheck.shared.config import Settings

    assert unknown_variables(["RECHECK_IMAGE", "RECHECK_SOURCE"]) == []
    jobs = Settings(_env_file=None, once=True).default_workload()
    assert value_of(jobs, "retry") == "backoff (one-shot: always)"
    assert value_of(Settings(_env_file=None).default_workload(), "retry") == "interval"
