"""Running ``osmosis`` as a subprocess the way users do: this checkout on ``PYTHONPATH``, no Platform
credentials (no token in the environment, an empty config directory unless ``OSMOSIS_CONFIG_DIR`` is
passed), and optionally an isolated user (``home``) without provider keys or caches."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CALCULATOR = "examples.calculator.agent:agent_loop"
CALCULATOR_DATASET = REPO / "examples" / "calculator" / "dataset.jsonl"
# Where the subprocesses look for stored Platform credentials unless a test passes its own: never
# the developer's real login.
EMPTY_CONFIG_DIR = tempfile.mkdtemp(prefix="osmosis-test-config-")
PLATFORM_TOKEN_ENVS = ("OSMOSIS_ACCESS_TOKEN", "OSMOSIS_TOKEN")


def subprocess_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    """This environment without Platform credentials; with ``home``, also without the developer's
    provider keys, API bases and cache directories, and with ``HOME`` set to ``home``."""
    env = {k: v for k, v in os.environ.items() if k not in PLATFORM_TOKEN_ENVS}
    env["OSMOSIS_CONFIG_DIR"] = EMPTY_CONFIG_DIR
    if home is not None:
        env = {
            k: v
            for k, v in env.items()
            if not k.endswith(("_API_KEY", "_API_BASE")) and k not in {"OSMOSIS_CACHE_DIR", "XDG_CACHE_HOME"}
        }
        env["HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    env["OSMOSIS_KEYRING"] = "0"  # never the developer's own OS keyring; a test opts in with its own backend
    env.update(extra)
    return env


def osmosis(
    *args: str,
    cwd: Path = REPO,
    timeout: float = 60,
    home: Path | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``osmosis *args`` run to completion (``input`` on its stdin), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "osmosis_ai", *args],
        cwd=cwd,
        env=subprocess_env(home, **(env or {})),
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
    )


ASYNC_TOOLS_AGENT = """
from osmosis_ai.rollout import RolloutAgentLoop

ECHO = {"type": "function", "function": {"name": "echo", "description": "Echo the text.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}


class AsyncTools(RolloutAgentLoop):
    name = "async_tools"

    async def get_tools(self, request):
        return [ECHO]

    async def run(self, ctx):
        return ctx.complete(list(ctx.request.messages), reward=1.0)


class SyncReturnsCoroutine(AsyncTools):
    def get_tools(self, request):
        return AsyncTools.get_tools(self, request)


agent_loop = AsyncTools()
"""


def assert_summary_table_matches(stdout: str, results: Path, outcome_line: str) -> None:
    """``stdout`` ends with the summary table of the run read back from ``results`` (every figure
    equal), then ``outcome_line``, the last line."""
    from osmosis_ai.cli.summary import summary_rows
    from osmosis_ai.report.figures import summarize
    from osmosis_ai.report.readers import read_results

    run = read_results(results)
    lines = stdout.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith(f"Summary ({run.kind}: "))
    table = lines[title + 1 :]
    for name, value in summary_rows(run, summarize(run, price=False)):
        assert any(line.startswith(name) and line.endswith(value) for line in table), (name, value, table)
    assert outcome_line in lines[-1] and title < len(lines) - 1
