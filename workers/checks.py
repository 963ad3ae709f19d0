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
in a batch check's list) fails that row: its failure is counted, the error kept, and the row is
due again after its own interval (or sooner, with `retry = "backoff"`).

The check is foreign code: whatever it raises (any BaseException, SystemExit and
KeyboardInterrupt included: a real signal to the worker is handled by its signal handler and
never arrives as an exception) and whatever it returns (any value, any `after`, objects whose
len(), str() or lookups raise) ends as a stored result or as that row's failure. Never the
worker's, a lane's or the run's.

Ids arrive as the application uses its keys: int, str (CHAR/VARCHAR keys) or bytes
(BINARY/VARBINARY keys). A workload that names `columns` gets rows instead: read-only mappings
of those columns and the id column, read for a whole take in one statement.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from recheck.shared.config import ConfigError
from recheck.shared.core.entries import Key
from recheck.shared.errors import CheckBoundaryError

ALLOWED_RESULTS = (str, int, float, bool, type(None))
KIND_MARK = "__recheck_kind__"  # what @batch and @per_row set on a check
# An `after` beyond this is as far as it (min_interval and max_interval clamp it further): keeps
# every later conversion (to microseconds, in SQL) far from any overflow.
MAX_AFTER = 86_400 * 365 * 100.0


def batch(fn: Callable) -> Callable:
    """Mark a function as a batch check: called with a list of ids."""
    setattr(fn, KIND_MARK, "batch")
    return fn


def per_row(fn: Callable) -> Callable:
    """Mark a plain (non-async) function as a per-row check: called with one id."""
    setattr(fn, KIND_MARK, "row")
    return fn


class CheckLoadError(ConfigError):
    """RECHECK_CHECK does not name a usable function."""


class CheckShapeError(CheckBoundaryError):
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


def load_check(reference: str, setting: str = "RECHECK_CHECK") -> Callable:
    """The function `module:function` names; setting: where the reference came from (messages)."""
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as error:  # any import failure (sys.exit in it too) is configuration
        raise CheckLoadError(
            f"{setting}={reference}: cannot import {module_name!r}: {type(error).__name__}: {error}"
        ) from error
    fn = getattr(module, attribute, None)
    if not callable(fn):
        raise CheckLoadError(f"{setting}={reference}: {module_name!r} has no function {attribute!r}")
    return fn


KIND_NAMES = {"batch": "batch check", "row": "per-row check"}


def describe_check(fn: Callable, kind: str) -> str:
    """What `recheck config` and a worker's start line say of a check: its kind and how it runs."""
    if kind == "row":
        return "per-row check (async)" if inspect.iscoroutinefunction(fn) else "per-row check (threads)"
    return KIND_NAMES[kind]


def check_kind(fn: Callable, configured: str = "auto") -> str:
    if configured != "auto":
        return configured
    marked = getattr(fn, KIND_MARK, None)
    if marked:
        return marked
    return "row" if inspect.iscoroutinefunction(fn) else "batch"


class StoredError(Exception):
    """A failure whose stored error is exactly `text` (no class name before it): a check that
    formats its own, e.g. recheck.django's "module.Class: message" line and traceback."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


def describe_error(error: BaseException) -> str:
    if isinstance(error, StoredError):
        return storable(error.text)
    try:
        message = str(error).strip()
    except BaseException:  # an exception whose __str__ itself fails (or exits)
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


def seconds_after(after: Any) -> float | None:
    """A Recheck's `after` as seconds within [0, MAX_AFTER]; None if it is not a number (NaN,
    a bool, a string). Infinite or huge values are as far as allowed, negative ones 0: the
    write-back then keeps every row within [min_interval, max_interval]."""
    if isinstance(after, bool) or not isinstance(after, int | float):
        return None
    try:
        seconds = float(after)
    except OverflowError:  # an int beyond any float (10**400)
        return MAX_AFTER if after > 0 else 0.0
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_AFTER)


def outcome_of(value: Any) -> Outcome:
    """Whatever a check returned for one row, as that row's stored result or failure. Never
    raises: a value whose str() or attributes raise (anything, SystemExit included) fails its row."""
    if value is None:  # the most common results first: one test each instead of five
        return OK_WITHOUT_RESULT
    if type(value) is str:
        return Outcome(True, storable(value))
    try:  # free in CPython 3.11 unless something raises
        return _outcome_of(value)
    except BaseException as error:
        return Outcome(False, f"CheckShapeError: the result could not be read ({describe_error(error)})")


def _outcome_of(value: Any) -> Outcome:
    if isinstance(value, Recheck):
        after = seconds_after(value.after)
        if after is None:
            reason = f"Recheck(after={value.after!r}) is not a number of seconds"
            return Outcome(False, f"CheckShapeError: {reason}")
        outcome = outcome_of(value.value)
        return Outcome(True, outcome.text, after) if outcome.ok else outcome
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


def batch_outcomes(
    ids: Sequence[Key], results: Any, given: Sequence | None = None, key_of: Callable | None = None
) -> list[Outcome]:
    """Match a batch check's return value to its ids; CheckShapeError if they do not fit.

    given: the list the check was called with, a copy of ids (or of rows: key_of(row) is its
    id). A list of results belongs to it in its order when the check returns: a check that
    sorted its list and answered in that order is understood; one that added or removed entries
    fails its batch with a clear error."""
    if given is not None and key_of is not None:
        given = [key_of(row) for row in given]
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
