"""Passwords, ACL users, least privilege and TLS, against real servers configured for each.

The Redis ACL rule and the MySQL GRANTs are read from the docs' security page (docs/security.md)
and applied verbatim, so the documentation is what is tested.
"""

from __future__ import annotations

import pymysql
import pytest
import redis

from recheck.commands.init_db import init_db
from recheck.shared.config import Settings, Workload
from tests.support.helpers import docs_text, recheck, scalar, seed_rows
from tests.support.processes import TEST_TIMINGS
from tests.support.servers import MariaDBServer, RedisCluster, RedisServer, free_port, wait_for
from tests.support.tls import make_certificates

SECURITY_PAGE = docs_text("security.md")
MYSQL_PASSWORD = "my-Secret-pass-7731"
REDIS_PASSWORD = "rd-Secret-pass-4402"
ADMIN_PASSWORD = "admin-Secret-9190"
NEVER_CHECKED = "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0"


def documented_grants() -> list[str]:
    block = SECURITY_PAGE.split("CREATE USER 'recheck'", 1)[1].split("```", 1)[0]
    statements = ("CREATE USER 'recheck'" + block).strip().split(";")
    return [s.strip().replace("PASSWORD", MYSQL_PASSWORD) for s in statements if s.strip()]


def documented_acl() -> str:
    line = next(line for line in SECURITY_PAGE.splitlines() if line.strip().startswith("ACL SETUSER recheck"))
    return line.strip().replace("PASSWORD", REDIS_PASSWORD)


def settings_for(mysql_url: str, redis_url: str) -> Workload:
    # One write slot for the two workers of run_briefly, and limits that never bind: the slot
    # script and the limits' (the Redis clock: TIME) run under the ACL too. Rows due again after
    # 30 s, not 2: `recheck status` after run_briefly's stop finds them fresh however long the
    # stop and its own start take on a busy machine (it found them 1.7 s overdue once).
    timings = {**TEST_TIMINGS, "interval": 30.0}
    env = Settings(_env_file=None, mysql_url=mysql_url, redis_url=redis_url, write_slots=1,
                   rate_limit=1_000_000, max_in_flight=100_000, **timings)  # fmt: skip
    return env.default_workload()


def run_briefly(settings: Workload, conn, procs) -> None:
    """Dispatcher and two workers check every row once, then stop gracefully."""
    procs.start("dispatcher", settings)
    procs.start("worker", settings)
    procs.start("worker", settings)
    wait_for(lambda: scalar(conn, NEVER_CHECKED) == 0, 30, "every row checked")
    codes = procs.stop_all()
    assert set(codes.values()) == {0}, procs.logs()


@pytest.fixture
def restricted(tmp_path):
    """MariaDB with the documented least-privilege user; Redis with requirepass and the documented ACL
    user."""
    mysql = MariaDBServer(tmp_path / "mysql")
    mysql.start()
    cache = RedisServer(tmp_path / "redis", extra=("--requirepass", ADMIN_PASSWORD))
    cache.password = ADMIN_PASSWORD
    cache.start()
    admin = settings_for(mysql.url("recheck"), cache.url())
    assert init_db(admin, apply=False, say=lambda _: None) == 0  # as an administrator
    with mysql.connect() as conn, conn.cursor() as cursor:
        for statement in documented_grants():
            cursor.execute(statement)
    cache.client().execute_command(*documented_acl().split())
    yield mysql, cache, admin
    cache.kill()
    mysql.kill()


@pytest.mark.serial  # timing: serial layer (make test)
def test_the_pipeline_runs_as_least_privilege_users_and_never_shows_a_password(restricted, procs):
    mysql, cache, admin = restricted
    seed_rows(admin, 2000, due_now=True)
    settings = settings_for(
        mysql.url("recheck", user="recheck", password=MYSQL_PASSWORD),
        f"redis://recheck:{REDIS_PASSWORD}@127.0.0.1:{cache.port}/0",
    )
    conn = mysql.connect("recheck")
    run_briefly(settings, conn, procs)

    status = recheck("status", settings=settings)
    assert status.returncode == 0, status.stderr
    assert "recheck status" in status.stdout
    json_status = recheck("status", "--json", settings=settings).stdout
    for output in (status.stdout, status.stderr, json_status, procs.logs()):
        assert MYSQL_PASSWORD not in output and REDIS_PASSWORD not in output
    assert "recheck:***@127.0.0.1" in json_status

    # The grants really are that narrow.
    narrow = pymysql.connect(host="127.0.0.1", port=mysql.port, user="recheck", password=MYSQL_PASSWORD,
                             database="recheck", autocommit=True)  # fmt: skip
    with narrow.cursor() as cursor, pytest.raises(pymysql.err.OperationalError, match="1142"):
        cursor.execute("DELETE FROM user_block_status")
    limited = redis.Redis(host="127.0.0.1", port=cache.port, username="recheck", password=REDIS_PASSWORD)
    with pytest.raises(redis.exceptions.NoPermissionError):
        limited.get("someone-elses-key")
    with pytest.raises(redis.exceptions.NoPermissionError):
        limited.flushall()


