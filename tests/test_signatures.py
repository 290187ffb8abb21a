"""Every public 0.2 callable still accepts the calls 0.2 accepted.

``tests/data/signatures_0_2.json`` lists the parameter names of osmosis-ai 0.2's public
functions, methods and constructors (written by ``scripts/snapshot_02_signatures.py``). For each
entry this test imports our object and checks, with ``inspect.signature``:

* positional parameters: 0.2's come first in ours, in the same order and with the same names,
  so positional calls bind the same way and keyword calls find the same names;
* keyword-only parameters: each 0.2 name is accepted by keyword in ours;
* ``*args`` / ``**kwargs``: where 0.2 had one, ours has one too; their own names do not matter,
  since no call can spell them. A ``**kwargs`` in ours does not stand in for a named 0.2
  parameter: the name must exist, or a misspelt call would be swallowed silently;
* anything ours adds must have a default, so no 0.2 call lacks an argument.

The 0.2 callables this release leaves out or shapes differently on purpose are :data:`DIFFERS`,
each documented in docs/compatibility.md; their entries are expected to fail, so one that starts
matching must leave the list.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

FIXTURE = Path(__file__).parent / "data" / "signatures_0_2.json"
COMPATIBILITY_DOC = Path(__file__).parents[1] / "docs" / "compatibility.md"

ENTRIES: dict[str, list[str]] = json.loads(FIXTURE.read_text(encoding="utf-8"))

# The 0.2 signatures this release does not match on purpose, each in docs/compatibility.md's table
# of them (where the key, without its ``*``, is written out). A key is a fixture key, or ends in
# ``*`` and covers every key it begins (a module's names, a class and its methods).
DIFFERS: dict[str, str] = {
    "osmosis_ai.cli_services.engine:*": "eval-rubric's insides, replaced by its concurrent engine",
    "osmosis_ai.cli_services.reporting:*": "eval-rubric's insides: its reports are written by the command",
    "osmosis_ai.cli_services.session:*": "eval-rubric's insides: the command runs the session",
    "osmosis_ai.cli_services.shared:*": "eval-rubric's insides: statistics and previews of its reports",
    "osmosis_ai.cli_commands:EvalRubricCommand": "command objects take no injected collaborators",
    "osmosis_ai.cli_commands:PreviewCommand": "command objects take no injected collaborators",
    "osmosis_ai.cli_commands:WhoamiCommand.run": "run(args) like every command object, not run(_args)",
    "osmosis_ai.rollout.eval.common.cli:*": "osmosis test/eval's helpers, replaced by their flags",
    "osmosis_ai.rollout.eval.common.runner:LocalRolloutRunner*": "the run engine's InProcessExecutor",
    "osmosis_ai.rollout.eval.common.runner:LocalRunResult": "the run engine's Result, with an outcome",
    "osmosis_ai.rollout.eval.common.runner:LocalBatchResult": "the run engine's results and summary",
    "osmosis_ai.rollout.eval.common.runner:LocalLLMClientProtocol*": "the run engine's model client",
    "osmosis_ai.rollout.eval.evaluation.runner:*": "osmosis eval with its journal",
    "osmosis_ai.rollout.eval.evaluation.report:format_eval_report": "osmosis_ai.runs.summary",
    "osmosis_ai.rollout.eval.test_mode.runner:*": "the run engine's InProcessExecutor",
    "osmosis_ai.rollout.eval.test_mode.interactive:InteractiveRunner*": "osmosis test -i",
}


def _covers(known: str, key: str) -> bool:
    return key.startswith(known[:-1]) if known.endswith("*") else key == known


def _differs(key: str) -> str | None:
    """Why ``key`` is in :data:`DIFFERS`, else ``None``."""
    return next((reason for known, reason in DIFFERS.items() if _covers(known, key)), None)


def _resolve(key: str) -> tuple[Any, bool]:
    """Our object for ``module:Qual.name`` and whether its first parameter is self/cls."""
    module_name, qualname = key.split(":", 1)
    owner: Any = importlib.import_module(module_name)
    parts = qualname.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    name = parts[-1]
    if not inspect.isclass(owner):
        return getattr(owner, name), False
    raw = inspect.getattr_static(owner, name)
    if isinstance(raw, staticmethod):
        return raw.__func__, False
    if isinstance(raw, classmethod):
        return raw.__func__, True
    return raw, inspect.isfunction(raw)


def _parameters(obj: Any, bound: bool) -> list[inspect.Parameter]:
    try:
        params = list(inspect.signature(obj).parameters.values())
    except ValueError:
        # An exception class without an __init__ of its own is constructed as BaseException is.
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            return [inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)]
        raise
    return params[1:] if bound else params


class Expected:
    """One fixture entry, parsed."""

    def __init__(self, params: list[str]) -> None:
        self.positional: list[str] = []
        self.keyword_only: list[str] = []
        self.var_positional = False
        self.var_keyword = False
        keyword_only = False
        for item in params:
            if item == "/":
                continue
            if item == "*":
                keyword_only = True
            elif item.startswith("**"):
                self.var_keyword = True
            elif item.startswith("*"):
                self.var_positional = True
                keyword_only = True
            elif keyword_only:
                self.keyword_only.append(item)
            else:
                self.positional.append(item)


def mismatches(obj: Any, params: list[str], *, bound: bool = False) -> list[str]:
    """What a 0.2 call with parameters ``params`` would trip over in ``obj`` (empty when compatible)."""
    ours = _parameters(obj, bound)
    want = Expected(params)
    problems: list[str] = []

    kinds = inspect.Parameter
    positional = [p for p in ours if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    by_keyword = {p.name for p in ours if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)}
    has_var_positional = any(p.kind is kinds.VAR_POSITIONAL for p in ours)
    has_var_keyword = any(p.kind is kinds.VAR_KEYWORD for p in ours)

    ours_positional = [p.name for p in positional[: len(want.positional)]]
    if ours_positional != want.positional and not (has_var_positional and not positional):
        problems.append(f"positional parameters {ours_positional} != 0.2's {want.positional}")
    for name in want.positional + want.keyword_only:
        if name not in by_keyword:
            problems.append(f"{name!r} is not accepted by keyword")
    if want.var_positional and not has_var_positional:
        problems.append("0.2 took *args")
    if want.var_keyword and not has_var_keyword:
        problems.append("0.2 took **kwargs")
    known = set(want.positional) | set(want.keyword_only)
    for p in ours:
        if p.kind in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD) or p.name in known:
            continue
        if p.default is inspect.Parameter.empty:
            problems.append(f"new parameter {p.name!r} has no default")
    return problems


def _case(key: str, params: list[str]) -> Any:
    reason = _differs(key)
    marks = [] if reason is None else [pytest.mark.xfail(strict=True, reason=f"documented: {reason}")]
    return pytest.param(key, params, id=key, marks=marks)


@pytest.mark.parametrize(("key", "params"), [_case(key, params) for key, params in ENTRIES.items()])
def test_signature_matches_0_2(key: str, params: list[str]) -> None:
    try:
        obj, bound = _resolve(key)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"{key}: not provided ({exc})")
    problems = mismatches(obj, params, bound=bound)
    assert not problems, f"{key}: {problems}"


def test_every_documented_difference_is_a_0_2_signature_and_in_the_docs() -> None:
    documented = COMPATIBILITY_DOC.read_text(encoding="utf-8")
    for known in DIFFERS:
        assert any(_covers(known, key) for key in ENTRIES), f"{known} names no 0.2 signature"
        written = known.rstrip("*").rstrip(":")
        assert f"`{written}`" in documented, f"{written} is not in docs/compatibility.md's table"


def test_0_2_keyword_calls_work() -> None:
    from osmosis_ai.rollout import AgentLoopRegistry, RolloutAgentLoop
    from osmosis_ai.rollout.core.schemas import OpenAIFunctionCallSchema, OpenAIFunctionParsedSchema
    from osmosis_ai.rollout.network import validate_ipv4
    from osmosis_ai.rollout.registry import register_agent_loop, unregister_agent_loop
    from osmosis_ai.rollout.server.api_key import validate_api_key
    from osmosis_ai.rollout.testing import RolloutCompletionTracker
    from osmosis_ai.rollout.tools import serialize_tool_result
    from osmosis_ai.rollout.utils import parse_tool_calls

    class Named(RolloutAgentLoop):
        name = "signature-test-loop"

        def get_tools(self, request: Any) -> list[Any]:
            return []

        async def run(self, ctx: Any) -> Any:
            return ctx.complete([])

    AgentLoopRegistry().register(loop=Named())
    register_agent_loop(loop=Named())
    assert unregister_agent_loop(name="signature-test-loop")
    assert serialize_tool_result(result=2) == "2"
    assert parse_tool_calls(assistant_message={"tool_calls": None}) == []
    assert validate_ipv4(ip="192.0.2.1")
    assert validate_api_key(provided_key="k", expected_key="k")
    parsed = OpenAIFunctionParsedSchema(name="add", arguments='{"a": 1}')
    call, failed = OpenAIFunctionCallSchema.from_openai_function_parsed_schema(parsed_schema=parsed)
    assert (call.arguments, failed) == ({"a": 1}, False)
    tracker = RolloutCompletionTracker()
    tracker.record(response={"rollout_id": "r"})
    assert tracker.responses == [{"rollout_id": "r"}]


def test_fixture_covers_the_documented_modules() -> None:
    modules = {key.split(":", 1)[0] for key in ENTRIES}
    for module in (
        "osmosis_ai.rollout.registry",
        "osmosis_ai.rollout.tools",
        "osmosis_ai.rollout.utils",
        "osmosis_ai.rollout.testing",
        "osmosis_ai.rollout.network",
        "osmosis_ai.rollout.server.api_key",
        "osmosis_ai.rollout.core.schemas",
    ):
        assert module in modules


def test_checker_reports_a_renamed_keyword() -> None:
    def renamed(value: Any) -> None: ...

    def keyword_only(*, ip: str) -> None: ...

    def extra_required(ip: str, port: int) -> None: ...

    assert mismatches(renamed, ["ip"]) != []
    assert mismatches(keyword_only, ["ip"]) != []
    assert mismatches(keyword_only, ["*", "ip"]) == []
    assert mismatches(extra_required, ["ip"]) != []
    assert mismatches(extra_required, ["ip", "port"]) == []


def test_the_snapshot_reads_validators_aliased_bases_and_inherited_constructors(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "snapshot_02_signatures", Path(__file__).parents[1] / "scripts" / "snapshot_02_signatures.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    source = tmp_path / "osmosis_ai" / "rollout"
    source.mkdir(parents=True)
    (source / "utils.py").write_text(
        "from pydantic_settings import BaseSettings as _Base\n"
        "class Settings(_Base):\n"
        "    limit: int = 1\n"
        "    @field_validator('limit')\n"
        "    @classmethod\n"
        "    def check_limit(cls, v): return v\n"
        "class Failed(RuntimeError): pass\n"
        "class Plain:\n"
        "    def go(self, x): ...\n"
        "class Enumerated(str, Enum): A = 'a'\n"
    )
    assert script.snapshot(tmp_path) == {
        "osmosis_ai.rollout.utils:Failed": ["*args"],
        "osmosis_ai.rollout.utils:Plain": [],
        "osmosis_ai.rollout.utils:Plain.go": ["x"],
        "osmosis_ai.rollout.utils:Settings": ["*", "limit"],
        "osmosis_ai.rollout.utils:Settings.check_limit": ["v"],
    }
