"""``python -m osmosis_ai.cli`` runs the ``osmosis`` command line."""

import sys

from osmosis_ai.cli.main import main

sys.exit(main())
