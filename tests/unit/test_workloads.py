"""Workloads without servers: the workloads file, keys of every kind, weighted turns."""

from __future__ import annotations

import threading
import time

import pytest

from recheck.shared.config import ConfigError, Settings
from recheck.shared.core.keys import BinaryKeys, IntKeys, TextKeys
from recheck.shared.redis.keys import Keys
from recheck.shared.workloads import read_workloads, select_workloads
from recheck.workers.checks import Recheck, outcome_of
from recheck.workers.turns import Turns

USERS_AND_URLS = """
[workloads.users]
table = "users"
interval = 10
check = "acme.checks:blocked"

[workloads.urls]
table = "monitored_urls"
id_column = "url_id"
interval = 30
interval_column = "every_s"
min_interval = 5
max_interval = 300
check = "acme.checks:probe"
concurrency = 200
weight = 2
mysql_url = "mysql://app@db2:3306/monitoring"
"""


def base(tmp_path, text: str | None, **values) -> Settings:
    path = tmp_path / "recheck.toml"
    if text is not None:
        path.write_text(text)
    return Settings(_env_file=None, config=str(path), **values)


def test_the_file_defines_workloads_on_top_of_the_recheck_defaults(tmp_path):
    users, urls = read_workloads(base(tmp_path, USERS_AND_URLS, worker_batch=700))
    assert (users.name, users.table, users.interval, users.check) == (
        "users",
        "users",
        10,
        "acme.checks:blocked",
    )
    assert users.worker_batch == urls.worker_batch == 700  # RECHECK_* stay the defaults
    assert (urls.id_column, urls.interval_column, urls.min_interval, urls.max_interval) == (
        "url_id",
        "every_s",
        5,
        300,
    )
    assert (urls.concurrency, urls.weight, urls.mysql.host, urls.mysql.database) == (
        200,
        2,
        "db2",
        "monitoring",
    )


def test_without_a_file_there_is_one_workload_named_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings(_env_file=None)
    assert [w.name for w in read_workloads(settings)] == ["default"]
    assert (
        Keys.of(settings.default_workload()).queue == "{recheck}:queue"
    )  # the keys a deployment had before workloads


def test_each_workload_has_its_own_hash_tag():
    assert Keys("recheck", "users").queue == "{recheck:users}:queue"
    assert Keys("recheck", "users").processing("w1") == "{recheck:users}:processing:w1"


