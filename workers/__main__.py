"""`python -m workers [--concurrency C] [--batch B]`: the same as `recheck worker`."""

from workers.worker import main

raise SystemExit(main())
