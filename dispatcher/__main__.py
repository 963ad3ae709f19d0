"""`python -m dispatcher`: the same as `recheck dispatcher`."""

import sys

from shared.cli import main

raise SystemExit(main(["dispatcher", *sys.argv[1:]]))
