"""Benchmark and soak tooling of a source checkout: never imported by the product, not in the image."""
