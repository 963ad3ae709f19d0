"""recheck: keep every row of a big MySQL table freshly checked.

The public API is what this module exports; everything else (recheck.shared, recheck.workers,
recheck.dispatcher, recheck.commands) may change between releases:

- ``Recheck(value, after=seconds)``: a check's result for one row that also says when to check
  that row again;
- ``per_row`` and ``batch``: decorators that say how a plain function is called (one row at a
  time in a thread pool, or a list of rows at a time);
- ``Client``: the application's side: ``now``, ``pause``, ``resume``, ``state`` and ``changes``
  (the change feed), with ``Acted``, ``Change`` and ``RowStory``, what they return;
- ``JsonFormatter``: recheck's one-JSON-object-per-line log format, for a logging configuration
  of your own (``RECHECK_LOG_CONFIG``: ``{"()": "recheck.JsonFormatter"}``);
- ``traceparent()``: the current OpenTelemetry span's W3C trace context, for a producer to store
  with a row in the workload's ``trace_column`` (docs/tracing.md); None without OpenTelemetry;
- ``RecheckError``: the root of every exception recheck raises on purpose.
"""

from recheck.shared.errors import RecheckError
from recheck.workers.checks import Recheck, batch, per_row

__all__ = [
    "Acted", "Change", "Client", "JsonFormatter", "Recheck", "RecheckError", "RowStory", "batch",
    "per_row", "traceparent",
]  # fmt: skip
# Imported when first asked for: a worker never needs them.
_CLIENT = ("Acted", "Change", "Client", "RowStory")


def __getattr__(name: str):
    if name in _CLIENT:
        import recheck.client as client

        return getattr(client, name)
    if name == "JsonFormatter":
        from recheck.shared.process.logs import JsonFormatter

        return JsonFormatter
    if name == "traceparent":
        from recheck.shared.process.tracing import traceparent

        return traceparent
    raise AttributeError(f"module 'recheck' has no attribute {name!r}")
