"""``code_tests_reward``: an answer's fenced Python run in the sandbox against the row's asserts.

A classic reward (``solution_str, ground_truth, extra_info``): the last ```` ```python ```` block of
the answer (else the last unlabelled ```` ``` ```` block) is run as ``main.py``, then each test, by
:func:`osmosis_ai.sandbox.run`. The tests are ``extra_info["tests"]`` (a list of snippets, or a
string of lines) when present, else ``ground_truth``'s lines; blank lines and ``#`` comments are
skipped. The score is the share of tests passed, or with ``all_pass=True`` 1.0 only when all pass.
An answer without code scores 0.0. A sandbox that cannot run the code raises
:class:`~osmosis_ai.errors.InfrastructureError`: the sample ends ``infra_error``, never 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from osmosis_ai.errors import InfrastructureError
from osmosis_ai.sandbox.api import run_sync
from osmosis_ai.sandbox.result import SandboxOutcome

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PYTHON = frozenset({"python", "python3", "py"})


def extract_code(text: str) -> str | None:
    """The last ```` ```python ```` block of ``text`` (else the last unlabelled block), or ``None``."""
    blocks = _FENCE.findall(text or "")
    for wanted in (lambda label: label.lower() in _PYTHON, lambda label: label == ""):
        chosen = [body for label, body in blocks if wanted(label)]
        if chosen:
            return str(chosen[-1])
    return None


def _tests(ground_truth: Any, extra_info: Mapping[str, Any] | None) -> list[str]:
    source = extra_info.get("tests") if isinstance(extra_info, Mapping) else None
    if source is None:
        source = ground_truth
    lines = source.splitlines() if isinstance(source, str) else list(source or ())
    tests = [str(line) for line in lines if str(line).strip() and not str(line).lstrip().startswith("#")]
    if not tests:
        raise ValueError(
            "the row has no tests: give assert lines in ground_truth or a list in extra_info['tests']"
        )
    return tests


def code_tests_reward(
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,  # the classic contract's annotation
    *,
    all_pass: bool = False,
    timeout: float = 10.0,
    memory_mb: int = 512,
    provider: str = "local",
    **kwargs: Any,
) -> float:
    """The share of the row's tests the answer's code passes (see the module docstring), run where
    ``provider`` says (:func:`osmosis_ai.sandbox.run`)."""
    tests = _tests(ground_truth, extra_info)
    code = extract_code(solution_str)
    if code is None:
        return 0.0
    result = run_sync(code, tests=tests, timeout=timeout, memory_mb=memory_mb, provider=provider)
    if result.outcome is SandboxOutcome.INFRA_ERROR:
        raise InfrastructureError(f"the sandbox could not run the code: {result.error}")
    passed, total = result.tests_passed or 0, result.tests_total or len(tests)
    if all_pass:
        return 1.0 if result.outcome is SandboxOutcome.PASSED else 0.0
    return passed / total
