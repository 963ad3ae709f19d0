"""The check plug-in: what a team writes, and how recheck calls it.

RECHECK_CHECK=package.module:function names one of two kinds of function:

- a batch check, for CPU-cheap work: ``def check(ids: list[int]) -> list[result]`` (or a dict
  id -> result covering every id). One call per batch of hundreds of ids.
- a per-row check, for I/O-bound work (an HTTP call, an API lookup):
  ``async def check(id: int) -> result`` or a plain ``def check(id: int) -> result``, run with
  RECHECK_CONCURRENCY rows at a time (async: on one event loop; plain: in a thread pool).

An ``async def`` is per-row; a plain function is a batch check unless decorated with
``@per_row`` (or RECHECK_CHECK_KIND says otherwise). A result is stored in the result column:
str, int, float, bool or None. An exception (raised by a per-row check, or returned in a batch
check's list) fails that row: its failure is counted, the error kept, and it is retried with
capped exponential backoff. The worker itself never dies of a check's exception.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class Outcome:
    ok: bool
    text: str | None  # the result (ok) or the error message (failed)


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
    message = str(error).strip()
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def result_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def outcome_of(value: Any) -> Outcome:
    if isinstance(value, BaseException):
        return Outcome(False, describe_error(value))
    if not isinstance(value, ALLOWED_RESULTS):
        return Outcome(
            False,
            f"CheckShapeError: result of type {type(value).__name__}; "
            "expected str, int, float, bool, None or an exception",
        )
    return Outcome(True, result_text(value))


def batch_outcomes(ids: Sequence[int], results: Any) -> list[Outcome]:
    """Match a batch check's return value to its ids; CheckShapeError if they do not fit."""
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
