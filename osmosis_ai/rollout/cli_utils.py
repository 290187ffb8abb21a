"""A compatibility import path: ``MODULE:ATTR`` loading and the error it raises live in
:mod:`osmosis_ai.cli.loading`; this module re-exports that module's public names."""

from osmosis_ai.cli.loading import *  # noqa: F403
from osmosis_ai.cli.loading import __all__ as __all__
