"""Redis: the client for one server or a cluster (connection), every key name (keys), which
partition an id is in (partitions), and every script call and plain read or write of recheck's
keys (store + lua/). Never imports the MySQL side."""
