"""Install into the virtualenv whose python runs this script: ``python scripts/install.py ARGS``, where
ARGS are ``pip install``'s (``-c constraints.txt -e '.[all,dev]'``).

It installs with uv when it can (installed into the virtualenv by pip first): a fresh install of
every extra takes about a third of pip's time. uv reads no pip configuration, so the package sources
pip is configured with on this machine (its config files and ``PIP_*`` variables: index, extra
indexes, find-links, constraints) are handed to uv as flags, pip's way of picking a release kept
(the best match over every index). Where uv cannot be installed, pip installs as before.
"""

from __future__ import annotations

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


def main(arguments: list[str]) -> int:
    got_uv = subprocess.run([*PIP, "install", *QUIET, "--no-compile", "uv"], check=False).returncode == 0
    if got_uv:
        uv = [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", sys.executable]
        return subprocess.run([*uv, *uv_sources(), *arguments], check=False).returncode
    return subprocess.run([*PIP, "install", *QUIET, "--no-compile", *arguments], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
