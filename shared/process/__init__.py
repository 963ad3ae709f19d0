"""What every recheck process shares: the poll loop that survives outages (loop), how it starts
(launch, logs), its heartbeat (presence, health) and its metrics."""