BAD_FILES = [
    ('[workloads.users]\ntable = "users"\nintervall = 5\n',
     "workload 'users': intervall: not a workload setting (did you mean interval?)"),
    ('[workloads.users]\ntable = "users"\ninterval = -1\n',
     "workload 'users': interval: Input should be greater than 0 (got -1)"),
    ("[workloads.users]\nheartbeat_ttl = 3\n",
     "heartbeat_ttl: not a workload setting (per-deployment settings are RECHECK_* variables)"),
    ('[workloads.users]\ntable = "users; DROP"\n', "workload 'users': table: must be a plain SQL identifier"),
    ('[workloads."a b"]\ntable = "t"\n', "workload 'a b': name: must be 1-40 characters"),
    ('[workload.users]\ntable = "users"\n',
     "[workload] is not known; workloads go in [workloads.NAME] tables"),
    ("[workloads.users\n", "not valid TOML"),
    ('[workloads.reports]\ntable = "reports"\nschedule = "61 * * * *"\n',
     "workload 'reports': schedule: schedule '61 * * * *': Bad minute"),
    ('[workloads.reports]\ntable = "reports"\nschedule = "@daily"\ntime_zone = "Europe/Pariss"\n',
     "time zone 'Europe/Pariss': not an IANA time zone name"),
    ('[workloads.reports]\ntable = "reports"\nschedule_column = "cron"\nonce = true\n',
     "one-shot rows run once; a schedule is for recurring rows"),
    ('[workloads.reports]\ntable = "reports"\ntime_zone_column = "tz"\n',
     "a time zone per row needs a schedule or schedule_column"),
    ("", "defines no workload"),
    ('[workloads.a]\ntable = "t"\n[workloads.b]\ntable = "t"\n',
     "workload 'b': keeps the same table as workload 'a'"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_a_bad_file_names_the_workload_the_key_and_what_is_wrong(tmp_path, text, message):
    with pytest.raises(ConfigError) as raised:
        read_workloads(base(tmp_path, text))
    assert message in str(raised.value)


def test_a_missing_file_named_by_recheck_config_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="is not a file"):
        read_workloads(base(tmp_path, None))


def test_workers_can_serve_some_workloads(tmp_path):
    workloads = read_workloads(base(tmp_path, USERS_AND_URLS))
    assert [w.name for w in select_workloads(workloads, "urls")] == ["urls"]
    with pytest.raises(ConfigError, match="unknown workload"):
        select_workloads(workloads, "urls,nope")


# -- keys of every kind -------------------------------------------------------------------------
TEXT_KEYS = ["plain", "with space", "a:colon", 'it\'s "quoted"', "emoji 🎉", " ", "", "x" * 255]


def round_trip(kind, keys) -> list:
    entries = [kind.encode(key) + b":%d" % (1000 + n) for n, key in enumerate(keys)]
    items, malformed = kind.parse(entries)
    assert not malformed
    assert [item.due_ms for item in items] == [1000 + n for n in range(len(keys))]
    assert all(b" " not in e and e.count(b":") == 1 for e in entries)  # nothing to split on by mistake
    return [item.id for item in items]


def test_text_keys_round_trip_exactly_and_cannot_inject_a_separator():
    assert round_trip(TextKeys(), TEXT_KEYS) == TEXT_KEYS


def test_binary_and_integer_keys_round_trip_across_their_whole_range():
    binary = [bytes(16), bytes(range(16)), b"\xff" * 16, b":", b" "]
    assert round_trip(BinaryKeys(16), binary) == binary
    assert round_trip(IntKeys(unsigned=True), [0, 2**64 - 1]) == [0, 2**64 - 1]
    assert round_trip(IntKeys(unsigned=False), [-(2**63), 2**63 - 1]) == [-(2**63), 2**63 - 1]


@pytest.mark.parametrize(
    ("kind", "entry"),
    [
        (TextKeys(), b"zz:1000"),  # not hex
        (TextKeys(), b"6a62:1000"),  # lower case: not the one spelling HEX() writes
        (TextKeys(), b"abc:1000"),  # odd length
        (TextKeys(), b"FF:1000"),  # not UTF-8
        (TextKeys(length=2), b"616263:1000"),  # longer than the column (and lower case)
        (TextKeys(length=2), b"616263".upper() + b":1000"),
        (BinaryKeys(16), b"00" * 17 + b":1000"),
        (IntKeys(unsigned=True), b"-1:1000"),  # outside an unsigned column
        (IntKeys(unsigned=False), b"%d:1000" % 2**63),
    ],
)
def test_malformed_keys_are_set_aside(kind, entry):
    assert kind.parse([entry]) == ([], [entry])


def test_keys_typed_by_a_user_become_the_columns_values():
    assert IntKeys().from_text("42") == 42
    assert TextKeys().from_text("a b") == "a b"
    assert BinaryKeys(16).from_text("00112233-4455-6677-8899-aabbccddeeff") == bytes.fromhex(
        "00112233445566778899aabbccddeeff"
    )
    with pytest.raises(ValueError, match="not an integer"):
        IntKeys().from_text("x")


def test_a_check_may_say_when_its_row_is_due_again():
    assert outcome_of(Recheck("down", after=5)).after == 5.0
    assert outcome_of(Recheck("down", after=5)).text == "down"
    failed = outcome_of(Recheck("x", after="soon"))
    assert not failed.ok and "not a number of seconds" in failed.text
    assert not outcome_of(Recheck(object(), after=1)).ok  # the value must be storable too


# -- weighted turns -----------------------------------------------------------------------------
def contend(weights: dict[str, float], seconds: float, busy: float = 0.002) -> dict[str, int]:
    """Lanes that always have work (a batch of 10 rows each turn) share one worker for a while."""
    turns, done, stop = Turns(), dict.fromkeys(weights, 0), threading.Event()

    def lane(name: str) -> None:
        while not stop.is_set():
            with turns.turn(name, weights[name]) as turn:
                time.sleep(busy)
                turn.rows = 10
                done[name] += 10

    threads = [threading.Thread(target=lane, args=(name,)) for name in weights]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return done


def test_busy_lanes_share_the_worker_by_weight():
    done = contend({"users": 3, "urls": 1}, 1.0)
    assert 2.6 <= done["users"] / done["urls"] <= 3.4, done


def test_a_lane_that_was_idle_gets_no_credit_for_it():
    turns = Turns()
    for _ in range(100):  # "users" alone for a while
        with turns.turn("users", 1) as turn:
            turn.rows = 10
    with turns.turn("urls", 1) as turn:  # "urls" arrives: it starts at the current pass
        turn.rows = 10
    passes = turns.passes()
    assert passes["urls"] >= passes["users"] - 10, passes
