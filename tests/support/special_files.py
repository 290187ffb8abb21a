"""The special files of :mod:`benchmarks.special_files` for tests: a character device that skips the
test with the reason when it cannot be made here."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.special_files import (
    FULL_DEVICE,
    NULL_DEVICE,
    FifoReader,
    make_char_device,
    still_char_device,
    symlink_to_file,
)

__all__ = ["FULL_DEVICE", "NULL_DEVICE", "FifoReader", "char_device", "still_char_device", "symlink_to_file"]


def char_device(path: Path, numbers: tuple[int, int] = NULL_DEVICE) -> Path:
    """A character device node at ``path`` (skips the test with the reason when it cannot be made)."""
    problem = make_char_device(path, numbers)
    if problem is not None:
        pytest.skip(problem)
    return path
