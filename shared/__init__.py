"""Code shared by every recheck process: configuration, SQL, Redis keys and scripts, the CLI."""
