"""The oldest fastmcp that the ``mcp`` extra allows, installed once beside the project's virtualenv.

``python -m tests.support.fastmcp_oldest`` (a step of ``make test``) installs it with ``--target``
(``scripts/install.py``: uv where it can) into ``.venv/fastmcp-<version>/`` unless that directory is already complete, and prints its path; a
second run only checks a marker file. A test puts the directory first on ``PYTHONPATH`` of a
subprocess, so the MCP tests also run against that version, while the virtualenv keeps the newest.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_LOWER_BOUND = re.compile(r'"fastmcp>=([0-9][0-9.]*)')
_MARKER = ".complete"


class InstallError(RuntimeError):
    """The oldest fastmcp could not be installed (offline, no such release for this Python)."""


def oldest_allowed() -> str:
    """The lower bound of fastmcp in pyproject.toml's ``mcp`` extra."""
    found = _LOWER_BOUND.search((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    if found is None:
        raise InstallError("pyproject.toml has no 'fastmcp>=VERSION' requirement")
    return found.group(1)


def ensure() -> Path:
    """The directory holding the oldest allowed fastmcp and its dependencies, installed if missing."""
    version = oldest_allowed()
    target = REPO / ".venv" / f"fastmcp-{version}"
    if (target / _MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".fastmcp-{version}-", dir=target.parent))
    try:
        done = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "install.py"), "--target", str(staging), f"fastmcp=={version}"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if done.returncode != 0:
            raise InstallError(f"installing fastmcp=={version} failed: {done.stderr.strip()[-500:]}")
        (staging / _MARKER).write_text(version)
        if not (target / _MARKER).is_file():  # another run may have finished first
            shutil.rmtree(target, ignore_errors=True)
            os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


if __name__ == "__main__":
    try:
        print(ensure())
    except InstallError as exc:
        print(f"fastmcp {oldest_allowed()} not installed ({exc}); the oldest-fastmcp test will be skipped")
