"""One module per ``osmosis`` sub-command: ``add_arguments(parser)`` and ``run(args) -> int``."""
