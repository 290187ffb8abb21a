"""``python -m osmosis_ai`` runs the ``osmosis`` command line."""

import sys

from osmosis_ai.cli import main

sys.exit(main())
