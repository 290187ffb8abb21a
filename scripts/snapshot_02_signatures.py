"""Write the parameter names of osmosis-ai 0.2's public callables to a JSON fixture.

Run by hand, not by CI, against a 0.2 release: its sdist or wheel, or a source tree (the
directory holding ``osmosis_ai/``). The fixture is 0.2.17's, which the package index does not
carry: take its tree from the upstream repository (github.com/Osmosis-AI/osmosis-sdk-python) at
the tag ``v0.2.17`` (commit cd01d1c2b68fce081ad997738242d1cff3127c2f)::

    git clone --bare https://github.com/Osmosis-AI/osmosis-sdk-python /tmp/osmosis-sdk.git
    mkdir /tmp/osmosis-0.2.17
    git --git-dir=/tmp/osmosis-sdk.git archive v0.2.17 | tar -x -C /tmp/osmosis-0.2.17
    python scripts/snapshot_02_signatures.py /tmp/osmosis-0.2.17 --out tests/data/signatures_0_2.json

The source is read with ``ast`` and never imported, so the old release's dependencies need not
be installed. ``tests/test_signatures.py`` compares the fixture with this package.

Output: ``{"module:Qualname": ["param", ...]}``, sorted by key. Public means "no leading
underscore" for the module file, the class, the function and the method. Each entry lists:

* positional parameters in order (``self``/``cls`` dropped from methods), then ``"/"`` if some
  were positional-only;
* ``"*name"`` for a ``*args`` parameter, or a bare ``"*"`` before keyword-only parameters;
* keyword-only parameter names;
* ``"**name"`` for a ``**kwargs`` parameter.

A class entry describes its constructor: its own ``__init__``, else the fields of a dataclass
(positional) or a pydantic model (keyword-only, private ``_fields`` left out), else the
constructor it inherits from a class in the same module, else none (``[]``) for a class with no
base but ``object`` or ``ABC``, else ``*args`` for one deriving from a built-in exception. Classes
whose constructor comes from elsewhere (enums, protocols, typed dicts, another module's classes)
get no class entry, only their methods. Properties and dunder methods are left out; pydantic validators are methods like any
other. A base imported under another name (``BaseSettings as _BaseSettings``) counts as itself.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import json
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# The public modules of 0.2, as paths below osmosis_ai/. Directories are walked for every
# public .py file below them.
PUBLIC_MODULES = (
    "utils.py",
    "rubric_eval.py",
    "rubric_types.py",
    "cli.py",
    "cli_commands.py",
    "cli_services",
    "auth",
    "rollout/core/base.py",
    "rollout/core/schemas.py",
    "rollout/core/exceptions.py",
    "rollout/core/llm_client.py",
    "rollout/client.py",
    "rollout/config/settings.py",
    "rollout/server/app.py",
    "rollout/server/serve.py",
    "rollout/server/state.py",
    "rollout/server/api_key.py",
    "rollout/server/registration.py",
    "rollout/validator.py",
    "rollout/registry.py",
    "rollout/network.py",
    "rollout/tools.py",
    "rollout/utils.py",
    "rollout/testing.py",
    "rollout/console.py",
    "rollout/cli.py",
    "rollout/cli_utils.py",
    "rollout/mcp",
    "rollout/eval",
)

MODEL_BASES = {"BaseModel", "BaseSettings"}

# Attribute-like methods. Pydantic validators stay: they are methods users can call by name.
SKIPPED_DECORATORS = {"property", "setter", "getter", "deleter", "cached_property"}


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    names = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute):
            names.add(target.attr)
        elif isinstance(target, ast.Name):
            names.add(target.id)
    return names


def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for base in node.bases:
        if isinstance(base, ast.Attribute):
            names.append(base.attr)
        elif isinstance(base, ast.Name):
            names.append(base.id)
    return names


def _is_builtin_exception(name: str) -> bool:
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


def function_params(node: ast.FunctionDef | ast.AsyncFunctionDef, *, bound: bool) -> list[str]:
    """The parameter list of one def; ``bound`` drops the leading self/cls."""
    args = node.args
    positional = [a.arg for a in args.posonlyargs] + [a.arg for a in args.args]
    if bound and positional:
        positional = positional[1:]
    out = list(positional)
    if args.posonlyargs and len(args.posonlyargs) > (1 if bound else 0):
        out.insert(len(args.posonlyargs) - (1 if bound else 0), "/")
    if args.vararg is not None:
        out.append("*" + args.vararg.arg)
    elif args.kwonlyargs:
        out.append("*")
    out.extend(a.arg for a in args.kwonlyargs)
    if args.kwarg is not None:
        out.append("**" + args.kwarg.arg)
    return out


def _is_classvar(annotation: ast.expr) -> bool:
    text = ast.unparse(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _init_false(value: ast.expr | None) -> bool:
    if not isinstance(value, ast.Call):
        return False
    return any(
        kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False
        for kw in value.keywords
    )


def _fields(node: ast.ClassDef, *, keep_private: bool) -> list[str]:
    names = []
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        if _is_classvar(stmt.annotation) or _init_false(stmt.value):
            continue
        if not keep_private and stmt.target.id.startswith("_"):
            continue
        names.append(stmt.target.id)
    return names


class ModuleScanner:
    """Collects the entries of one module."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.entries: dict[str, list[str]] = {}
        self.constructors: dict[str, list[str] | None] = {}
        self.kinds: dict[str, str] = {}
        self.imported_as: dict[str, str] = {}

    def scan(self, tree: ast.Module) -> None:
        for stmt in self._top_level(tree.body):
            if isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if alias.asname is not None:
                        self.imported_as.setdefault(alias.asname, alias.name)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not stmt.name.startswith("_"):
                    self._add(stmt.name, function_params(stmt, bound=False))
            elif isinstance(stmt, ast.ClassDef):
                self._class(stmt)

    def _top_level(self, body: list[ast.stmt]) -> list[ast.stmt]:
        # Definitions guarded by ``if``/``try`` (optional dependencies) still count; the
        # first definition of a name wins.
        out: list[ast.stmt] = []
        for stmt in body:
            if isinstance(stmt, ast.If):
                out.extend(self._top_level(stmt.body))
                out.extend(self._top_level(stmt.orelse))
            elif isinstance(stmt, ast.Try):
                out.extend(self._top_level(stmt.body))
                for handler in stmt.handlers:
                    out.extend(self._top_level(handler.body))
                out.extend(self._top_level(stmt.orelse))
            else:
                out.append(stmt)
        return out

    def _add(self, qualname: str, params: list[str]) -> None:
        self.entries.setdefault(f"{self.module}:{qualname}", params)

    def _class(self, node: ast.ClassDef) -> None:
        if node.name in self.constructors:
            return
        bases = [self.imported_as.get(base, base) for base in _base_names(node)]
        init = None
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "__init__":
                init = function_params(stmt, bound=True)
        kind = "plain"
        if "dataclass" in _decorator_names(node):
            kind = "dataclass"
        elif any(b in MODEL_BASES or self.kinds.get(b) == "model" for b in bases):
            kind = "model"
        self.kinds[node.name] = kind
        inherited: list[str] | None = None
        for base in bases:
            if self.constructors.get(base) is not None:
                inherited = self.constructors[base]
                break
        if init is not None:
            ctor: list[str] | None = init
        elif kind == "dataclass":
            parent = [p for p in inherited or [] if p != "*"]
            ctor = parent + _fields(node, keep_private=True)
        elif kind == "model":
            parent = [p for p in inherited or [] if p != "*"]
            fields = parent + _fields(node, keep_private=False)
            ctor = ["*", *fields] if fields else []
        elif inherited is not None:
            ctor = inherited
        elif set(bases) <= {"object", "ABC"}:
            ctor = []
        elif any(_is_builtin_exception(base) for base in bases):
            ctor = ["*args"]
        else:
            ctor = None
        self.constructors[node.name] = ctor
        if node.name.startswith("_"):
            return
        if ctor is not None:
            self._add(node.name, ctor)
        for stmt in node.body:
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or stmt.name.startswith("_"):
                continue
            decorators = _decorator_names(stmt)
            if decorators & SKIPPED_DECORATORS:
                continue
            bound = "staticmethod" not in decorators
            self._add(f"{node.name}.{stmt.name}", function_params(stmt, bound=bound))


