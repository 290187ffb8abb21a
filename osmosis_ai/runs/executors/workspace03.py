"""The executor spec of ``osmosis eval run``: a workspace's rollout, its entrypoint (``main.py``) run
as a server of its own and driven through the local TrainGate as ``rollout run --url`` drives one.

For the run the entrypoint is started with ``python main.py`` (``python``: this interpreter unless the
spec names another, e.g. the rollout's own virtualenv's), or, when the spec names a ``uv``
executable, in the rollout's uv-managed environment as 0.3 starts it (``uv sync --project DIR``
first, its output in the log, then ``uv run --no-sync --project DIR python main.py``), in the
rollout's directory, serving on a free loopback port (``$_OSMOSIS_ROLLOUT_PORT``) with the config's
``[env]`` added to this process's environment, its output appended to ``log_path``; the run starts
once its ``/health`` answers, and the process is stopped when the run ends, however it ends (SIGTERM, then SIGKILL after
:data:`STOP_GRACE_SEC`). From there it is :class:`~osmosis_ai.runs.executors.traingate.RolloutServer`'s
pipeline at that URL: the server's ``/health`` picks the 0.3 executor. The spec is plain data, so a
Ray worker rebuilds it from the plan and serves the entrypoint for its own share of the rollouts (on
a cluster, its node must see the workspace at the same path).

A journal of the run is resumed only while the rollout's Python files, the entrypoint and its
interpreter, the policy, ``n``, the rows and the timeout are the same; the fingerprint names whichever
changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_ai.consts import SERVER_KEY_ENV
from osmosis_ai.runs.executors.traingate import OneModelSpec
from osmosis_ai.runs.plan import ModelRef, Rows, RunPlan

if TYPE_CHECKING:
    from osmosis_ai.runs.engine import Pipeline
    from osmosis_ai.runs.executors.traingate import ServerSession
    from osmosis_ai.runs.plan import RowSource

COMMAND = "eval run"
TASK_PREFIX = "eval-run-"
START_TIMEOUT_SEC = 60.0  # from the process started to its /health answering
STOP_GRACE_SEC = 3.0  # from SIGTERM to SIGKILL: within the command's own grace after Ctrl-C
LOG_TAIL_CHARS = 400  # of the server's output quoted when it does not start


@dataclass(frozen=True)
class WorkspaceServer(OneModelSpec):
    """A workspace rollout for the plan (see the module docstring): ``rollout_dir`` with its
    ``entrypoint``, the policy ``model`` answering its chat calls, the dataset rows ``selection`` (file
    indices, ascending; ``None``: the plan's rows), ``env`` for the server, run by ``python``, or in
    the environment ``uv`` (its executable) makes from the rollout's ``pyproject.toml``."""

    model: ModelRef
    rollout_dir: str
    entrypoint: str = "main.py"
    selection: tuple[int, ...] | None = None
    env: tuple[tuple[str, str], ...] = ()
    log_path: str | None = None
    python: str = field(default=sys.executable, compare=False)
    uv: str | None = None
    task_prefix = TASK_PREFIX

    def target(self) -> str:
        """The rollout as listings name it: its entrypoint's path."""
        return str(Path(self.rollout_dir) / self.entrypoint)

    def command(self) -> list[str]:
        """What starts the entrypoint, in the rollout's directory."""
        if self.uv is None:
            return [self.python, self.entrypoint]
        return [self.uv, "run", "--no-sync", "--project", self.rollout_dir, "python", self.entrypoint]

    def interpreter(self) -> str:
        """The interpreter as the fingerprint names it: ``python``'s path, or the uv environment by its
        project's ``pyproject.toml`` and ``uv.lock``."""
        if self.uv is None:
            return self.python
        from osmosis_ai.runs.journal import file_digest

        files = [Path(self.rollout_dir) / name for name in ("pyproject.toml", "uv.lock")]
        return "uv:" + ",".join(file_digest(str(file)) for file in files if file.is_file())

    def task_id_parts(self, plan: RunPlan) -> list[Any]:
        """The rollout's directory and entrypoint, the policy, the dataset's path, ``n``, the rows and
        the timeout."""
        rows = list(self.selection) if self.selection is not None else [plan.rows.offset, plan.rows.limit]
        return [COMMAND, str(Path(self.rollout_dir).resolve()), self.entrypoint, self.model.name,
                self.model.base_url, str(Path(plan.rows.dataset).resolve()), plan.n, rows, plan.timeout]  # fmt: skip

    def read_rows(self, rows: Rows) -> RowSource:
        from osmosis_ai.runs.dataset import DatasetReader

        reader = DatasetReader(rows.dataset, v03=True)
        return reader if self.selection is None else SelectedRows(reader, self.selection)

    def prepare(self, plan: RunPlan) -> PreparedWorkspace:
        from osmosis_ai.rollout.workspace import WorkspaceError

        if not (Path(self.rollout_dir) / self.entrypoint).is_file():
            raise WorkspaceError(f"{self.target()}: no such file (the rollout's entrypoint)")
        return PreparedWorkspace(plan, self)


class SelectedRows:
    """The rows of ``reader`` at the file indices ``selection`` (ascending), numbered from 0 in that
    order; each row keeps its place in the file as ``dataset_row``."""

    def __init__(self, reader: Any, selection: tuple[int, ...]) -> None:
        from osmosis_ai.errors import DatasetValidationError

        self.reader, self.selection = reader, selection
        self.file_path: Path = reader.file_path
        total = len(reader)
        beyond = [index for index in selection if index >= total]
        if beyond:
            raise DatasetValidationError(
                f"{self.file_path}: row(s) {', '.join(map(str, beyond))} selected, but it has {total} row(s) "
                f"(0-{max(total - 1, 0)})",
                path=self.file_path,
            )

    def __len__(self) -> int:
        return len(self.selection)

    def iter_indexed(
        self, limit: int | None = None, offset: int = 0
    ) -> Iterator[tuple[int, Mapping[str, Any]]]:
        chosen = self.selection[offset : None if limit is None else offset + limit]
        if not chosen:
            return
        place = {index: offset + position for position, index in enumerate(chosen)}
        for index, row in self.reader.iter_indexed(chosen[-1] + 1 - chosen[0], chosen[0]):
            if index in place:
                yield place[index], {**row, "dataset_row": index}


class PreparedWorkspace:
    """The workspace rollout, checked; its session starts the server."""

    def __init__(self, plan: RunPlan, spec: WorkspaceServer) -> None:
        self.plan, self.spec = plan, spec

    def fingerprint(self, rows: int) -> dict[str, Any]:
        """The rollout's Python files, the entrypoint and its interpreter, the policy (never its key),
        ``n``, the rows, the timeout and the dataset's content."""
        from osmosis_ai.rollout.loading import directory_digest
        from osmosis_ai.runs.journal import file_digest

        spec, plan = self.spec, self.plan
        return {
            "command": COMMAND,
            "rollout": directory_digest(Path(spec.rollout_dir)),
            "entrypoint": spec.entrypoint,
            "python": spec.interpreter(),
            "model": spec.model.name,
            "base_url": spec.model.base_url,
            "n": plan.n,
            "rows": list(spec.selection) if spec.selection is not None else [plan.rows.offset, rows],
            "timeout": plan.timeout,
            "dataset": file_digest(plan.rows.dataset),
        }

    @contextlib.asynccontextmanager
    async def session(self, plan: RunPlan, tags: list[str], observer: Any) -> AsyncIterator[WorkspaceSession]:
        from osmosis_ai.runs.executors.traingate import PreparedServer, RolloutServer
        from osmosis_ai.traingate.tokenizer import load_tokenizer

        policy = PreparedServer(plan, RolloutServer(self.spec.model), load_tokenizer(None), None, [])
        async with policy.session(plan, tags, observer) as session:
            yield WorkspaceSession(self.spec, session)


class WorkspaceSession:
    """The policy, open: its preflight; each pipeline serves the entrypoint for its own rollouts, so
    a Ray worker rebuilding the pipeline from the plan starts a server of its own and the driver,
    which runs none of the rollouts then, starts none."""

    def __init__(self, spec: WorkspaceServer, policy: ServerSession) -> None:
        self.spec, self.policy = spec, policy

    async def preflight(self, on_event: Callable[[Any], Any]) -> None:
        await self.policy.preflight(on_event)

    @contextlib.asynccontextmanager
    async def pipeline(self, in_flight: int) -> AsyncIterator[Pipeline]:
        from osmosis_ai.runs.executors.traingate import PreparedServer, RolloutServer, ServerSession

        opened = self.policy.prepared
        async with served(self.spec) as url:
            server = PreparedServer(
                opened.plan, RolloutServer(self.spec.model, url=url), opened.tokenizer, None, []
            )
            async with ServerSession(server, self.policy.policy).pipeline(in_flight) as pipeline:
                yield pipeline


@contextlib.asynccontextmanager
async def served(spec: WorkspaceServer) -> AsyncIterator[str]:
    """The entrypoint of ``spec`` serving (see the module docstring): its base URL, until the block ends."""
    from osmosis_ai._sockets import bind_listener

    with bind_listener() as probe:
        port = probe.getsockname()[1]
    env = {**os.environ, **dict(spec.env), "_OSMOSIS_ROLLOUT_PORT": str(port), "PYTHONUNBUFFERED": "1"}
    if spec.uv is not None:  # uv takes a parent shell's activated virtualenv for a mismatch
        env.pop("VIRTUAL_ENV", None)
    with contextlib.ExitStack() as files:
        sink: Any = asyncio.subprocess.DEVNULL
        if spec.log_path:
            Path(spec.log_path).parent.mkdir(parents=True, exist_ok=True)
            sink = files.enter_context(Path(spec.log_path).open("ab"))

        async def start(argv: list[str]) -> asyncio.subprocess.Process:
            return await asyncio.create_subprocess_exec(
                *argv, cwd=spec.rollout_dir, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=sink,
                stderr=sink, preexec_fn=_ends_with_parent(),
            )  # fmt: skip

        if spec.uv is not None:
            await _synced(await start([spec.uv, "sync", "--project", spec.rollout_dir]), spec)
        process = await start(spec.command())
    try:
        url = f"http://127.0.0.1:{port}"
        await _until_healthy(process, url, spec)
        yield url
    finally:
        await _stop(process)


async def _synced(process: asyncio.subprocess.Process, spec: WorkspaceServer) -> None:
    """Wait for ``uv sync`` (stopped with the run if the run is); raise when it fails."""
    from osmosis_ai.rollout.server.errors import ServerStartError

    try:
        status = await process.wait()
    finally:
        await _stop(process)
    if status != 0:
        raise ServerStartError(
            f"uv sync --project {spec.rollout_dir} failed with status {status}: the rollout's environment "
            f"could not be made from its pyproject.toml{_tail(spec.log_path)}"
        )


async def _until_healthy(process: asyncio.subprocess.Process, url: str, spec: WorkspaceServer) -> None:
    """Return once ``url``'s ``/health`` answers; raise when the process ends or time runs out first."""
    from osmosis_ai.rollout.server.errors import ServerStartError
    from osmosis_ai.traingate.launcher import RolloutLauncher, ServerUnreachable

    deadline = time.monotonic() + START_TIMEOUT_SEC
    launcher = RolloutLauncher(url, api_key=os.environ.get(SERVER_KEY_ENV) or None)
    while True:
        if process.returncode is not None:
            raise ServerStartError(
                f"{spec.target()} exited with status {process.returncode} before serving{_tail(spec.log_path)}"
            )
        try:
            await launcher.check(timeout=2.0)
            return
        except ServerUnreachable:
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"{spec.target()} did not answer GET /health on {url} within {START_TIMEOUT_SEC:g}s "
                    f"(it must serve on $_OSMOSIS_ROLLOUT_PORT){_tail(spec.log_path)}"
                ) from None
        with contextlib.suppress(asyncio.TimeoutError):  # woken early when the process ends
            await asyncio.wait_for(process.wait(), 0.1)


def _ends_with_parent() -> Callable[[], object] | None:
    """What the child calls before it runs, on Linux: the kernel then sends it SIGTERM when this
    process dies, so the server does not outlive a run that could not stop it (a second Ctrl-C, a
    SIGKILL). Made here: between fork and exec the child may not import or load a library."""
    from osmosis_ai.rewards.runtime.keeper import PR_SET_PDEATHSIG, available

    if not available():
        return None
    import ctypes

    return functools.partial(
        ctypes.CDLL(None, use_errno=True).prctl, PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0
    )


def _tail(log_path: str | None) -> str:
    """``"; its output ends: ..."`` from the server's log, for an error line."""
    if not log_path:
        return ""
    try:
        text = Path(log_path).read_bytes()[-LOG_TAIL_CHARS:].decode("utf-8", "replace")
    except OSError:
        return ""
    last = " | ".join(line.strip() for line in text.strip().splitlines()[-3:] if line.strip())
    return f"; its output ends: {last} (log: {log_path})" if last else ""


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL after the grace period; waited for, also when the run is being cancelled."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.shield(asyncio.wait_for(process.wait(), STOP_GRACE_SEC))
        except (asyncio.TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await asyncio.shield(process.wait())
