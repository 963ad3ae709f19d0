"""Code shared by every recheck process: configuration (config) and outage bookkeeping (outage) at
the top, then by topic: mysql/, redis/, process/ (what every process is made of) and views/
(what the dashboard and commands show)."""
