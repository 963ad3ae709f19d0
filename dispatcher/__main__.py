"""`python -m recheck.dispatcher`: the same as `recheck dispatcher`."""

from recheck.dispatcher.service import main

raise SystemExit(main())
