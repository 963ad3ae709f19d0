"""`python -m recheck.workers [--concurrency C] [--batch B]`: the same as `recheck worker`."""

from recheck.workers.worker import main

raise SystemExit(main())
