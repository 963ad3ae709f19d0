"""`python -m recheck.workers [--concurrency C] [--batch B] [--workloads NAMES]`: `recheck worker`."""

import sys

from recheck.cli import main

raise SystemExit(main(["worker", *sys.argv[1:]]))
