"""`python -m workers [--concurrency C] [--batch B]`: the same as `recheck worker`."""

import sys

from shared.cli import main

raise SystemExit(main(["worker", *sys.argv[1:]]))
