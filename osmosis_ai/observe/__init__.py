"""Figures and traces for the stacks people run: Prometheus metrics of the rollout server
(:mod:`~osmosis_ai.observe.metrics`), OpenTelemetry spans (:mod:`~osmosis_ai.observe.tracing`) and
experiment loggers for runs (:mod:`~osmosis_ai.observe.loggers`).

Each tool is an optional extra and is imported on first use only: importing this package loads
none of them.
"""
