"""The neutral core: recheck's domain values and pure rules, with no I/O.

It imports only recheck.shared.config and recheck.shared.errors (tests/unit/test_architecture.py
holds that): the queue entry and the key kinds (entries.py, keys.py), partition hashing
(partitions.py), limits arithmetic (limits.py), failure grouping and judging (failures.py), and
the typed records that cross a module or a process (records.py). The adapters (mysql/, redis/)
build on it, the roles on the adapters, the commands on the roles.
"""
