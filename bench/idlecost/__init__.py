"""`recheck bench --mode idle`: what an idle deployment costs (bench/idlecost/idle.py)."""
