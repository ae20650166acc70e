"""Benchmarks (not tests): run them by hand, e.g. `python -m bench.bench_authorize`."""
