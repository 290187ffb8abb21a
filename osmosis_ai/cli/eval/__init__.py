"""The parts of ``osmosis eval`` (the command itself is :mod:`osmosis_ai.cli.commands.eval`):
:mod:`.samples` runs the samples, :mod:`.report` prints the summaries and writes the output files,
:mod:`.cache` is ``osmosis eval cache dir|ls|rm``."""
