"""Runnable benchmarks: ``python -m benchmarks.<name>``. Each reports ratios measured side by side."""
