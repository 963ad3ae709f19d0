"""The dispatcher role: select due rows, push their ids to Redis, run the reconciler jobs."""
