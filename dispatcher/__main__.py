"""`python -m dispatcher`: the same as `recheck dispatcher`."""

from dispatcher.service import main

raise SystemExit(main())