def module_files(package: Path) -> list[Path]:
    files: list[Path] = []
    for entry in PUBLIC_MODULES:
        path = package / entry
        if path.is_dir():
            files.extend(sorted(path.rglob("*.py")))
        elif path.is_file():
            files.append(path)
    public = []
    for path in files:
        parts = path.relative_to(package).parts
        if any(part.startswith("_") for part in parts):
            continue
        public.append(path)
    return public


def module_name(package: Path, path: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts)


def _package_root(root: Path) -> Path:
    """The directory holding ``osmosis_ai/``: ``root`` itself, or its one sub-directory (an sdist)."""
    if (root / "osmosis_ai").is_dir():
        return root
    below = [child for child in root.iterdir() if (child / "osmosis_ai").is_dir()]
    if len(below) != 1:
        raise SystemExit(f"no osmosis_ai/ package in {root}")
    return below[0]


def snapshot_release(release: Path) -> dict[str, list[str]]:
    """:func:`snapshot` of a source tree, an sdist (``.tar.gz``) or a wheel (``.whl``)."""
    if release.is_dir():
        return snapshot(_package_root(release))
    with tempfile.TemporaryDirectory(prefix="osmosis-0.2-") as scratch:
        if release.suffix in (".whl", ".zip"):
            with zipfile.ZipFile(release) as archive:
                archive.extractall(scratch)
        elif release.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(release) as archive:
                archive.extractall(scratch, filter="data")
        else:
            raise SystemExit(f"{release}: expected a source tree, an sdist (.tar.gz) or a wheel (.whl)")
        return snapshot(_package_root(Path(scratch)))


def snapshot(root: Path) -> dict[str, list[str]]:
    package = root / "osmosis_ai"
    if not package.is_dir():
        raise SystemExit(f"no osmosis_ai/ package below {root}")
    entries: dict[str, list[str]] = {}
    for path in module_files(package):
        scanner = ModuleScanner(module_name(package, path))
        scanner.scan(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        entries.update(scanner.entries)
    return dict(sorted(entries.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", type=Path, help="0.2 sdist, wheel or unpacked source tree")
    parser.add_argument("--out", type=Path, default=None, help="JSON file to write (default: stdout)")
    args = parser.parse_args(argv)
    entries = snapshot_release(args.release)
    # One entry a line, so that a regenerated fixture diffs line by line.
    lines = [f"  {json.dumps(key)}: {json.dumps(params)}" for key, params in entries.items()]
    text = "{\n" + ",\n".join(lines) + "\n}\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