def test_server_errors_name_the_server_but_never_the_password(restricted, procs, tmp_path):
    mysql, cache, admin = restricted
    seed_rows(admin, 500, due_now=True)
    settings = settings_for(
        mysql.url("recheck", user="recheck", password=MYSQL_PASSWORD),
        f"redis://recheck:{REDIS_PASSWORD}@127.0.0.1:{cache.port}/0",
    )
    worker = procs.start("worker", settings)
    wait_for(lambda: "started" in procs.log_of(worker), 15, "the worker to start")
    cache.kill()  # an outage: the worker logs it
    wait_for(lambda: "redis unreachable" in procs.log_of(worker), 15, "the outage to be logged")
    wrong = settings_for(
        mysql.url("recheck", user="recheck", password="Wrong-" + MYSQL_PASSWORD), admin.deployment.redis_url
    )
    refused = recheck("status", settings=wrong)
    assert refused.returncode == 1 and "Access denied" in refused.stderr
    for output in (procs.log_of(worker), refused.stdout, refused.stderr):
        assert MYSQL_PASSWORD not in output and REDIS_PASSWORD not in output and ADMIN_PASSWORD not in output


@pytest.fixture
def tls_only(tmp_path):
    """MariaDB that refuses connections without TLS, and Redis listening on TLS only."""
    certs = make_certificates(tmp_path / "certs")
    mysql = MariaDBServer(
        tmp_path / "mysql",
        extra=(f"--ssl-ca={certs.ca}", f"--ssl-cert={certs.cert}", f"--ssl-key={certs.key}",
               "--require-secure-transport=ON"),
    )  # fmt: skip
    mysql.ssl = {"ca": str(certs.ca)}
    mysql.start()
    port = free_port()  # for TLS; the plain port is switched off below
    cache = RedisServer(
        tmp_path / "redis",
        port=port,
        extra=("--port", "0", "--tls-port", str(port), "--tls-cert-file", str(certs.cert), "--tls-key-file",
               str(certs.key), "--tls-ca-cert-file", str(certs.ca), "--tls-auth-clients", "no"),
    )  # fmt: skip
    cache.client = lambda **kw: redis.Redis(
        host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(certs.ca), **kw
    )
    cache.start()
    yield mysql, cache, certs
    cache.kill()
    mysql.kill()


def test_the_pipeline_runs_over_tls_to_both_servers(tls_only, procs):
    mysql, cache, certs = tls_only
    settings = settings_for(
        f"{mysql.url('recheck')}?ssl_ca={certs.ca}&ssl_verify_cert=true&ssl_verify_identity=true",
        f"rediss://127.0.0.1:{cache.port}/0?ssl_ca_certs={certs.ca}",
    )
    assert init_db(settings, apply=False, say=lambda _: None) == 0  # init-db over TLS too
    seed_rows(settings, 2000, due_now=True)
    conn = mysql.connect("recheck")
    run_briefly(settings, conn, procs)
    # Neither server lets anyone in without TLS, so the run above was encrypted end to end.
    # (MariaDB words the refusal as "Access denied"; the same user got in over TLS above.)
    with pytest.raises(pymysql.err.OperationalError, match=r"insecure transport|Access denied"):
        pymysql.connect(host="127.0.0.1", port=mysql.port, user="root", database="recheck", ssl_disabled=True)
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis(host="127.0.0.1", port=cache.port, socket_timeout=2).ping()


def test_the_documented_acl_user_runs_a_partitioned_workload_on_a_redis_cluster(
    make_settings, mariadb, procs, tmp_path
):
    """The documented ACL rule, set on every node of a 3-master cluster (ACLs are per node), is
    enough to detect the cluster, follow its redirections and run every script, for keys of
    every shape it must cover (a named workload's partitions here: `{recheck:users/pN}`)."""
    cluster = RedisCluster(tmp_path / "cluster", masters=3, replicas=0)
    cluster.start()
    try:
        for node in cluster.nodes:
            node.client().execute_command(*documented_acl().split())
        first = cluster.nodes[0]
        settings = make_settings(
            redis_url=f"redis://recheck:{REDIS_PASSWORD}@127.0.0.1:{first.port}/0",
            key_prefix="recheck",
            workload="users",
            partitions=4,
            write_slots=1,  # two workers, one slot: the slot script runs under the ACL too
            rate_limit=1_000_000,  # and the limits' (TIME): never binding
        )
        procs.start("dispatcher", settings)
        workers = [procs.start("worker", settings) for _ in range(2)]
        # Both workers serving before the rows come due, or a fast first worker checks them all
        # alone (no slot is ever asked for) while the second is still starting.
        wait_for(lambda: all(" started: " in procs.log_of(w) for w in workers), 30, "both workers started")
        seed_rows(settings, 1000, due_now=True)
        conn = mariadb.connect(settings.mysql.database)
        wait_for(lambda: scalar(conn, NEVER_CHECKED) == 0, 30, "every row checked through the cluster")
        codes = procs.stop_all()
        logs = procs.logs()
        assert set(codes.values()) == {0}, logs
        assert "NOPERM" not in logs and "Traceback" not in logs, logs
        spread = {n.port for n in cluster.nodes if n.client().dbsize()}
        assert len(spread) == 3, "the partitions' keys are on every master"
    finally:
        cluster.kill()
