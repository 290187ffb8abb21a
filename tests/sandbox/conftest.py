"""The sandbox tests need bubblewrap; without it (and only then) they are skipped, saying so. The
remote tiers' tests (test_remote.py and test_modal.py, against stand-in providers) need none. The local
tier's tests run on one xdist worker, one after another, since some count the sandbox processes left."""

from __future__ import annotations

import shutil

import pytest

REMOTE = ("test_remote.py", "test_modal.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    local = [
        item
        for item in items
        if "tests/sandbox/" in str(item.fspath) and not str(item.fspath).endswith(REMOTE)
    ]
    if shutil.which("bwrap") is not None:
        for item in local:  # one worker: the counts of sandbox processes left see no other test's
            item.add_marker(pytest.mark.xdist_group("sandbox"))
        return
    skip = pytest.mark.skip(reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    for item in local:
        item.add_marker(skip)
