"""The `recheck` command: parses arguments and runs the roles, the local supervisor and tools."""
