"""Configuration: a bad value names its variable; URLs never show a password."""

from __future__ import annotations

import pytest

from recheck.shared.config import Settings, describe_error, redact_url


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("table", "users; DROP TABLE x", "plain SQL identifier"),
        ("id_column", "1abc", "plain SQL identifier"),
        ("interval", "0", "greater than 0"),
        ("check", "no_colon", "package.module:function"),
        ("mysql_url", "postgres://x/y", "mysql://"),
        ("mysql_url", "mysql://root@h/bad-name", "plain identifier"),
        ("redis_url", "http://x", "redis://"),
        ("key_prefix", "has space", "letters, digits"),
    ],
)
def test_bad_values_name_their_variable(field, value, message):
    with pytest.raises(Exception) as caught:
        Settings(_env_file=None, **{field: value}).default_workload()
    lines = describe_error(caught.value)
    assert len(lines) == 1
    assert lines[0].startswith(f"RECHECK_{field.upper()}: ")
    assert message in lines[0]


def test_redact_url_hides_passwords_only():
    assert redact_url("mysql://app:s3cret@db:3306/x") == "mysql://app:***@db:3306/x"
    assert redact_url("rediss://:pw@cache:6380/0") == "rediss://:***@cache:6380/0"
    assert redact_url("redis://cache:6379/0") == "redis://cache:6379/0"
