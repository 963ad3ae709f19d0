"""`python -m bench ...`: the same as `recheck bench ...`."""

from bench.compare import main

raise SystemExit(main())
