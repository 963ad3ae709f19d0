"""The dashboard page in a real browser, and the metrics every process exports.

Headless Chromium from Debian's package (/usr/bin/chromium) driven by Playwright; `.ci/run`
installs it. Screenshots go to artifacts/ (kept by CI, ignored by git).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import time
import types
import urllib.request
from pathlib import Path

import pytest
import yaml

from recheck.commands.init_db import init_db
from recheck.shared.workloads import read_workloads
from tests.integration.test_priorities import mark_premium, with_priority
from tests.support.helpers import REPO, docs_text, query, run_sql, scalar, seed_rows
from tests.support.servers import free_port, wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = REPO / "artifacts"
# What the machine notes say Chromium needs here: no sandbox as root, no network of its own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium package (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def open_dashboard(browser, port: int, script: str = ""):
    """(a page showing the dashboard on `port`, its base URL), once the dashboard listens;
    `script` runs in the page before the dashboard's own."""
    url = f"http://127.0.0.1:{port}/"
    wait_for(lambda: get(url + "healthz") == "ok\n", 20, "the dashboard to listen")
    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    if script:
        page.add_init_script(script)
    page.goto(url)
    return page, url


def test_the_dashboard_shows_freshness_first_and_updates_live(make_settings, procs, browser):
    dashboard, dispatcher_metrics, worker_metrics = free_port(), free_port(), free_port()
    settings = make_settings(interval=2.0, dashboard_port=dashboard, metrics_port=dispatcher_metrics)
    seed_rows(settings, 3000)
    procs.start("dispatcher", settings)
    workers = [
        procs.start("worker", settings, env={"RECHECK_METRICS_PORT": str(worker_metrics)}),
        procs.start("worker", settings, env={"RECHECK_METRICS_PORT": "0"}),
    ]
    page, url = open_dashboard(browser, dashboard)

    headline = page.locator("#headline-text")
    headline.filter(has_text=re.compile(r"All 3,000 rows fresh")).wait_for(timeout=20_000)
    assert "fresh" in page.locator("#headline").get_attribute("class")
    wait_for(lambda: page.locator("#workers tr").count() == 2, 10, "two workers listed")
    wait_for(lambda: page.locator("#chart-throughput path").count() == 1, 10, "the throughput chart")

    def figures() -> tuple[str, str]:
        return page.locator("#updated").inner_text(), page.locator("#checks-rate").inner_text()

    first = figures()
    # A new sample every second while the workload is busy, polled every second by the page; a
    # CI runner with three other test processes once took over 5 s between two (2026-11-29).
    wait_for(lambda: figures()[0] != first[0], 15, "the page to update without reloading")
    wait_for(lambda: int(figures()[1].replace(",", "") or 0) > 0, 10, "a non-zero rate")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-fresh.png"), full_page=True)

    # One unit per axis (not "500.00 s" above "0 ms"), and the values under the pointer on hover.
    ticks = page.locator("#chart-lateness text").all_text_contents()[:3]
    assert len({tick.split()[-1] for tick in ticks}) == 1, ticks
    page.locator("#chart-lateness").hover()
    tip = page.locator(".chart .tip", has_text="p99").first
    tip.wait_for(timeout=5_000)
    assert "s ago:" in tip.inner_text() and "oldest" in tip.inner_text()

    # The search box: one row's story, as `recheck inspect` tells it.
    page.locator("#search-id").fill("5")
    page.locator("#search button").click()
    page.locator("#row-title", has_text=" id 5 · ").wait_for(timeout=5_000)
    where = page.locator("#row-facts dd[data-field=where]").inner_text()
    assert any(word in where for word in ("waiting", "queued", "in flight", "due")), where
    assert int(page.locator("#row-facts dd[data-field=check_count]").inner_text()) >= 1
    # No RECHECK_DASHBOARD_TOKEN here: read-only. No token field, no action buttons in the row
    # view, and the server refuses an action whatever header it carries.
    assert page.locator("#token").is_hidden() and page.locator("#row-actions button").count() == 0
    guess = {"Content-Type": "application/json", "X-Recheck-Token": "guess"}
    pause = b'{"action": "pause", "ids": ["5"]}'
    action = urllib.request.Request(url + "api/action", method="POST", data=pause, headers=guess)
    with pytest.raises(urllib.error.HTTPError, match="405"):
        urllib.request.urlopen(action, timeout=10)
    page.locator("#search-id").fill("999999")
    page.locator("#search button").click()
    page.locator("#row-title", has_text="no row with id '999999'").wait_for(timeout=5_000)

    # The processes' /metrics carry the documented families.
    worker_text = get(f"http://127.0.0.1:{worker_metrics}/metrics")
    dispatcher_text = get(f"http://127.0.0.1:{dispatcher_metrics}/metrics")
    for name in (
        "recheck_checks_total",
        "recheck_lateness_seconds_bucket",
        "recheck_check_duration_seconds_count",
    ):
        assert name in worker_text, name
    leader = 'recheck_dispatcher_leader{workload="default"} 1.0'  # every series carries its workload
    for name in ("recheck_dispatched_total", "recheck_rows_overdue", "recheck_oldest_lateness_seconds",
                 leader, "recheck_queue_depth", "recheck_live_workers"):  # fmt: skip
        assert name in dispatcher_text, name
    # Every metric the Grafana dashboard and the alert rules use is served by a running process.
    served = served_names(worker_text) | served_names(dispatcher_text)
    assert used_names() <= served, used_names() - served

    # The same page when something is wrong: no workers, rows fall overdue.
    for worker in workers:
        worker.send_signal(signal.SIGKILL)
    headline.filter(has_text=re.compile(r"rows overdue")).wait_for(timeout=20_000)
    assert "overdue" in page.locator("#headline").get_attribute("class")
    page.locator("#headline-detail", has_text="no live workers").wait_for(timeout=15_000)
    page.screenshot(path=str(ARTIFACTS / "dashboard-overdue.png"), full_page=True)

    # A worker whose every check fails: the rows are retried, so none stays overdue, but they
    # are not fresh either.
    procs.start("worker", settings, env={"RECHECK_CHECK": "tests.support.checks:always_raises"})
    headline.filter(has_text="Checks failing").wait_for(timeout=30_000)
    assert "overdue" in page.locator("#headline").get_attribute("class")
    page.locator("#headline-detail", has_text="upstream is down").wait_for(timeout=5_000)
    page.locator("#errors tr", has_text="RuntimeError: upstream is down").wait_for(timeout=10_000)
    page.screenshot(path=str(ARTIFACTS / "dashboard-failing.png"), full_page=True)

    # Read-only.
    request = urllib.request.Request(url + "api/status", method="POST", data=b"{}")
    with pytest.raises(urllib.error.HTTPError, match="405"):
        urllib.request.urlopen(request, timeout=5)


