"""A four-function calculator agent: the bundled example for ``osmosis serve`` and the benchmarks.

Run it with ``osmosis serve --local -m examples.calculator.agent:agent_loop``.
"""
