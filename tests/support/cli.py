"""Running ``osmosis``: :func:`cli` calls its ``main(argv)`` in this process, :func:`osmosis` starts it as a
subprocess the way users do (for the few tests that need a process of their own: signals, a terminal,
what happens at interpreter exit, the entry point itself). Both see the same environment: no Platform
credentials (no token in the environment, an empty config directory unless ``OSMOSIS_CONFIG_DIR`` is
passed), and optionally an isolated user (``home``) without provider keys or caches."""

from __future__ import annotations

import asyncio
import importlib
import io
import logging
import os
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
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
            if not k.endswith(("_API_KEY", "_API_BASE", "_BASE_URL"))
            and k not in {"OSMOSIS_CACHE_DIR", "XDG_CACHE_HOME"}
        }
        env["HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    env["OSMOSIS_KEYRING"] = "0"  # never the developer's own OS keyring; a test opts in with its own backend
    env.update(extra)
    return env


@dataclass(frozen=True)
class Ran:
    """One in-process run of ``osmosis``: what a finished subprocess would tell (the attributes of
    :class:`subprocess.CompletedProcess` that the tests read)."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


# Where modules that stay imported between runs come from: the interpreter, the installed packages and
# this checkout. A module a run imported from anywhere else (an agent a test wrote into its temporary
# directory) is forgotten after the run, so the next test's module of the same name is imported afresh.
_KEPT_MODULE_ROOTS = tuple(
    {os.path.join(Path(p).resolve(), "") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, REPO)}
)


def _kept(module: object) -> bool:
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return True  # built-in, frozen or namespace module
    return str(Path(file).resolve()).startswith(_KEPT_MODULE_ROOTS)


def _module_of(finder: object) -> object:
    owner = finder if isinstance(finder, type) else type(finder)
    return sys.modules.get(owner.__module__)


class _LoggingState:
    """The logging configuration of this process, taken before a run and put back after it.

    During the run the root logger has no handlers and the default level, as in a fresh interpreter,
    so the command's ``logging.basicConfig`` writes to the stderr it is given; afterwards every logger
    that existed gets its level, handlers, propagation and ``disabled`` flag back, and the SDK's own
    loggers created during the run lose the levels and handlers the command gave them.
    """

    def __init__(self) -> None:
        manager = logging.Logger.manager
        self.disable = manager.disable
        self.root = (logging.root.level, list(logging.root.handlers))
        self.loggers = {
            name: (logger.level, list(logger.handlers), logger.propagate, logger.disabled)
            for name, logger in manager.loggerDict.items()
            if isinstance(logger, logging.Logger)
        }
        logging.root.handlers.clear()
        logging.root.setLevel(logging.WARNING)

    def restore(self) -> None:
        # Levels are assigned, and every logger's cached answers dropped once at the end (setLevel on
        # the root): setLevel on each of the process's hundreds of loggers would drop them all each time.
        manager = logging.Logger.manager
        logging.disable(self.disable)
        logging.root.handlers[:] = self.root[1]
        for name, logger in list(manager.loggerDict.items()):
            if not isinstance(logger, logging.Logger):
                continue
            saved = self.loggers.get(name)
            if saved is not None:
                logger.level = saved[0]
                logger.handlers[:] = saved[1]
                logger.propagate, logger.disabled = saved[2], saved[3]
            elif name == "osmosis_ai" or name.startswith("osmosis_ai."):
                logger.level = logging.NOTSET
                logger.handlers.clear()
                logger.propagate, logger.disabled = True, False
        logging.root.setLevel(self.root[0])


def _captured() -> io.TextIOWrapper:
    """A text stream like a redirected stdout (UTF-8, with ``buffer``, not a terminal)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    """What was written to ``stream``, decoded as ``subprocess.run(..., text=True)`` does."""
    stream.flush()
    raw = stream.buffer.getvalue()  # type: ignore[attr-defined]
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()


def _exit_status(exc: SystemExit, stderr: io.TextIOWrapper) -> int:
    """The status the interpreter exits with for ``exc``, writing a non-integer code to stderr as it does."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=stderr)
    return 1


def cli(
    *args: str,
    cwd: Path = REPO,
    home: Path | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> Ran:
    """``osmosis *args`` through ``osmosis_ai.cli.main.main`` in this process, in ``cwd``, with the
    environment :func:`subprocess_env` gives a subprocess, ``input`` on its stdin (else an empty
    stdin), and its stdout and stderr captured.

    Everything a run may change in the process is put back afterwards: the environment (the command
    loads ``.env`` files), the working directory, ``sys.path``/``sys.meta_path``/``sys.argv``, the
    modules imported from outside this checkout and the installed packages, and the logging
    configuration. An exception that escapes ``main`` is a traceback on stderr and status 1, as the
    interpreter makes it; ``SystemExit`` becomes its exit status. Warnings follow the suite's filters
    (errors, but for those ``pyproject.toml`` ignores), stricter than a subprocess's stderr line.

    Call it from synchronous code: ``main`` runs ``asyncio.run``, which cannot run inside a running
    event loop; an async test awaits :func:`cli_async` instead.
    """
    from osmosis_ai.cli.main import main

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "cli() was called on a running event loop, where main() cannot run: await cli_async()"
        )
    argv = list(args)
    saved_environ = dict(os.environ)
    call_environ = subprocess_env(home, **(env or {}))
    saved_cwd = os.getcwd()
    saved_path, saved_meta_path, saved_argv = list(sys.path), list(sys.meta_path), sys.argv
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_modules = set(sys.modules)
    stdout, stderr = _captured(), _captured()
    os.environ.clear()
    os.environ.update(call_environ)
    logging_state = _LoggingState()
    try:
        os.chdir(cwd)
        importlib.invalidate_caches()  # modules a test has just written are found
        sys.argv = [str(REPO / "osmosis_ai" / "__main__.py"), *argv]
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(input or ""), stdout, stderr
        try:
            status = main(argv)
        except SystemExit as exc:
            status = _exit_status(exc, stderr)
        except Exception:
            traceback.print_exc(file=stderr)
            status = 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        logging_state.restore()
        # A finder an installed package added stays: importlib_metadata (imported by LiteLLM) adds its
        # own and takes find_distributions off the stdlib's, so dropping it would hide every package.
        added = [f for f in sys.meta_path if f not in saved_meta_path and _kept(_module_of(f))]
        sys.path[:], sys.meta_path[:], sys.argv = saved_path, [*saved_meta_path, *added], saved_argv
        for name in set(sys.modules) - saved_modules:
            if not _kept(sys.modules[name]):
                del sys.modules[name]
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
    return Ran(argv, status, _text(stdout), _text(stderr))


async def cli_async(
    *args: str,
    cwd: Path = REPO,
    home: Path | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> Ran:
    """:func:`cli` from an async test: ``main`` runs in a worker thread while the test's event loop
    goes on serving (a stand-in server on that loop keeps answering)."""
    return await asyncio.to_thread(cli, *args, cwd=cwd, home=home, env=env, input=input)


def osmosis(
    *args: str,
    cwd: Path = REPO,
    timeout: float = 100,
    home: Path | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``osmosis *args`` run to completion as a subprocess (``input`` on its stdin), its output captured
    as text; :func:`cli` runs the same command line in this process, much faster."""
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
