"""Install packages: ``python scripts/install.py [--python PY] ARGS``, where ARGS are ``pip install``'s
(``-c constraints.txt -e '.[all,dev]'``, ``--target DIR fastmcp==2.3``) and PY is the interpreter whose
environment gets them (by default the one running this script).

It installs with uv when it can (installed into the virtualenv running this script by pip, once): a
fresh install of every extra takes about a third of pip's time, and 0.3.8's environment for the interop
tests a tenth. uv reads no pip configuration, so the package sources pip is configured with on this
machine (its config files and ``PIP_*`` variables: index, extra indexes, find-links, constraints) are
handed to uv as flags, pip's way of picking a release kept (the best match over every index). Where uv
cannot be installed, PY's own pip installs as before.
"""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys

PIP = [sys.executable, "-m", "pip"]
QUIET = ["-q", "--disable-pip-version-check"]

# pip's configuration key -> uv's flag (once per value).
FLAGS = {
    "index-url": "--default-index",
    "extra-index-url": "--index",
    "find-links": "--find-links",
    "constraint": "--constraint",
}


def uv_sources() -> list[str]:
    """uv's flags for the package sources pip is configured with here."""
    listed = subprocess.run([*PIP, "config", "list"], capture_output=True, text=True, check=False).stdout
    sources: dict[
        tuple[str, str], None
    ] = {}  # in order, each once (a setting may be in a file and a variable)
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        flag = FLAGS.get(key.rsplit(".", 1)[-1])
        if flag is not None:
            for item in shlex.split(value.strip().strip("'\"")):
                sources[flag, item] = None
    return ["--index-strategy", "unsafe-best-match", *(part for source in sources for part in source)]


def has_uv() -> bool:
    """Whether uv can be run from this virtualenv, installing it first if it is not there."""
    if importlib.util.find_spec("uv") is not None:
        return True
    return subprocess.run([*PIP, "install", *QUIET, "--no-compile", "uv"], check=False).returncode == 0


def main(arguments: list[str]) -> int:
    python = sys.executable
    if arguments[:1] == ["--python"]:
        python, arguments = arguments[1], arguments[2:]
    if has_uv():
        uv = [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", python]
        return subprocess.run([*uv, *uv_sources(), *arguments], check=False).returncode
    pip = [python, "-m", "pip", "install", *QUIET, "--no-compile"]
    return subprocess.run([*pip, *arguments], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
