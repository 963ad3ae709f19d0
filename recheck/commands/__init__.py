"""The `recheck` subcommands, one module each: its arguments, its help and what it runs
(recheck/cli.py builds the parser from their COMMANDS lists)."""
