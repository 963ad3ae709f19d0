"""OpenTelemetry traces of a worker's work (docs/tracing.md), off unless RECHECK_TRACING.

Off (the default), `OFF` stands in: each call is a no-op and nothing of OpenTelemetry is imported,
so a worker pays one attribute test per take (and per row for per-row checks). On
(`pip install 'recheck[otel]'`):

- `recheck.take` per batch take, with `recheck.check` per call of a batch check and
  `recheck.write_back` inside it; a per-row check has its own `recheck.check` span, and each
  write-back of finished rows its `recheck.write_back` span. Attributes: the workload, the rows,
  what the write-back did (written, failed, stale, deferred, gone); a failed check's span has an
  error status with the failure's first line.
- A row's trace context: a workload's `trace_column` holds the W3C `traceparent` of the request
  that inserted the row (`recheck.traceparent()` gives it to the producer). A per-row
  check's span is then that request's child, so the job's spans join the request's trace; a
  batch check's span links to the contexts of its rows (at most MAX_LINKS).
- The tracer provider: the application's, if one is set before the worker starts (by
  `opentelemetry-instrument`, or by the check's module); else the SDK's, named
  OTEL_SERVICE_NAME (default `recheck-worker`), exporting as OTEL_TRACES_EXPORTER says: `otlp`
  (the default: OTLP over HTTP, to OTEL_EXPORTER_OTLP_ENDPOINT), `console`, or `none` (spans
  recorded, exported nowhere). Metrics stay Prometheus.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from recheck.shared.config import ConfigError, Deployment

log = logging.getLogger(__name__)

MAX_LINKS = 128  # links of a batch check's span to its rows' producers (the SDK's own limit)
ERROR_TEXT = 200  # characters of a failure kept in a span's status


class Tracing:
    """Tracing off: every call does nothing."""

    on = False

    @contextlib.contextmanager
    def span(
        self, name: str, attributes: Mapping[str, Any], parent: str | None = None, links: Iterable[str] = ()
    ) -> Iterator[Any]:
        """A span around the block, the current one within it (its child spans nest);
        parent: a producer's traceparent to continue; links: traceparents to link to."""
        yield None

    def failed(self, span: Any, error: str) -> None:
        """Mark the span failed with the failure's first line."""

    def record(self, span: Any, attributes: Mapping[str, Any]) -> None:
        """Attributes known only at the end (what a write-back did)."""


OFF = Tracing()


class OpenTelemetryTracing(Tracing):
    on = True

    def __init__(self) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import Link, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.tracer = trace.get_tracer("recheck")
        self.propagator = TraceContextTextMapPropagator()
        self.current_span_of = trace.get_current_span
        self.link = Link
        self.error = lambda text: Status(StatusCode.ERROR, text)

    def context_of(self, traceparent: str | None) -> Any:
        """The context a stored traceparent names, or None (none stored, or unreadable: a new trace)."""
        if not traceparent:
            return None
        context = self.propagator.extract({"traceparent": traceparent})
        return context if self.current_span_of(context).get_span_context().is_valid else None

    @contextlib.contextmanager
    def span(
        self, name: str, attributes: Mapping[str, Any], parent: str | None = None, links: Iterable[str] = ()
    ) -> Iterator[Any]:
        linked = []
        for traceparent in links:
            context = self.context_of(traceparent)
            if context is not None:
                linked.append(self.link(self.current_span_of(context).get_span_context()))
                if len(linked) >= MAX_LINKS:
                    break
        # record_exception off: an exception through the block is recheck's (a stop, an outage),
        # not the check's; a check's failure is marked with failed().
        with self.tracer.start_as_current_span(
            name,
            context=self.context_of(parent),
            attributes=dict(attributes),
            links=linked,
            record_exception=False,
        ) as span:
            yield span

    def failed(self, span: Any, error: str) -> None:
        span.set_status(self.error(error.split("\n", 1)[0][:ERROR_TEXT]))

    def record(self, span: Any, attributes: Mapping[str, Any]) -> None:
        span.set_attributes(dict(attributes))


_tracing: OpenTelemetryTracing | None = None


def tracing_for(deployment: Deployment, role: str = "worker") -> Tracing:
    """OFF unless the deployment's RECHECK_TRACING; then this process's tracing, set up once."""
    global _tracing
    if not deployment.tracing:
        return OFF
    if _tracing is None:
        set_up_provider(role)
        _tracing = OpenTelemetryTracing()
    return _tracing


def set_up_provider(role: str) -> None:
    """The SDK's tracer provider, unless the application has set one. ConfigError if
    OpenTelemetry is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise ConfigError("RECHECK_TRACING: needs OpenTelemetry: pip install 'recheck[otel]'") from None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        log.info("tracing on: spans to the application's tracer provider")
        return  # the application's own (opentelemetry-instrument, or set up by the check)
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise ConfigError(
            "RECHECK_TRACING: needs the OpenTelemetry SDK: pip install 'recheck[otel]'"
        ) from None
    name = os.environ.get("OTEL_SERVICE_NAME") or f"recheck-{role}"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    exporter = (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").strip().lower()
    if exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError(
                "RECHECK_TRACING: OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: "
                "pip install 'recheck[otel]'"
            ) from None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter != "none":
        raise ConfigError(f"OTEL_TRACES_EXPORTER={exporter}: recheck knows otlp, console and none")
    trace.set_tracer_provider(provider)  # flushed at exit (the SDK's own atexit hook)
    log.info("tracing on: spans of service %s exported by %s", name, exporter)


_inject: Any = None  # opentelemetry.propagate.inject once looked up; False: not installed


def traceparent() -> str | None:
    """The current span's W3C trace context, for a producer to store in a row's trace_column
    (`INSERT ... (…, traceparent) VALUES (…, %s)`), or None without OpenTelemetry or a span.
    Cheap on every enqueue: OpenTelemetry is looked for once."""
    global _inject
    if _inject is None:
        try:
            from opentelemetry.propagate import inject

            _inject = inject
        except ImportError:
            _inject = False
    if _inject is False:
        return None
    carrier: dict[str, str] = {}
    _inject(carrier)
    return carrier.get("traceparent")


def outcome_attributes(written: Any, gone: int) -> dict[str, int]:
    """A write-back's figures as span attributes (written: workers/writing/writeback.Written)."""
    return {
        "recheck.written": written.succeeded,
        "recheck.failed": written.failed,
        "recheck.stale": written.stale,
        "recheck.deferred": len(written.deferred),
        "recheck.gone": gone,
    }


def rows_attributes(workload: str, rows: int) -> dict[str, Any]:
    return {"recheck.workload": workload, "recheck.rows": rows}


def span_id_of(key: Any) -> int | str:
    """A row's key as a span attribute: an int or text as it is, a binary key in hex."""
    return key.hex() if isinstance(key, bytes | bytearray) else key
