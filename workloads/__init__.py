"""Benchmark workloads carried by the container images: ``python -m workloads.<name>``.

Each prints one JSON line of metrics on stdout; ``python -m workloads`` lists them.
Importing this package needs only the standard library.
"""
