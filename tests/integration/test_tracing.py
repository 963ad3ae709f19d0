"""OpenTelemetry traces (RECHECK_TRACING, docs/tracing.md) of real workers against MariaDB and
Redis, read back with the SDK's in-memory exporter:

- a per-row check's span is the child of the producer's span whose traceparent the row's
  trace_column holds (one trace from the request to the job), the check's own spans nest in it,
  a failed row's span is an error; each write-back has a span with what it wrote;
- a batch take is a `recheck.take` span holding the check's call (linked to every row's producer)
  and the write-back;
- tracing off records nothing and imports none of OpenTelemetry's tracing; a row without a
  trace context, or with an unreadable one, starts a trace of its own.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import recheck
from recheck.shared.process.tracing import OFF
from tests.support.helpers import dispatch_all, run_in_thread, scalar, seed_rows
from tests.support.servers import wait_for


@pytest.fixture(scope="module")
def exporter():
    """The SDK's in-memory exporter on this process's tracer provider (set here if none is)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return memory


@pytest.fixture
def traced(make_settings, sql, exporter):
    """A workload with a `traceparent` column and tracing on; the exporter emptied."""
    settings = make_settings()
    seed_rows(settings, 40, due_now=True)
    with sql.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {settings.table} ADD COLUMN traceparent VARCHAR(55) NULL")
    exporter.clear()
    return settings.evolve(tracing=True, trace_column="traceparent")


def produce(sql, table: str, ids: range) -> trace.SpanContext:
    """The application's request: a span, within which it stores its traceparent with the rows."""
    with trace.get_tracer("app").start_as_current_span("POST /orders") as span:
        traceparent = recheck.traceparent()
        assert traceparent and traceparent.startswith("00-")
        with sql.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET traceparent = %s WHERE user_id BETWEEN %s AND %s",
                (traceparent, ids.start, ids.stop - 1),
            )
        return span.get_span_context()


def spans(exporter, name: str) -> list:
    return [span for span in exporter.get_finished_spans() if span.name == name]


async def checked_inside_a_span(row_id: int) -> str:
    """A per-row check whose own work is a span (as an instrumented HTTP client's would be)."""
    with trace.get_tracer("check").start_as_current_span("GET /status"):
        if row_id == 7:
            raise ConnectionError("cannot reach 7")
        return "ok"


def test_a_per_row_check_joins_its_producers_trace(make_worker, traced, sql, exporter):
    request = produce(sql, traced.table, range(1, 21))  # rows 1-20 carry the request's context
    with sql.cursor() as cursor:  # row 30's context is unreadable: it starts a trace of its own
        cursor.execute(f"UPDATE {traced.table} SET traceparent = 'not a traceparent' WHERE user_id = 30")
    dispatch_all(traced)
    worker = make_worker(traced, checked_inside_a_span, start=False)
    assert worker.lane(traced.name).kind == "row"
    thread = run_in_thread(worker)
    done = f"SELECT COUNT(*) FROM {traced.table} WHERE check_count + fail_count = 1"
    wait_for(lambda: scalar(sql, done) == 40, 15, "40 rows checked")
    wait_for(lambda: sum(s.attributes["recheck.rows"] for s in spans(exporter, "recheck.write_back")) == 40,
             10, "the write-backs' spans")  # fmt: skip
    worker.stop()
    thread.join(10)

    checks = {span.attributes["recheck.id"]: span for span in spans(exporter, "recheck.check")}
    assert sorted(checks) == list(range(1, 41))
    for row_id, span in checks.items():
        assert span.attributes["recheck.workload"] == traced.name
        joined = span.parent is not None and span.parent.span_id == request.span_id
        assert joined == (row_id <= 20), row_id  # the producer's child, or a trace of its own
        assert (span.context.trace_id == request.trace_id) == (row_id <= 20)
    assert checks[7].status.status_code == StatusCode.ERROR
    assert checks[7].status.description == "ConnectionError: cannot reach 7"
    assert checks[8].status.status_code == StatusCode.UNSET
    # The check's own span nests in its row's.
    inner = {span.parent.span_id: span for span in spans(exporter, "GET /status")}
    assert set(inner) == {span.context.span_id for span in checks.values()}
    writes = spans(exporter, "recheck.write_back")
    assert sum(span.attributes["recheck.written"] for span in writes) == 39
    assert sum(span.attributes["recheck.failed"] for span in writes) == 1


@pytest.mark.parametrize("columns", [(), ("status",)], ids=["ids", "rows"])
def test_a_batch_take_is_one_span_with_its_checks_and_write_back(make_worker, traced, sql, exporter, columns):
    """With `columns` the trace contexts are read on the check's own connection, before its rows."""
    request = produce(sql, traced.table, range(1, 11))
    dispatch_all(traced)
    settings = traced.evolve(worker_batch=25, worker_take_max=50, columns=columns)
    worker = make_worker(settings, lambda given: ["ok"] * len(given))
    lane = worker.lane(traced.name)
    assert lane.kind == "batch"
    while scalar(sql, f"SELECT COUNT(*) FROM {traced.table} WHERE check_count = 1") < 40:
        lane.poll()
    takes = spans(exporter, "recheck.take")
    assert sum(span.attributes["recheck.rows"] for span in takes) == 40
    by_parent: dict = {}
    for name in ("recheck.check", "recheck.write_back"):
        for span in spans(exporter, name):
            by_parent.setdefault(span.parent.span_id, []).append(span)
    for take in takes:
        children = by_parent[take.context.span_id]
        assert {span.name for span in children} == {"recheck.check", "recheck.write_back"}
        checked = sum(s.attributes["recheck.rows"] for s in children if s.name == "recheck.check")
        (write,) = [s for s in children if s.name == "recheck.write_back"]
        assert checked == write.attributes["recheck.written"] == take.attributes["recheck.rows"]
    # Rows 1-10 were inserted by the request: the checks that got them link to its span.
    links = [link.context for span in spans(exporter, "recheck.check") for link in span.links]
    assert len(links) == 10 and {(c.trace_id, c.span_id) for c in links} == {
        (request.trace_id, request.span_id)
    }


def test_tracing_off_records_nothing_and_imports_no_tracing(make_worker, make_settings, sql, exporter):
    settings = make_settings()
    seed_rows(settings, 10, due_now=True)
    dispatch_all(settings)
    exporter.clear()
    worker = make_worker(settings, lambda ids: ["ok"] * len(ids))
    lane = worker.lane(settings.name)
    assert lane.loop.tracing is OFF
    lane.poll()
    assert scalar(sql, f"SELECT COUNT(*) FROM {settings.table} WHERE check_count = 1") == 10
    assert exporter.get_finished_spans() == ()
    probe = (
        "import sys; from recheck.shared.config import Deployment; "
        "from recheck.shared.process.tracing import tracing_for; "
        "import recheck.workers.worker; "
        "assert tracing_for(Deployment()) is not None; "
        "print(sorted(m for m in sys.modules if m.startswith(TRACING)))"
    ).replace("TRACING", repr(("opentelemetry.sdk.trace", "opentelemetry.trace.propagation.tracecontext")))
    # (redis-py 8 imports OpenTelemetry's metrics when it is installed: its own, not recheck's.)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
