"""The Ray tests' xdist groups: those on the module's shared local Ray (``ray_session``) in two
groups, each worker of which starts its own, and those that start a Ray of their own in a third, so
the three run side by side instead of one after another on one worker (they are the suite's longest
chain)."""

from __future__ import annotations

import pytest

SHARED_GROUPS = ("ray-a", "ray-b")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    shared = 0
    for item in items:
        if not item.nodeid.startswith("tests/runs/test_ray_backend.py::"):
            continue
        if "ray_session" in getattr(item, "fixturenames", ()):
            group = SHARED_GROUPS[shared % len(SHARED_GROUPS)]
            shared += 1
        else:
            group = "ray-own"
        item.add_marker(pytest.mark.xdist_group(group))
