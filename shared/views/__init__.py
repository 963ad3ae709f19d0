"""What the dashboard and the commands show, read from MySQL and Redis: freshness (status), one
row's story (rowstory), failing checks (failing). Never imports a process's machinery."""
