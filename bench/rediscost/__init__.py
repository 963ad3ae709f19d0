"""What recheck's Redis scripts cost: per id in each hot script (`--mode scripts`) and per take as
the number of groups grows (`--mode groups`), with the Lua those measurements run beside them."""
