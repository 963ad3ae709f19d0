"""`python -m recheck ...`: the same as the `recheck` command."""

from recheck.cli import main

raise SystemExit(main())
