"""The sandbox tests need bubblewrap; without it (and only then) they are skipped, saying so. The
remote tiers' tests (test_remote.py, against a stand-in provider) need none and always run."""

from __future__ import annotations

import shutil

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if shutil.which("bwrap") is not None:
        return
    skip = pytest.mark.skip(reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    for item in items:
        if "tests/sandbox/" in str(item.fspath) and not str(item.fspath).endswith("test_remote.py"):
            item.add_marker(skip)
