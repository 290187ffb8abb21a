"""The documentation stays true to the files it names.

``docs/layout.md`` has one line per module of the package, ``- `path` — purpose`` (a package's own
line, ending in ``/``, stands for its ``__init__.py``); it is checked against the files on disk
both ways. Every relative link in ``README.md`` and ``docs/**/*.md`` must lead to an existing file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "osmosis_ai"
LAYOUT = ROOT / "docs" / "layout.md"
ENTRY = re.compile(r"^- `([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def layout_entries() -> list[str]:
    """The path of every ``- `path` — purpose`` line of docs/layout.md, in order."""
    lines = LAYOUT.read_text(encoding="utf-8").splitlines()
    return [match.group(1) for line in lines if (match := ENTRY.match(line))]


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
    entries = layout_entries()
    listed = {path for path in entries if path.startswith(f"{PACKAGE}/")}
    actual = package_modules()
    problems = [f"missing (add a line): - `{path}` — <what it is for>" for path in sorted(actual - listed)]
    problems += [f"no such module (move or remove its line): `{path}`" for path in sorted(listed - actual)]
    problems += [f"listed twice: `{path}`" for path in sorted({p for p in entries if entries.count(p) > 1})]
    assert not problems, "docs/layout.md is out of date:\n" + "\n".join(problems)


def test_the_layout_names_the_top_level_directories() -> None:
    listed = set(layout_entries())
    for directory in ("osmosis_ai/", "docs/", "benchmarks/", "examples/", "scripts/", "tests/"):
        assert directory in listed, f"docs/layout.md has no line for `{directory}`"
        assert (ROOT / directory).is_dir(), f"docs/layout.md names `{directory}`, which does not exist"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def code_stripped(text: str) -> str:
    """The text without fenced code blocks or inline code, where brackets are not links."""
    text = re.sub(r"(?ms)^```.*?^```", "", text)
    return re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("document", documents(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_an_existing_file(document: Path) -> None:
    broken = []
    for target in LINK.findall(code_stripped(document.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # http(s), mailto: and anchors within the page
        path = target.split("#", 1)[0]
        if not (document.parent / path).exists():
            broken.append(target)
    assert not broken, f"{document.relative_to(ROOT)}: links to missing files: {broken}"
