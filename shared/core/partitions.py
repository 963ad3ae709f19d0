"""Which partition of a workload an id belongs to. Pure functions, no I/O.

A workload with `partitions = K` spreads its ids over K sets of Redis keys, each with a hash
tag of its own (keys.py), so the work of one table spreads over a Redis Cluster's
masters. An id's partition is the CRC-32 of its text in a queue entry (the digits of an integer
key, the hex of a text or binary key) modulo K: stable across processes, machines and restarts
(Python's hash() is not), and computed from the entry alone, so the dispatcher that pushes an
entry and the worker that acknowledges it always agree without asking anyone.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

from recheck.shared.core.entries import entry_key


def partition_of(entry: bytes, partitions: int) -> int:
    """The partition of an entry ``b"id:due_ms"`` (or of a bare id as entries spell it)."""
    if partitions == 1:
        return 0
    return zlib.crc32(entry_key(entry)) % partitions


def split_by_partition(entries: Iterable[bytes], partitions: int) -> dict[int, list[bytes]]:
    """partition -> its entries, each list in the order given (partitions with none are absent)."""
    if partitions == 1:
        listed = list(entries)
        return {0: listed} if listed else {}
    parts: dict[int, list[bytes]] = {}
    for entry in entries:
        parts.setdefault(partition_of(entry, partitions), []).append(entry)
    return parts


def rotation(start: int, partitions: int) -> Sequence[int]:
    """Every partition once, beginning at `start`: how a worker visits them without favouring any."""
    return [(start + step) % partitions for step in range(partitions)]


def reclaim_split(share: int, held: int, ways: int) -> int:
    """How many batches a dead worker's `share` of entries in one partition comes back as, when
    it held `held` in all: `ways` in all, each partition getting its proportion of them (at least
    one). Split `ways` in every partition, a batch of 500 over 16 partitions came back as 128
    batches of about 4, each a take and a write of its own, while the rows behind waited."""
    if share <= 0:
        return 0
    return min(share, ways, max(1, -(-ways * share // max(held, share))))
