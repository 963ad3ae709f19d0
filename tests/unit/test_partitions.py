"""Which partition an id belongs to, and where each partition's keys live on a cluster."""

from __future__ import annotations

import zlib

import pytest
from redis.crc import key_slot

from recheck.shared.config import Workload
from recheck.shared.core.partitions import partition_of, reclaim_split, rotation, split_by_partition
from recheck.shared.redis.keys import Keys


def test_an_entry_and_its_bare_id_are_in_the_same_partition_by_crc32_of_the_id_text():
    assert partition_of(b"12345:1700000000000", 16) == zlib.crc32(b"12345") % 16
    assert partition_of(b"12345", 16) == partition_of(b"12345:1", 16)
    assert partition_of(b"-7:5", 16) == zlib.crc32(b"-7") % 16  # negative keys: their text
    assert partition_of(b"C3A9:5", 4) == zlib.crc32(b"C3A9") % 4  # hex of a text or binary key
    assert partition_of(b"99:1", 1) == 0


def test_split_keeps_each_partitions_order_and_covers_every_entry():
    entries = [b"%d:%d" % (i, 1000 + i) for i in range(1, 2001)]
    parts = split_by_partition(entries, 16)
    assert sorted(e for part in parts.values() for e in part) == sorted(entries)
    for index, part in parts.items():
        assert all(partition_of(e, 16) == index for e in part)
        assert part == sorted(part, key=entries.index)
    assert len(parts) == 16 and min(map(len, parts.values())) > 80  # about 125 each
    assert split_by_partition(entries, 1) == {0: entries}
    assert split_by_partition([], 4) == {}


def test_rotation_visits_every_partition_once_from_the_start():
    assert rotation(2, 4) == [2, 3, 0, 1]
    assert rotation(0, 1) == [0]


def test_partition_keys_share_a_tag_per_partition_and_spread_over_the_slot_space():
    settings = Workload(partitions=16, name="urls")
    every = Keys.every_partition(settings)
    slots = []
    for index, keys in enumerate(every):
        tag = keys.tag[1:-1]
        assert tag.startswith(f"recheck:urls/p{index}")
        slot = key_slot(keys.queue.encode())
        assert {key_slot(k.encode()) for k in (keys.inflight, keys.leader, keys.processing("w"))} == {slot}
        slots.append(slot)
    # Partition N in the N-th sixteenth of the slots: any 3 contiguous ranges get 5 or 6 each.
    assert [slot * 16 // 16384 for slot in slots] == list(range(16))
    assert len({k.tag for k in every}) == 16


def test_partition_tags_cannot_collide_with_a_workload_name():
    one = Keys.every_partition(Workload(partitions=2))
    assert all("/" in k.tag for k in one)  # '/' is not allowed in a workload name
    assert Keys.of(Workload()).tag == "{recheck}"  # unpartitioned keys as before


def test_a_partitioned_workload_needs_a_partition_named():
    with pytest.raises(ValueError, match="16 partitions"):
        Keys.of(Workload(partitions=16))


def test_a_dead_workers_entries_come_back_in_about_ways_batches_over_every_partition():
    assert reclaim_split(500, 500, 8) == 8  # one partition: as before
    assert reclaim_split(3, 3, 8) == 3  # never more batches than entries
    assert reclaim_split(0, 500, 8) == 0
    shares = [32] * 15 + [20]  # a batch of 500 over 16 partitions
    assert sum(reclaim_split(share, 500, 8) for share in shares) == 16  # not 128
    assert reclaim_split(250, 500, 8) == 4
    assert reclaim_split(12, 12, 8) == 8  # a poison id's group, alone in its partition next time
