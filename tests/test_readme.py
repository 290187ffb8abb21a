"""The README's layout section names every module of the package, and nothing that does not exist.

The section is a tree in a ``text`` code block: two spaces of indent per level, a directory ends
with ``/``, and each entry's name is the first word of its line (the rest is its purpose). A
package's own line stands for its ``__init__.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "osmosis_ai"


def layout_tree() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```text\n(.*?)```", section, re.DOTALL)
    assert match, "the Layout section has no ```text tree"
    return match.group(1).splitlines()


def listed_paths(lines: list[str]) -> set[str]:
    """Every entry of the tree as a path (directories keep their trailing ``/``)."""
    paths: set[str] = set()
    parents: list[str] = []  # the directory at each indent level above the current line
    for line in lines:
        stripped = line.lstrip(" ")
        if not stripped:
            continue
        indent = len(line) - len(stripped)
        name = stripped.split()[0]
        level = indent // 2
        if indent % 2 or level > len(parents) or not name.endswith(("/", ".py")):
            continue  # a continuation of the purpose on the line above
        del parents[level:]
        path = "".join(parents) + name
        paths.add(path)
        if name.endswith("/"):
            parents.append(name)
    return paths


def package_modules() -> set[str]:
    modules = set()
    for file in (ROOT / PACKAGE).rglob("*.py"):
        relative = file.relative_to(ROOT).as_posix()
        if file.name == "__init__.py":
            modules.add(relative[: -len("__init__.py")])  # the package's own line
        else:
            modules.add(relative)
    return modules


def test_every_module_of_the_package_is_in_the_layout() -> None:
    listed = {path for path in listed_paths(layout_tree()) if path.startswith(f"{PACKAGE}/")}
    actual = package_modules()
    missing, stale = sorted(actual - listed), sorted(listed - actual)
    assert not missing, f"modules missing from the README's layout section: {missing}"
    assert not stale, f"the README's layout section names modules that do not exist: {stale}"


def test_the_layout_names_the_top_level_directories() -> None:
    listed = listed_paths(layout_tree())
    for directory in ("osmosis_ai/", "docs/", "benchmarks/", "examples/", "scripts/", "tests/"):
        assert directory in listed
        assert (ROOT / directory).is_dir()
