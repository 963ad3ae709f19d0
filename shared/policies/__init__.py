"""Policies: what a discipline decides, chosen once per workload (issue 46, item 1).

Pure, like shared/core (no I/O; imports only config and core). A role, an adapter or a view asks
the workload's policy a named question (`lifecycle_of(workload).looks_back`) instead of testing
the flag that chose it (`workload.once`), so a new kind is one module here and its tests.
"""
