"""Where a run's work items run besides this process: :mod:`~osmosis_ai.runs.backends.ray` (Ray actors)."""
