"""The check plug-in: what a team writes, and how recheck calls it.

RECHECK_CHECK=package.module:function names one of two kinds of function:

- a batch check, for CPU-cheap work: ``def check(ids: list[int]) -> list[result]`` (or a dict
  id -> result covering every id). One call per batch of hundreds of ids.
- a per-row check, for I/O-bound work (an HTTP call, an API lookup):
  ``async def check(id: int) -> result`` or a plain ``def check(id: int) -> result``, run with
  RECHECK_CONCURRENCY rows at a time (async: on one event loop; plain: in a thread pool).

An ``async def`` is per-row; a plain function is a batch check unless decorated with
``@per_row`` (or RECHECK_CHECK_KIND says otherwise). A result is stored in the result column:
str, int, float, bool or None, or ``Recheck(value, after=seconds)`` to store value and have
that row checked again `after` seconds from now (kept within min_interval and max_interval)
instead of after the workload's interval. An exception (raised by a per-row check, or returned
in a batch check's list) fails that row: its failure is counted, the error kept, and it is
retried with capped exponential backoff. The worker itself never dies of a check's exception.

Ids arrive as the application uses its keys: int, str (CHAR/VARCHAR keys) or bytes
(BINARY/VARBINARY keys).
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from shared.config import ConfigError

ALLOWED_RESULTS = (str, int, float, bool, type(None))


def batch(fn: Callable) -> Callable:
    """Mark a function as a batch check: called with a list of ids."""
    fn.__recheck_kind__ = "batch"
    return fn


def per_row(fn: Callable) -> Callable:
    """Mark a plain (non-async) function as a per-row check: called with one id."""
    fn.__recheck_kind__ = "row"
    return fn


class CheckLoadError(ConfigError):
    """RECHECK_CHECK does not name a usable function."""


class CheckShapeError(Exception):
    """A batch check returned something that does not match the ids it was given."""


class Outcome(NamedTuple):  # a NamedTuple: made once per row, 3x cheaper than a frozen dataclass
    ok: bool
    text: str | None  # the result (ok) or the error message (failed)
    after: float | None = None  # seconds until the row is due again, if the check said (Recheck)


@dataclass(frozen=True)
class Recheck:
    """A check's result for one row that also says when to check that row again:
    ``return Recheck("down", after=5)``. Without it a row is due again after the workload's
    interval (or its interval column's)."""

    value: Any
    after: float


def load_check(reference: str) -> Callable:
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any import failure is a configuration problem
        raise CheckLoadError(
            f"RECHECK_CHECK={reference}: cannot import {module_name!r}: {type(error).__name__}: {error}"
        ) from error
    fn = getattr(module, attribute, None)
    if not callable(fn):
        raise CheckLoadError(f"RECHECK_CHECK={reference}: {module_name!r} has no function {attribute!r}")
    return fn


def check_kind(fn: Callable, configured: str = "auto") -> str:
    if configured != "auto":
        return configured
    marked = getattr(fn, "__recheck_kind__", None)
    if marked:
        return marked
    return "row" if inspect.iscoroutinefunction(fn) else "batch"


def describe_error(error: BaseException) -> str:
    try:
        message = str(error).strip()
    except Exception:  # an exception whose __str__ itself fails
        message = ""
    return storable(f"{type(error).__name__}: {message}" if message else type(error).__name__)


def storable(text: str) -> str:
    """Text MySQL can store: a lone surrogate (not valid UTF-8) becomes '?'."""
    if text.isascii():  # the usual result ("ok", "blocked", a number): nothing to look for
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def result_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return storable(str(value))


OK_WITHOUT_RESULT = Outcome(True, None)


def outcome_of(value: Any) -> Outcome:
    """Whatever a check returned for one row, as that row's stored result or failure."""
    if value is None:  # the most common results first: one test each instead of five
        return OK_WITHOUT_RESULT
    if type(value) is str:
        return Outcome(True, storable(value))
    if isinstance(value, Recheck):
        after = value.after
        if isinstance(after, bool) or not isinstance(after, int | float) or not math.isfinite(after):
            return Outcome(False, f"CheckShapeError: Recheck(after={after!r}) is not a number of seconds")
        outcome = outcome_of(value.value)
        return Outcome(True, outcome.text, float(after)) if outcome.ok else outcome
    if isinstance(value, BaseException):
        return Outcome(False, describe_error(value))
    if not isinstance(value, ALLOWED_RESULTS):
        return Outcome(
            False,
            f"CheckShapeError: result of type {type(value).__name__}; "
            "expected str, int, float, bool, None, Recheck or an exception",
        )
    try:
        return Outcome(True, result_text(value))
    except Exception as error:  # str() refuses an int of more than 4,300 digits, for one
        return Outcome(
            False, f"CheckShapeError: the result could not be stored as text ({describe_error(error)})"
        )


def batch_outcomes(ids: Sequence[int], results: Any, given: Sequence[int] | None = None) -> list[Outcome]:
    """Match a batch check's return value to its ids; CheckShapeError if they do not fit.

    given: the list the check was called with, a copy of ids. A list of results belongs to it
    in its order when the check returns: a check that sorted its list and answered in that
    order is understood; one that added or removed ids fails its batch with a clear error."""
    if given is not None and list(given) != list(ids) and not isinstance(results, dict):
        if len(given) != len(ids) or set(given) != set(ids):
            raise CheckShapeError(
                f"check changed the ids list it was given ({len(ids)} ids, {len(given)} after the call); "
                "return one result per id, or a dict id -> result"
            )
        if isinstance(results, list | tuple) and len(results) == len(given):
            results = dict(zip(given, results, strict=True))
    if isinstance(results, dict):
        missing = [row_id for row_id in ids if row_id not in results]
        if missing:
            raise CheckShapeError(
                f"check returned a dict without results for {len(missing)} of {len(ids)} ids "
                f"(e.g. {missing[:3]})"
            )
        return [outcome_of(results[row_id]) for row_id in ids]
    if isinstance(results, str | bytes) or not hasattr(results, "__len__"):
        raise CheckShapeError(
            f"check returned {type(results).__name__}; expected a list with one result per id, "
            "or a dict id -> result"
        )
    if len(results) != len(ids):
        raise CheckShapeError(f"check returned {len(results)} results for {len(ids)} ids")
    return [outcome_of(value) for value in results]
