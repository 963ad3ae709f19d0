"""`python -m recheck.dispatcher`: `recheck dispatcher`."""

import sys

from recheck.cli import main

raise SystemExit(main(["dispatcher", *sys.argv[1:]]))
