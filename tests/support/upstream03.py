"""Upstream osmosis-ai 0.3.8 in a Python 3.12 virtualenv of its own, for the 0.3 interop tests.

``python -m tests.support.upstream03`` (a step of ``make test``) creates ``.venv-upstream03/`` in
the repository root with a Python 3.12 it finds — ``$PYENV_ROOT/versions/3.12*`` (or
``~/.pyenv``), else ``python3.12`` on ``PATH`` — and installs ``osmosis-ai[server]==0.3.8`` from
the package index into it (``scripts/install.py``: with uv where it can), unless a marker file says that was done; it prints the virtualenv's
python. Upstream needs Python >= 3.12, so without one the interop tests are skipped (with the
reason); never vendored, never imported by this package.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-upstream03"
REQUIREMENT = "osmosis-ai[server]==0.3.8"
_MARKER = VENV / ".installed"
_LOCK = REPO / ".venv-upstream03.lock"


class InstallError(RuntimeError):
    """The virtualenv could not be made (its install failed: offline, no such release, ...)."""


def _version_key(path: Path) -> tuple[int, ...]:
    parts = path.parents[1].name.split(".")
    return tuple(int(part) if part.isdigit() else -1 for part in parts)


def find_python(version: str = "3.12") -> Path | None:
    """A Python ``version`` (``"3.12"``) interpreter on this machine, or ``None``."""
    roots = [Path(os.environ["PYENV_ROOT"])] if os.environ.get("PYENV_ROOT") else []
    roots.append(Path.home() / ".pyenv")
    for root in roots:
        found = sorted((root / "versions").glob(f"{version}.*/bin/python"), key=_version_key)
        if found:
            return found[-1]
    on_path = shutil.which(f"python{version}")
    if on_path is None:
        return None
    probe = subprocess.run([on_path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True)  # fmt: skip
    return Path(on_path) if probe.stdout.strip() == version else None


def python() -> Path:
    """The virtualenv's python, where upstream 0.3.8 is installed."""
    return VENV / "bin" / "python"


def ensure() -> Path | None:
    """The virtualenv's python, made and installed first when missing; ``None`` without a Python 3.12.

    Processes calling it at once (pytest-xdist workers on a fresh clone) take turns on a lock file, so
    one installs and the others find its marker.
    """
    if _MARKER.is_file():
        return python()
    with _LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return python() if _MARKER.is_file() else _install()


def _install() -> Path | None:
    base = find_python()
    if base is None:
        return None
    if not python().is_file():
        # uv's virtualenv has no pip, which scripts/install.py needs only where there is no uv
        if find_spec("uv") is not None:
            venv = [sys.executable, "-m", "uv", "venv", "-q", "--python", str(base), str(VENV)]
        else:
            venv = [str(base), "-m", "venv", str(VENV)]
        made = subprocess.run(venv, capture_output=True, text=True)
        if made.returncode != 0:
            raise InstallError(f"making the virtualenv {VENV} failed: {made.stderr.strip()[-500:]}")
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "install.py"), "--python", str(python()), REQUIREMENT],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        raise InstallError(f"installing {REQUIREMENT} failed: {done.stderr.strip()[-500:]}")
    _MARKER.write_text(REQUIREMENT + "\n")
    return python()


if __name__ == "__main__":
    try:
        made = ensure()
    except InstallError as exc:
        sys.exit(f"upstream 0.3.8 not installed: {exc}")
    print(made or "no Python 3.12 found (pyenv or python3.12 on PATH); the 0.3 interop tests will be skipped")
