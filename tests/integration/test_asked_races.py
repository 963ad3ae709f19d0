"""Two paths that push the same id (issue 45, item 1): the application's `now` (the asked job)
and a dispatch page. Each reads rows, then pushes them; a worker that checks, writes and
acknowledges a row between one path's read and its push must not get it queued again: its
check, the job's side effect, would run twice with no fault anywhere. Both orders are tested,
each made to happen by running the other path inside the first one's read.

And the record of completions that makes this work (`completed`) must not grow for ever (item
3): it is kept in windows of the Redis clock, each with a TTL of its own.
"""

from __future__ import annotations

from recheck import Client
from recheck.dispatcher.dispatcher import DuePusher
from recheck.shared.redis.keys import Keys
from tests.support import checks
from tests.support.helpers import make_dispatcher, make_pusher, make_store, query, scalar


def checks_of(sql) -> int:
    return int(scalar(sql, "SELECT COALESCE(SUM(check_count), 0) FROM user_block_status"))


def after_read(pusher: DuePusher, method: str, then) -> None:
    """`pusher`'s next read (its db's `method`) is followed, before its push, by `then()`."""
    db = pusher.rows.db
    real = getattr(db, method)
    fired = []

    def read_then(*args, **kwargs):
        rows = real(*args, **kwargs)
        if not fired:
            fired.append(True)
            then()
        return rows

    setattr(db, method, read_then)


def test_a_row_finished_between_the_asked_read_and_its_push_is_not_queued_again(
    settings, sql, rds, make_worker
):
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (1, NOW(3) + INTERVAL 1 HOUR)")
    client = Client(settings=settings)
    assert client.now([1]).done == [1]  # due now, and asked for
    asked = make_pusher(settings)
    worker = make_worker(settings, checks.ok)
    lane = worker.lane(settings.name)

    def page_then_worker_finishes() -> None:
        dispatcher = make_dispatcher(settings)
        dispatcher.poll()  # a page reads the row (due now) and queues it
        lane.batch.process(lane.intake.take(500))  # checked, written, acknowledged

    after_read(asked, "scalar", page_then_worker_finishes)  # due_entries reads with scalar
    assert asked.push_asked() == 0
    assert rds.llen(Keys(settings.deployment.key_prefix).queue) == 0
    assert rds.hlen(Keys(settings.deployment.key_prefix).inflight) == 0
    assert checks_of(sql) == 1
    client.close()


def test_a_row_finished_between_a_page_read_and_its_push_is_not_queued_again(settings, sql, rds, make_worker):
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (1, NOW(3) + INTERVAL 1 HOUR)")
    client = Client(settings=settings)
    assert client.now([1]).done == [1]
    dispatcher = make_dispatcher(settings)  # nothing in flight: its first page is not guarded
    worker = make_worker(settings, checks.ok)
    lane = worker.lane(settings.name)

    def asked_then_worker_finishes() -> None:
        assert make_pusher(settings).push_asked() == 1  # the asked job pushes it to the head
        lane.batch.process(lane.intake.take(500))  # checked, written, acknowledged

    after_read(dispatcher.pusher, "query", asked_then_worker_finishes)
    dispatcher.poll()
    assert rds.llen(Keys(settings.deployment.key_prefix).queue) == 0
    assert checks_of(sql) == 1
    client.close()


def test_completions_are_kept_for_a_window_not_for_as_long_as_acks_go_on(settings, sql, rds, make_worker):
    """A pass rereading rows that may be in flight holds a guard; meanwhile acks record what
    completes. A guard renewed without end (a one-shot dispatcher's look-back does so at every
    caught-up poll) must not keep every record: each is gone 30 s after it was made at most."""
    keys = Keys(settings.deployment.key_prefix)
    store = make_store(settings)
    worker = make_worker(settings, checks.ok)
    lane = worker.lane(settings.name)
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) SELECT seq, NOW(3) FROM seq_1_to_20")
    store.begin_guard("dispatch", 60_000)
    make_dispatcher(settings).poll()
    lane.batch.process(lane.intake.take(500))
    windows = rds.keys(keys.completed + ":*")
    assert len(windows) == 1 and rds.hlen(windows[0]) == 20  # recorded while guarded
    # The window of the Redis clock the records were made in, and its fixed end: 20-30 s later.
    seconds, micros = rds.time()
    now_ms = seconds * 1000 + micros // 1000
    window = int(windows[0].rsplit(b":", 1)[1])
    assert window in (seconds // 10, seconds // 10 - 1)
    assert abs(rds.pttl(windows[0]) - ((window + 3) * 10_000 - now_ms)) < 1_000
    # More records in the same window (the look-back's guard lasts) do not push that end back.
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3)")
    make_dispatcher(settings).poll()
    lane.batch.process(lane.intake.take(500))
    for name in rds.keys(keys.completed + ":*"):
        ends_at = int(name.rsplit(b":", 1)[1]) * 10_000 + 30_000
        assert rds.pttl(name) <= ends_at - now_ms
    store.end_guard("dispatch")


def test_a_queue_at_high_water_is_read_again_soon_only_while_asked_ids_wait(settings, rds):
    """Asked ids wait in their list while the queue is past high water and its slack: the asked
    thread reads the workload again at the fast pace while some wait, not while none do."""
    settings = settings.evolve(high_water=10)
    keys = Keys(settings.deployment.key_prefix)
    pusher = make_pusher(settings)
    rds.rpush(keys.queue, *(f"{i}:1000".encode() for i in range(1, 1100)))  # past 10 + the slack
    assert pusher.push_asked() == 0 and not pusher.asked_soon  # nothing asked: the usual pace
    pusher.store.ask([b"7"])
    assert pusher.push_asked() == 0 and pusher.asked_soon  # 7 waits for room
    rds.delete(keys.queue)
    assert pusher.push_asked() == 0  # room now: 7 read (no row 7 in the table: nothing to push)
    pusher.push_asked()  # a read that found ids asks for one more
    assert not pusher.asked_soon
