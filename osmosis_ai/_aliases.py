"""Serving osmosis-ai 0.2's import paths at no cost until one is used: a ``sys.meta_path`` finder that
imports the alias table (:mod:`osmosis_ai._compat`) only when a module no file provides is asked
for. Standard library only: ``import osmosis_ai`` installs it.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported: `import osmosis_ai` installs this module
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType


class LazyAliasFinder:
    """A ``sys.meta_path`` finder for osmosis-ai 0.2's import paths that costs nothing until one is used.

    Last on ``sys.meta_path``, it is asked only for modules no file provides; for those under
    ``osmosis_ai`` it defers to :class:`osmosis_ai._compat.AliasFinder`, importing the alias table
    then, so ``import osmosis_ai`` does not load it.
    """

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith("osmosis_ai."):
            return None
        from osmosis_ai._compat import AliasFinder

        return AliasFinder.find_spec(fullname, path, target)


def install_alias_finder() -> None:
    """Append :class:`LazyAliasFinder` to ``sys.meta_path``, once."""
    if LazyAliasFinder not in sys.meta_path:
        sys.meta_path.append(LazyAliasFinder)