def served_names(text: str) -> set[str]:
    """Metric names in a /metrics page (samples, and each histogram's series)."""
    names = {
        line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")
    }
    for line in text.splitlines():
        if line.startswith("# TYPE ") and line.endswith(" histogram"):
            names |= {line.split()[2] + suffix for suffix in ("_bucket", "_count", "_sum")}
    return names


def used_names() -> set[str]:
    """Every recheck_* name the Grafana dashboard and the alert rules query."""
    used = set()
    dashboard = json.loads((REPO / "deploy" / "grafana" / "dashboards" / "recheck.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            used |= set(re.findall(r"\brecheck_[a-z_]+", target["expr"]))
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            used |= set(re.findall(r"\brecheck_[a-z_]+", rule["expr"]))
    return used


def exported_names() -> set[str]:
    """Every metric family recheck defines (from a fresh registry, without running anything)."""
    from prometheus_client import CollectorRegistry

    from recheck.shared.process.metrics import DispatcherMetrics, WorkerMetrics

    registry = CollectorRegistry()
    WorkerMetrics(registry)
    DispatcherMetrics(registry)
    names = set()
    for family in registry.collect():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}.get(family.type, [""])
        names |= {family.name + suffix for suffix in suffixes}
    return names


def test_grafana_and_alert_rules_use_only_metrics_that_exist():
    names = exported_names()
    used = used_names()
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    alert_names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert used and used <= names, used - names
    assert {"RecheckRowsOverdue", "RecheckNoDispatch", "RecheckChecksFailing"} <= alert_names
    reference = docs_text("metrics.md")
    for name in names:
        base = re.sub(r"_(bucket|count|sum)$", "", name)
        assert f"`{base}" in reference, f"{base} is not documented in docs/metrics.md"


def test_the_dashboard_has_a_tab_per_workload(make_settings, procs, browser, tmp_path):
    dashboard = free_port()
    config = tmp_path / "recheck.toml"
    config.write_text(
        '[workloads.users]\ntable = "user_block_status"\n\n[workloads.urls]\ntable = "urls"\ninterval = 3\n'
    )
    settings = make_settings(interval=2.0, dashboard_port=dashboard, config=str(config))
    for workload in read_workloads(settings):
        assert init_db(workload, apply=False, say=lambda _: None, create=True) == 0
        seed_rows(workload, 500)
    procs.start("dispatcher", settings)
    procs.start("worker", settings)
    page, url = open_dashboard(browser, dashboard)
    tabs = page.locator("#workloads button")
    wait_for(lambda: tabs.count() == 2, 10, "a tab per workload")
    for name in ("users", "urls"):
        page.locator(f"#workloads button[data-workload={name}]", has_text="rows fresh").wait_for(
            timeout=20_000
        )
    page.locator("#workloads button[data-workload=urls]").click()
    page.locator("#where", has_text="urls · ").wait_for(timeout=5_000)
    assert "every 3 s" in page.locator("#where").inner_text()
    assert page.locator("#workloads button[data-workload=urls]").get_attribute("aria-selected") == "true"
    page.screenshot(path=str(ARTIFACTS / "dashboard-workloads.png"), full_page=True)
    assert json.loads(get(url + "api/status?workload=urls"))["title"].endswith(".urls")
    with pytest.raises(urllib.error.HTTPError, match="404"):
        get(url + "api/status?workload=nope")


def test_a_workload_with_priorities_shows_the_priority_rows_waiting(make_settings, procs, browser):
    """Under a rate limit far below what the table needs, priority rows wait in their own list:
    the queue's card says how many (docs/priorities.md)."""
    dashboard = free_port()
    settings, every = with_priority(make_settings, premium_every=2, dashboard_port=dashboard, rate_limit=5)
    seed_rows(settings, 2000, due_now=True)
    mark_premium(settings, every)
    procs.start("dispatcher", settings)
    procs.start("worker", settings)
    page, url = open_dashboard(browser, dashboard)
    card = page.locator("#queue-depth")
    card.filter(has_text=re.compile(r"\(\d[\d,]* priority\)")).wait_for(timeout=20_000)
    assert json.loads(get(url + "api/status"))["facts"]["priority_column"] == "premium"

    def waiting() -> int:
        return json.loads(get(url + "api/status"))["facts"]["priority_depth"]

    wait_for(lambda: waiting() > 0, 20, "priority rows waiting")
    card.filter(has_text=re.compile(r"\([1-9][\d,]* priority\)")).wait_for(timeout=10_000)


def test_a_grouped_workload_says_which_group_holds_its_rows_back(make_settings, procs, browser):
    """One group's rows over its group_rate_limit wait in Redis: the headline says "limited by
    group big" and the queue card how many groups are held back (docs/groups.md)."""
    from tests.integration.test_groups import grouped

    dashboard = free_port()
    settings = grouped(make_settings, {"group_rate_limit": 2.0}, dashboard_port=dashboard, interval=3600)
    seed_rows(settings, 500, due_now=True)
    run_sql(settings, f"UPDATE {settings.table} SET tenant = 'big'")
    procs.start("dispatcher", settings)
    procs.start("worker", settings)
    page, url = open_dashboard(browser, dashboard)
    page.locator("#queue-depth").filter(has_text=re.compile(r"\(1 groups, 1 held back\)")).wait_for(
        timeout=20_000
    )
    wait_for(
        lambda: json.loads(get(url + "api/status"))["facts"]["limited_by"] == "group big",
        20,
        "limited by big",
    )
    page.locator("#headline-detail").filter(has_text="limited by group big").wait_for(timeout=20_000)
    assert "big (" in page.locator("#headline-detail").inner_text()


def post_action(url: str, body: dict | bytes, **headers: str) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url + "api/action", method="POST", data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def test_actions_need_the_token_and_the_page_offers_them(make_settings, procs, browser, sql):
    dashboard = free_port()
    token = "s3cret-dashboard-token"
    settings = make_settings(interval=3600, dashboard_port=dashboard, dashboard_token=token)
    seed_rows(settings, 50)
    dispatcher = procs.start("dispatcher", settings)
    procs.start("worker", settings)
    url = f"http://127.0.0.1:{dashboard}/"
    wait_for(lambda: get(url + "healthz") == "ok\n", 20, "the dashboard to listen")
    json_type = {"Content-Type": "application/json"}
    pause_5 = {"action": "pause", "ids": ["5"]}

    # Refused: no token, a wrong one, a form post, another site's page; GET changes nothing.
    assert post_action(url, pause_5, **json_type)[0] == 403
    assert post_action(url, pause_5, **json_type, **{"X-Recheck-Token": "wrong"})[0] == 403
    form = post_action(url, b"action=pause&ids=5", **{"X-Recheck-Token": token,
                       "Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert form[0] == 415
    other_site = {**json_type, "X-Recheck-Token": token, "Origin": "https://evil.example"}
    assert post_action(url, pause_5, **other_site)[0] == 403
    with pytest.raises(urllib.error.HTTPError, match="404"):
        get(url + "api/action?action=pause&ids=5")
    state = "SELECT next_check_at > '9999-01-01' FROM user_block_status WHERE user_id = %s"
    assert scalar(sql, state, (5,)) == 0  # still not paused
    bad = post_action(url, {"action": "drop", "ids": ["5"]}, **json_type, **{"X-Recheck-Token": token})
    assert bad[0] == 400 and "now, pause, resume, release" in bad[1]["error"]

    # The page: the token typed once, then buttons in the row view and the quarantine list.
    query(sql, "UPDATE user_block_status SET next_check_at = '9999-12-31', "
               "last_error = 'quarantined: test' WHERE user_id = 9")  # fmt: skip
    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    page.goto(url)
    page.locator("#token").wait_for(state="visible", timeout=10_000)
    page.locator("#search-id").fill("5")
    page.locator("#search button").click()
    page.locator("#row-title", has_text=" id 5 · waiting").wait_for(timeout=5_000)
    page.locator("#row-actions button[data-action=pause]").click()
    page.locator("#action-result", has_text="enter the admin token").wait_for(timeout=5_000)
    page.locator("#token").fill(token)
    page.locator("#token").dispatch_event("change")
    page.locator("#row-actions button[data-action=pause]").click()
    page.locator("#action-result", has_text="pause 5: done").wait_for(timeout=5_000)
    page.locator("#row-title", has_text=" id 5 · paused").wait_for(timeout=5_000)
    assert scalar(sql, state, (5,)) == 1
    page.locator("#paused", has_text="1").wait_for(timeout=10_000)
    page.screenshot(path=str(ARTIFACTS / "dashboard-actions.png"), full_page=True)
    page.locator("#row-actions button[data-action=resume]").click()
    page.locator("#row-title", has_text=" id 5 · ").filter(has_not_text="paused").wait_for(timeout=5_000)
    checked = "SELECT check_count FROM user_block_status WHERE user_id = %s"
    wait_for(lambda: scalar(sql, checked, (5,)) == 1, 5, "the resumed row checked at once")
    page.locator("#row-actions button[data-action=now]").click()
    wait_for(lambda: scalar(sql, checked, (5,)) == 2, 5, "`check now` checks it at once")

    release = page.locator("#quarantine tr", has_text="9").locator("button[data-action=release]")
    release.wait_for(timeout=15_000)
    release.click()
    page.locator("#action-result", has_text="release 9: done").wait_for(timeout=5_000)
    wait_for(lambda: scalar(sql, checked, (9,)) == 1, 5, "the released row checked")

    log = procs.log_of(dispatcher)
    for action in ("pause", "resume", "now", "release"):
        assert re.search(rf"dashboard action {action} from 127\.0\.0\.1: ids (5|9)", log), log[-3000:]
    assert "dashboard action refused" in log and token not in log


def test_row_lookups_are_bounded_whatever_the_flood(settings, monkeypatch):
    """Each row lookup opens a MySQL connection of its own: a flood of them (a script hitting
    /api/row) must not use up max_connections that the workers need."""
    import threading
    import time
    from http import HTTPStatus

    from recheck.dispatcher import web
    from recheck.dispatcher.monitor import Monitor
    from recheck.shared.mysql.db import Database
    from recheck.shared.process.metrics import dispatcher_metrics
    from tests.support.helpers import make_store

    lock, inside, most, statuses = threading.Lock(), 0, 0, []

    def slow_story(*_):
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        time.sleep(0.2)
        with lock:
            inside -= 1
        return types.SimpleNamespace(as_json=lambda: {"id": 1})  # what the page's reply needs of a RowStory

    monkeypatch.setattr(web, "row_story", slow_story)
    metrics = dispatcher_metrics(settings.name)
    monitor = Monitor(settings, Database(settings), make_store(settings), metrics)
    dashboard = web.Dashboard([monitor], "127.0.0.1", 0)
    flood = [threading.Thread(target=lambda: statuses.append(dashboard.row(None, "1")[0])) for _ in range(16)]
    for thread in flood:
        thread.start()
    for thread in flood:
        thread.join(10)
    assert most == 4, f"{most} lookups (MySQL connections) at once"  # web.ROW_LOOKUPS
    assert statuses == [HTTPStatus.OK] * 16  # they waited their turn


BIG_IDS = (2**53, 2**53 + 1, 2**64 - 2, 2**64 - 1)  # beyond what a JavaScript number holds exactly

# The row lookup that follows the first pause answers 1.5 s late: by then the page shows another
# row, which that late answer must not overwrite (it did: CI, 2026-11-26, 1 run in many).
LATE_LOOKUP = """
const realFetch = window.fetch;
let lookUps = 0;
window.fetch = async (url, init) => {
  const answer = await realFetch(url, init);
  if (String(url).includes("/api/row?id=9007199254740993") && ++lookUps === 2) {
    await new Promise((ok) => setTimeout(ok, 1500));
    setTimeout(() => { window.lateAnswerDrawn = true; }, 0);
  }
  return answer;
};
"""


def test_ids_beyond_2_53_reach_the_page_and_come_back_as_the_same_row(make_settings, procs, browser, sql):
    """Ids travel as text: searching 9007199254740993 shows that row, and pausing it pauses that
    row, not 9007199254740992 (before issue 32 they were JSON numbers: the page showed ...992 and
    paused it; ids near 2^64 could not be acted on at all)."""
    dashboard, token = free_port(), "big-ids-token"
    settings = make_settings(interval=3600, dashboard_port=dashboard, dashboard_token=token)
    values = ", ".join(f"({i}, NOW(3) + INTERVAL 1 HOUR)" for i in BIG_IDS)
    query(sql, f"INSERT INTO user_block_status (user_id, next_check_at) VALUES {values}")
    procs.start("dispatcher", settings)
    page, _ = open_dashboard(browser, dashboard, LATE_LOOKUP)
    page.locator("#token").wait_for(state="visible", timeout=10_000)
    page.locator("#token").fill(token)
    page.locator("#token").dispatch_event("change")
    paused = "SELECT user_id FROM user_block_status WHERE next_check_at > '9999-01-01' ORDER BY user_id"
    for wanted in (2**53 + 1, 2**64 - 1):
        page.locator("#search-id").fill(str(wanted))
        page.locator("#search button").click()
        page.locator("#row-title", has_text=f" id {wanted} · waiting").wait_for(timeout=5_000)
        page.locator("#row-actions button[data-action=pause]").click()
        page.locator("#action-result", has_text=f"pause {wanted}: done").wait_for(timeout=5_000)
    assert [int(row[0]) for row in query(sql, paused)] == [2**53 + 1, 2**64 - 1]
    page.wait_for_function("window.lateAnswerDrawn === true", timeout=5_000)
    assert page.locator("#row-title").inner_text().endswith(f" id {2**64 - 1} · paused")


def raw_get(port: int, path: str, host: str, source: str = "127.0.0.1") -> int:
    """A GET with a Host header of our choosing, from a source address; the status code (0: the
    connection was closed unanswered)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        answer = conn.recv(100)
        return int(answer.split()[1]) if answer else 0


def test_the_dashboard_answers_only_its_own_names_and_sheds_idle_connections(make_settings, procs):
    """A DNS-rebinding page (another name pointed at this machine) is refused; 70 idle half-sent
    connections from one address neither keep anyone else out nor stay open for long."""
    dashboard = free_port()
    settings = make_settings(dashboard_port=dashboard, dashboard_hosts="recheck.internal")
    dispatcher = procs.start("dispatcher", settings)
    wait_for(lambda: get(f"http://127.0.0.1:{dashboard}/healthz") == "ok\n", 20, "the dashboard to listen")
    assert raw_get(dashboard, "/api/status", f"127.0.0.1:{dashboard}") == 200
    assert raw_get(dashboard, "/api/status", "localhost") == 200
    assert raw_get(dashboard, "/api/status", "recheck.internal:8080") == 200  # RECHECK_DASHBOARD_HOSTS
    assert raw_get(dashboard, "/api/status", f"evil.example:{dashboard}") == 421
    assert raw_get(dashboard, "/", "evil.example") == 421
    assert raw_get(dashboard, "/healthz", "10.1.2.3:8080") == 200  # tells nothing: any name
    assert "Host 'evil.example' is not this server's name" in procs.log_of(dispatcher)

    idle = []
    for _ in range(70):  # from 127.0.0.2: another address than the requests below
        conn = socket.socket()
        conn.bind(("127.0.0.2", 0))
        conn.connect(("127.0.0.1", dashboard))
        conn.sendall(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
        idle.append(conn)
    try:
        started = time.monotonic()
        assert raw_get(dashboard, "/api/status", "127.0.0.1") == 200
        assert time.monotonic() - started < 2
        # A health probe from the crowded address itself is answered (issue 45, item 12); any
        # other request from it is turned away with 503 (it was closed unanswered before).
        assert raw_get(dashboard, "/healthz", "127.0.0.1", source="127.0.0.2") == 200
        assert raw_get(dashboard, "/api/status", "127.0.0.1", source="127.0.0.2") == 503
        assert time.monotonic() - started < 4
        for conn in idle:  # each one closed (beyond PER_PEER: at once) or answered with an error
            conn.settimeout(15)
            try:
                answer = conn.recv(100)
            except TimeoutError:
                pytest.fail("an idle half-sent connection was held open for 15 s")
            assert answer == b"" or (answer.startswith(b"HTTP/1.") and b" 200 " not in answer), answer
        assert time.monotonic() - started < 12  # every one let go within the idle timeout (5 s)
    finally:
        for conn in idle:
            conn.close()


def test_a_one_shot_workload_shows_pending_and_dead_jobs_and_the_page_retries_them(
    make_settings, procs, browser, sql
):
    """A queue table (issue 34): the pending and dead cards, a dead job's story in the row view
    with a retry button (behind the token), and the retry putting it back in line."""
    dashboard, token = free_port(), "s3cret-dashboard-token"
    settings = make_settings(dashboard_port=dashboard, dashboard_token=token)
    jobs = settings.evolve(name="jobs", table="job_queue", id_column="id", once=True, max_attempts=2,
                           result_column="recheck_result", retry_base=0.05, retry_max=0.1,
                           failing_threshold=1.0)  # half fail: not "checks failing" here  # fmt: skip
    query(sql, "CREATE TABLE job_queue (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, data BLOB)")
    assert init_db(jobs, apply=True, say=lambda _: None) == 0
    query(sql, "INSERT INTO job_queue (data) VALUES ('a'), ('b'), ('c'), ('d')")  # odd ids fail
    procs.start("dispatcher", jobs)
    procs.start("worker", jobs, env={"RECHECK_CHECK": "tests.support.checks:odd_fails"})
    dead = "SELECT COUNT(*) FROM job_queue WHERE next_check_at = '9999-12-29'"
    wait_for(lambda: scalar(sql, dead) == 2, 20, "jobs 1 and 3 dead after 2 attempts")
    page, _ = open_dashboard(browser, dashboard)
    page.locator("#dead", has_text="2").wait_for(timeout=15_000)
    page.locator("#pending", has_text="0").wait_for(timeout=5_000)
    page.locator("#dead-jobs tr", has_text="odd id 3").wait_for(timeout=5_000)  # the dead list
    # Dead rows are not healthy (issue 45, item 9): the headline says so, not "rows fresh".
    page.locator("#headline-text", has_text="2 dead rows").wait_for(timeout=5_000)
    assert page.locator("#headline").get_attribute("class") == "overdue"
    assert page.locator("#where").inner_text().endswith("one-shot rows")
    page.locator("#token").fill(token)
    page.locator("#token").dispatch_event("change")
    page.locator("#search-id").fill("1")
    page.locator("#search button").click()
    page.locator("#row-title", has_text=" id 1 · dead").wait_for(timeout=5_000)
    assert page.locator("#row-actions button[data-action=retry]").count() == 1
    page.screenshot(path=str(ARTIFACTS / "dashboard-dead-jobs.png"), full_page=True)
    before = scalar(sql, "SELECT checked_at FROM job_queue WHERE id = 1")
    page.locator("#row-actions button[data-action=retry]").click()
    page.locator("#action-result", has_text="retry 1: done").wait_for(timeout=5_000)
    attempted = "SELECT checked_at > %s AND fail_count = 2 FROM job_queue WHERE id = 1"
    wait_for(lambda: scalar(sql, attempted, (before,)) == 1, 10, "job 1 run again (and dead again: it fails)")
    done = "SELECT COUNT(*) FROM job_queue WHERE next_check_at IS NULL AND check_count = 1"
    assert scalar(sql, done) == 2  # jobs 2 and 4, once each
    retry_3 = page.locator("#dead-jobs tr", has_text="odd id 3").locator("button[data-action=retry]")
    retry_3.click()
    page.locator("#action-result", has_text="retry 3: done").wait_for(timeout=5_000)
    # Every dead job at once (issue 47, item 4): behind the token and a confirmation.
    wait_for(lambda: scalar(sql, dead) == 2, 20, "jobs 1 and 3 dead again")
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator("#dead-bulk button[data-bulk=discard_dead]").wait_for(timeout=15_000)
    page.locator("#dead-bulk button[data-bulk=discard_dead]").click()
    page.locator("#action-result", has_text="discard all: 2 dead jobs taken as done").wait_for(timeout=5_000)
    assert scalar(sql, dead) == 0
    assert scalar(sql, "SELECT COUNT(*) FROM job_queue WHERE next_check_at IS NULL") == 4
