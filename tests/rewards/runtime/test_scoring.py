"""The runtime with real worker processes: every kind of misbehaving reward ends in its typed outcome,
every good sample scores, and no process is left behind on any path.

One pool (2 workers, 1 s timeout, 1 GiB each) is shared by the tests that only score through it;
tests that close, cancel or kill get runtimes of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from osmosis_ai.outcome import Outcome
from osmosis_ai.rewards.runtime import (
    RewardInputError,
    RewardRuntime,
    RewardRuntimeError,
    RewardSettingError,
    Sample,
    SampleResult,
    WorkerStartError,
    score_batch,
)
from tests.support.openai_server import DEFAULT_CONTENT, OpenAIServer, Reply
from tests.support.processes import alive, children, in_groups, processes
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

H = "tests.rewards.runtime.hostile"
HOSTILE = f"{H}:hostile"
ROOT = Path(__file__).resolve().parents[3]

C, E, T, X = Outcome.COMPLETED, Outcome.REWARD_ERROR, Outcome.REWARD_TIMEOUT, Outcome.REWARD_CRASH


def row(action: str) -> dict[str, Any]:
    return {"solution_str": action, "ground_truth": ""}


def marked(marker: str) -> set[int]:
    """Processes whose command line carries ``marker`` (the reward's own child processes)."""
    found = set()
    for proc in processes():
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                found.add(proc.pid)
    return found


async def collect(runtime: RewardRuntime, rows: list[Any]) -> list[SampleResult]:
    return [result async for result in runtime.stream(rows)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[RewardRuntime]:
    async with RewardRuntime(HOSTILE, workers=2, timeout=1.0, memory_limit_mb=1024) as runtime:
        yield runtime


# -- one pool, every misbehaviour -----------------------------------------------------------------

EXPECTED: dict[str, tuple[Outcome, str | float]] = {
    "loop": (T, "the reward ran past its 1 s timeout; its worker process was killed"),
    "sys_exit": (E, "SystemExit: 3"),
    "os_exit": (X, "the reward's worker process exited with status 7 while scoring this sample"),
    "segv": (X, "the reward's worker process died of SIGSEGV (segmentation fault) while scoring this sample"),
    "kill9": (X, "the reward's worker process died of SIGKILL (killed by the kernel's out-of-memory killer"),
    "alloc:4096": (X, "MemoryError: out of memory (the worker's memory limit is 1024 MB)"),
    "print": (C, 1.0),
    "fd_print": (C, 1.0),
    "thread": (C, 1.0),
    "numpy": (C, 0.5),
    "nan": (E, "RewardReturnError: reward function 'tests.rewards.runtime.hostile:hostile' must return a finite "
               "real number (a float, or an int), got nan of type float"),
    "true": (E, "got True of type bool; a bool is not a score: return 1.0 or 0.0"),
    "raise": (E, "ValueError: bad answer"),
    "input": (E, "EOFError: EOF when reading a line"),
}  # fmt: skip


@pytest.mark.asyncio(loop_scope="module")
async def test_every_sample_ends_in_its_typed_outcome_and_every_good_one_scores(pool: RewardRuntime) -> None:
    actions = list(EXPECTED)
    rows = []
    for action in actions:  # good samples all around the bad ones, in the same batches
        rows += [row("score:0.25"), row(action), row("score:0.75")]
    results = await collect(pool, rows)

    assert sorted(r.index for r in results) == list(range(len(rows)))  # none lost, none counted twice
    by_index = {r.index: r for r in results}
    for position, action in enumerate(actions):
        before, bad, after = (by_index[3 * position + k] for k in range(3))
        assert (before.outcome, before.score, after.outcome, after.score) == (C, 0.25, C, 0.75), action
        outcome, expected = EXPECTED[action]
        assert bad.outcome is outcome, (action, bad)
        if outcome is C:
            assert bad.score == expected and bad.error is None
        else:
            assert bad.score is None and isinstance(expected, str) and bad.error is not None
            assert bad.error.startswith(expected) or expected in bad.error, (action, bad.error)
            assert "\n" not in bad.error  # the first line only
    # the hung sample ran its full second and was cut, while the other worker went on with the rows after it
    hung = by_index[3 * actions.index("loop") + 1]
    assert hung.duration is not None and hung.duration >= 1.0
    finished_first = [r.index for r in results[: results.index(hung)]]
    assert any(index is not None and index > hung.index + 1 for index in finished_first)


@pytest.mark.asyncio(loop_scope="module")
async def test_printed_output_is_kept_per_sample_and_bounded(pool: RewardRuntime) -> None:
    results = await collect(pool, [row("fd_print")] * 2 + [row("print"), row("score:1")])
    _, _, printed, quiet = sorted(results, key=lambda r: r.index or 0)
    segv = await pool.score(row("segv"))
    assert printed.output.startswith("x" * 4096) and printed.output.endswith(" more characters not kept]")
    assert len(printed.output) < 4200 and quiet.output == ""
    # a fatal signal's last words come from the worker's own descriptors: where the reward crashed
    assert segv.outcome is X and "Fatal Python error: Segmentation fault" in segv.output
    assert "hostile.py" in segv.output and "yyy" not in segv.output  # not what earlier samples wrote


@pytest.mark.asyncio(loop_scope="module")
async def test_a_worker_that_dies_is_replaced_and_fails_only_its_own_sample(pool: RewardRuntime) -> None:
    old = set(pool.pids)
    killed_before, died_before = pool.stats.killed, pool.stats.died
    results = await collect(
        pool, [row("score:1")] * 20 + [row("os_exit"), row("loop")] + [row("score:1")] * 20
    )
    outcomes = [r.outcome for r in sorted(results, key=lambda r: r.index or 0)]
    assert outcomes == [C] * 20 + [X, T] + [C] * 20
    assert (pool.stats.died - died_before, pool.stats.killed - killed_before) == (1, 1)
    assert len(pool.pids) == 2 and set(pool.pids) != old
    assert not any(alive(pid) for pid in old - set(pool.pids))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("workers", [1, 2])
async def test_a_sample_that_garbles_its_result_pipe_is_its_own_crash_and_the_run_ends(workers: int) -> None:
    rows = (
        [row("score:1")] * 20 + [row("junk")] + [row("score:1")] * 20 + [row("pickle")] + [row("score:1")] * 5
    )
    async with RewardRuntime(HOSTILE, workers=workers, timeout=10) as runtime:
        results = await collect(runtime, rows)
        assert (await runtime.score(row("score:2"))).score == 2.0  # the garbled worker was replaced
    by_index = {r.index: r for r in results}
    assert sorted(by_index) == list(range(len(rows)))
    junk = by_index.pop(20)
    assert junk.outcome is X and junk.error is not None and "wrote to its worker's result pipe" in junk.error
    assert all(
        (r.outcome, r.score) == (C, 1.0) for r in by_index.values()
    )  # replacing pickle.dumps is harmless


async def test_a_sample_that_breaks_its_worker_after_returning_fails_no_row_and_nothing_runs_twice(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    rows = [{"solution_str": f"paid:{ledger}", "ground_truth": str(i)} for i in range(30)]
    rows[12] = {"solution_str": f"closefds:{ledger}", "ground_truth": "12"}
    async with RewardRuntime(HOSTILE, workers=1, timeout=10) as runtime:
        results = await collect(runtime, rows)
        assert runtime.stats.died == 1
    # what had returned before the worker broke is taken as returned, the culprit's 1.0 included
    assert sorted((r.index, r.outcome, r.score) for r in results) == [(i, C, 1.0) for i in range(30)]
    assert sorted(ledger.read_text().split(), key=int) == [str(i) for i in range(30)]  # each row ran once


async def test_rows_running_beside_a_sample_that_breaks_its_worker_run_again_alone(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    rows = [{"solution_str": f"paid:{ledger}", "ground_truth": str(i)} for i in range(30)]
    rows[12] = {"solution_str": f"closefds:{ledger}", "ground_truth": "12"}
    async with RewardRuntime(HOSTILE, workers=1, timeout=10, concurrency=3) as runtime:
        results = await collect(runtime, rows)
    by_index = {r.index: r for r in results}
    assert by_index.pop(12).outcome is X  # its worker died under it again when it ran alone
    assert sorted((i, r.outcome, r.score) for i, r in by_index.items()) == [
        (i, C, 1.0) for i in range(30) if i != 12
    ]


async def test_a_sample_goes_to_an_idle_worker_never_behind_one_still_running(tmp_path: Path) -> None:
    release = tmp_path / "release"
    async with RewardRuntime(HOSTILE, workers=2, timeout=None) as runtime:
        held = asyncio.ensure_future(runtime.score(row(f"hold:{release}")))
        await asyncio.to_thread(wait_until, Path(f"{release}.started").exists, 30)
        # Behind the held sample it would wait until the release; the bound only ends a failing test.
        quick = await asyncio.wait_for(runtime.score(row("score:0.5")), 30)
        assert quick.outcome is C and quick.score == 0.5 and not held.done()
        release.touch()
        assert (await held).score == 1.0


@pytest.mark.asyncio(loop_scope="module")
async def test_many_tasks_share_one_runtime(pool: RewardRuntime) -> None:
    results = await asyncio.gather(*(pool.score(row(f"score:{i}"), index=i) for i in range(50)))
    assert [(r.index, r.score) for r in results] == [(i, float(i)) for i in range(50)]


@pytest.mark.asyncio(loop_scope="module")
async def test_a_sample_is_given_as_a_sample_or_a_row(pool: RewardRuntime) -> None:
    as_sample = await pool.score(Sample(ground_truth="", solution_str="score:2"))
    from_messages = await pool.score(
        {"messages": [{"role": "assistant", "content": "score:3"}], "ground_truth": ""}
    )
    assert (as_sample.score, from_messages.score) == (2.0, 3.0)
    with pytest.raises(
        RewardInputError, match=r"^the sample has no 'ground_truth' \(its keys: 'solution_str'\)$"
    ):
        await pool.score({"solution_str": "x"})
    with pytest.raises(RewardInputError, match="'solution_str' must be a string, got 3 of type int"):
        await pool.score({"solution_str": 3, "ground_truth": ""}, index=7)
    with pytest.raises(RewardInputError, match=r"^row 7 cannot be sent to a worker process: "):
        await pool.score({"solution_str": "x", "ground_truth": threading.Lock()}, index=7)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_bad_row_stops_the_stream_after_what_is_in_flight(pool: RewardRuntime) -> None:
    seen: list[SampleResult] = []
    with pytest.raises(
        RewardInputError, match=r"^row 2 has neither 'solution_str' nor 'messages'$"
    ) as caught:
        async for result in pool.stream(
            [row("score:1"), row("score:2"), {"ground_truth": ""}, row("score:4")]
        ):
            seen.append(result)
    assert sorted((r.index, r.score) for r in seen) == [(0, 1.0), (1, 2.0)] and caught.value.index == 2


@pytest.mark.asyncio(loop_scope="module")
async def test_rows_are_taken_lazily_and_at_most_max_in_flight_ahead(pool: RewardRuntime) -> None:
    taken = 0

    def rows() -> Any:
        nonlocal taken
        for i in range(300):
            taken += 1
            yield row(f"score:{i}")

    consumed = 0
    async for _ in pool.stream(rows(), max_in_flight=8):
        assert taken - consumed <= 8
        consumed += 1
    assert consumed == 300


@pytest.mark.asyncio(loop_scope="module")
async def test_rows_that_fail_midway_stop_the_stream_after_what_is_in_flight(pool: RewardRuntime) -> None:
    def rows() -> Any:
        yield row("score:1")
        yield row("score:2")
        raise OSError("the dataset went away")

    seen: list[SampleResult] = []
    with pytest.raises(OSError, match="the dataset went away"):
        async for result in pool.stream(rows()):
            seen.append(result)
    assert sorted(r.score or 0 for r in seen) == [1.0, 2.0]


# -- shapes, modes and state ----------------------------------------------------------------------


async def test_sync_async_decorated_eval_functions_and_closures_all_score() -> None:
    conversation = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a1"},
                    {"role": "assistant", "content": "answer"}]  # fmt: skip
    cases = [
        (f"{H}:decorated", {"solution_str": " yes ", "ground_truth": "yes"}, 1.0),
        (f"{H}:decorated_async", {"solution_str": "yes", "ground_truth": "yes"}, 1.0),
        (f"{H}:full_mode", {"messages": conversation, "ground_truth": "", "extra_info": {"bonus": 0.5}}, 2.5),
        (f"{H}:full_mode", {"solution_str": "only text", "ground_truth": ""}, 1.0),
        (f"{H}:simple_mode", {"messages": conversation, "ground_truth": ""}, 6.0),  # the last assistant text
        (f"{H}:positional", {"solution_str": "a", "ground_truth": "a"}, 1.0),
        (f"{H}:closure", {"solution_str": "a", "ground_truth": "a"}, 11.0),
    ]
    for reward, sample, score in cases:
        async with RewardRuntime(reward, workers=1, timeout=10) as runtime:
            result = await runtime.score(sample)
        assert (result.outcome, result.score) == (C, score), reward


async def test_workers_import_the_users_modules_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "helpers_in_cwd.py").write_text("BONUS = 5.0\n")
    (tmp_path / "rewards_in_cwd.py").write_text(
        textwrap.dedent("""
        from helpers_in_cwd import BONUS  # a sibling module, found the way the parent finds it
        def score(solution_str, ground_truth, extra_info=None):
            return BONUS + len(solution_str)
    """)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the parent's import puts the directory first
    async with RewardRuntime("rewards_in_cwd:score", workers=1, timeout=10) as runtime:
        assert (await runtime.score(row("abc"))).score == 8.0


async def test_module_state_lives_on_in_a_worker_across_samples() -> None:
    async with RewardRuntime(HOSTILE, workers=1, timeout=10) as runtime:
        first = [r.score for r in await collect(runtime, [row("calls")] * 3)]
        second = await runtime.score(row("calls"))
    assert sorted(first) == [1.0, 2.0, 3.0] and second.score == 4.0


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_a_samples_working_directory_and_environment_do_not_reach_the_next_one(
    concurrency: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", os.environ.get("HOME", "/root"))
    async with RewardRuntime(HOSTILE, workers=1, timeout=10, concurrency=concurrency) as runtime:
        for _ in range(2):
            assert (await runtime.score(row("leak"))).score == 1.0
            assert (await runtime.score(row(f"clean:{os.getcwd()}"))).score == 1.0


async def test_an_async_reward_past_its_timeout_is_cancelled_in_its_worker_without_a_kill() -> None:
    async with RewardRuntime(f"{H}:decorated_async", workers=1, timeout=0.5) as runtime:
        assert runtime.concurrency == 16
        pid = runtime.pids
        results = await collect(runtime, [{"solution_str": "sleep:30", "ground_truth": ""}]
                                + [{"solution_str": "a", "ground_truth": "a"}] * 5)  # fmt: skip
        assert runtime.pids == pid and runtime.stats.killed == 0
    by_index = {r.index: r for r in results}
    assert (
        by_index[0].outcome is T
        and by_index[0].error == "the reward ran past its 0.5 s timeout; it was cancelled"
    )
    assert all(by_index[i].score == 1.0 for i in range(1, 6))


@pytest.mark.parametrize("action", ["stubborn", "block"])
async def test_an_async_reward_that_will_not_stop_is_killed(action: str) -> None:
    async with RewardRuntime(f"{H}:decorated_async", workers=1, timeout=0.3) as runtime:
        results = await collect(runtime, [{"solution_str": action, "ground_truth": ""},
                                          {"solution_str": "a", "ground_truth": "a"}])  # fmt: skip
        # One that blocks its loop holds up the sample beside it too: both run again alone, so it is killed twice.
        kills = {"stubborn": 1, "block": 2}[action]
        await asyncio.to_thread(
            wait_until, lambda: runtime.stats.killed == kills, 10, "the worker to be killed"
        )
    assert sorted((r.index, r.outcome) for r in results) == [(0, T), (1, C)]


async def test_a_sync_reward_runs_several_samples_at_once_when_asked(openai_server: OpenAIServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A rubric's judge calls run in the worker, ``concurrency`` at once: the stand-in holds every answer
    until four requests wait on it together, which only concurrent calls from one worker can do."""
    gate = threading.Event()
    for _ in range(4):
        openai_server.queue(Reply(content=DEFAULT_CONTENT, gate=gate))
    monkeypatch.setenv("RUNTIME_TEST_JUDGE", openai_server.url)
    async with RewardRuntime(f"{H}:rubric", workers=1, concurrency=4, timeout=50) as runtime:
        scoring = asyncio.ensure_future(collect(runtime, [{"solution_str": "4", "ground_truth": "4"}] * 4))
        await asyncio.to_thread(
            wait_until, lambda: openai_server.in_flight.now == 4, 40, "4 judge calls at once"
        )
        gate.set()
        results = await scoring
    assert [(r.outcome, r.score) for r in results] == [(C, 1.0)] * 4


# -- settings -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"timeout": 0}, r"timeout must be a positive number of seconds, or None for no timeout; got 0"),
        ({"timeout": float("nan")}, r"timeout must be a positive number"),
        ({"timeout": True}, r"timeout must be a positive number"),
        ({"workers": -1}, r"workers must be a whole number of at least 0, got -1"),
        ({"concurrency": 0}, r"concurrency must be a whole number of at least 1, got 0"),
        ({"memory_limit_mb": 0}, r"memory_limit_mb must be a whole number of at least 1"),
        (
            {"workers": 0, "memory_limit_mb": 512},
            r"memory_limit_mb needs worker processes: in-process \(workers=0\)",
        ),
    ],
)
def test_settings_out_of_range_fail_before_any_worker_starts(settings: dict[str, Any], message: str) -> None:
    before = children()
    with pytest.raises(RewardSettingError, match=message):
        RewardRuntime(HOSTILE, **settings)
    assert children() == before


def test_the_defaults_protect() -> None:
    runtime = RewardRuntime(HOSTILE)
    assert runtime.timeout == 60.0 and runtime.workers == len(os.sched_getaffinity(0)) and runtime.isolated
    assert runtime.describe() == (
        f"{HOSTILE}: {runtime.workers} worker process{'es' if runtime.workers > 1 else ''}, "
        "timeout 60 s per sample, no memory limit, 1 sample at once per worker"
    )


# -- nothing left behind, on every path -----------------------------------------------------------


def assert_nothing_left(before: set[int], groups: set[int], marker: str | None = None) -> None:
    assert children() == before  # every worker reaped when close returned: none running, no zombie
    # What a reward started in its worker's group got SIGKILL too; it is not our child to reap, so its
    # parent (init, by now) may take a moment to collect it.
    wait_until(lambda: not in_groups(groups), 10, "the rewards' own processes to be gone")
    if marker:  # in a session of their own too: ended by the worker's keeper
        wait_until(
            lambda: not marked(marker), 10, "the rewards' processes in sessions of their own to be gone"
        )


STARTED = {"child": 1, "session_child": 2}  # processes carrying the marker each action starts
"""``child`` starts a process in its worker's group; ``session_child`` one in a session of its own,
which starts another in a third session."""


async def start_hanging(runtime: RewardRuntime, marker: str, action: str = "child") -> asyncio.Future[Any]:
    """Submit a sample that starts processes carrying ``marker``, then hangs; return once they run."""
    task = asyncio.ensure_future(runtime.score(row(f"{action}:{marker}")))
    await asyncio.to_thread(
        wait_until, lambda: len(marked(marker)) >= STARTED[action], 20, "the reward's child processes"
    )
    return task


@pytest.mark.parametrize("action", list(STARTED))
async def test_closing_ends_every_worker_and_what_the_rewards_started(action: str) -> None:
    before, marker = children(), f"m{uuid.uuid4().hex}"
    runtime = RewardRuntime(HOSTILE, workers=2, timeout=30)
    async with runtime:
        assert (await runtime.score(row("thread"))).ok  # a non-daemon thread left running in a worker
        assert (await runtime.score(row(f"spawn_and_return:{marker}"))).ok  # left running, in a new session
        groups = set(runtime.pids)
        task = await start_hanging(runtime, marker, action)
    with pytest.raises(RewardRuntimeError, match="closed before this sample was scored"):
        await task
    assert_nothing_left(before, groups, marker)


@pytest.mark.parametrize("action", list(STARTED))
async def test_an_exception_in_the_caller_ends_every_worker(action: str) -> None:
    before, marker = children(), f"m{uuid.uuid4().hex}"
    with pytest.raises(KeyError):
        async with RewardRuntime(HOSTILE, workers=2, timeout=30) as runtime:
            groups = set(runtime.pids)
            await start_hanging(runtime, marker, action)
            raise KeyError("the caller's own failure")
    assert_nothing_left(before, groups, marker)


async def test_cancelling_the_caller_ends_every_worker() -> None:
    before, marker = children(), f"m{uuid.uuid4().hex}"
    started = asyncio.Event()
    groups: set[int] = set()

    async def run() -> None:
        async with RewardRuntime(HOSTILE, workers=2, timeout=30) as runtime:
            groups.update(runtime.pids)
            await start_hanging(runtime, marker)
            started.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(run())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_nothing_left(before, groups, marker)


@pytest.mark.parametrize("action", list(STARTED))
async def test_a_sample_past_its_timeout_ends_with_what_it_started(action: str) -> None:
    before, marker = children(), f"m{uuid.uuid4().hex}"
    async with RewardRuntime(HOSTILE, workers=1, timeout=1) as runtime:
        groups = set(runtime.pids)
        result = await runtime.score(row(f"{action}:{marker}"))
        assert result.outcome is T
        wait_until(lambda: not marked(marker), 10, "what the timed-out sample started to be gone")
    assert_nothing_left(before, groups, marker)


async def test_a_worker_that_dies_on_its_own_ends_with_what_its_rewards_started() -> None:
    marker = f"m{uuid.uuid4().hex}"
    async with RewardRuntime(HOSTILE, workers=1, timeout=30) as runtime:
        assert (await runtime.score(row(f"spawn_and_return:{marker}"))).ok
        wait_until(lambda: bool(marked(marker)), 10, "the process the reward started to show")
        assert (await runtime.score(row("os_exit"))).outcome is X
        wait_until(lambda: not marked(marker), 10, "what the dead worker's reward started to be gone")


async def test_a_stream_abandoned_early_ends_every_worker() -> None:
    from osmosis_ai.rewards.runtime import score_stream

    before = children()
    stream = score_stream(HOSTILE, (row("score:1") for _ in range(10_000)), workers=2, timeout=30)
    async with contextlib.aclosing(stream):
        async for result in stream:
            assert result.ok
            assert len(children() - before) == 2
            break
    assert children() == before


async def test_a_start_cancelled_midway_leaves_no_worker() -> None:
    before = children()
    runtime = RewardRuntime(HOSTILE, workers=2, timeout=30)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(runtime.start(), 0.01)  # cancelled while the workers import the reward
    assert children() == before


async def test_a_runtime_never_closed_ends_its_workers_when_collected() -> None:
    before = children()
    runtime = RewardRuntime(HOSTILE, workers=2, timeout=30)
    await runtime.start()
    pids = set(runtime.pids)
    del runtime
    gc.collect()
    assert not any(alive(pid) for pid in pids) and children() == before


@pytest.mark.parametrize("action", list(STARTED))
def test_ctrl_c_in_the_parent_ends_every_worker(tmp_path: Path, action: str) -> None:
    marker = f"m{uuid.uuid4().hex}"
    script = tmp_path / "score_then_ctrl_c.py"
    script.write_text(
        textwrap.dedent(f"""
        from osmosis_ai.rewards.runtime import score_batch
        score_batch({HOSTILE!r}, [{{"solution_str": "{action}:{marker}", "ground_truth": ""}}], workers=2, timeout=60)
    """)
    )
    process = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(marked(marker)) >= STARTED[action], 30, "the reward's child processes")
        workers = children(process.pid)
        assert len(workers) == 2
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == -signal.SIGINT and b"KeyboardInterrupt" in stderr
    assert not any(alive(pid) for pid in workers)
    wait_until(
        lambda: not in_groups(workers) and not marked(marker), 10, "the reward's own processes to be gone"
    )


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's"
)
@pytest.mark.parametrize("action", list(STARTED))
def test_workers_and_what_they_started_die_with_a_parent_killed_outright(tmp_path: Path, action: str) -> None:
    marker = f"m{uuid.uuid4().hex}"
    script = tmp_path / "score_forever.py"
    script.write_text(
        textwrap.dedent(f"""
        from osmosis_ai.rewards.runtime import score_batch
        score_batch({HOSTILE!r}, [{{"solution_str": "{action}:{marker}", "ground_truth": ""}}] * 2, workers=2, timeout=60)
    """)
    )
    process = subprocess.Popen([sys.executable, str(script)], cwd=ROOT)
    try:
        wait_until(lambda: len(marked(marker)) >= 2 * STARTED[action], 30, "the rewards' child processes")
        workers = children(process.pid)
        assert len(workers) == 2
        process.kill()
        process.wait(timeout=20)
    finally:
        process.kill()
    wait_until(lambda: not any(alive(pid) for pid in workers), 20, "the orphaned workers to die")
    wait_until(lambda: not marked(marker), 20, "what the rewards started to die")


# -- the main module, and workers that cannot start -----------------------------------------------


def test_a_reward_defined_in_the_script_being_run_is_loaded_without_its_main_block(tmp_path: Path) -> None:
    script = tmp_path / "my_script.py"
    script.write_text(
        textwrap.dedent("""
        from osmosis_ai.rewards.runtime import score_batch

        print("top level runs in every worker, silently")

        def length(solution_str, ground_truth, extra_info=None):
            return float(len(solution_str))

        if __name__ == "__main__":
            rows = [{"solution_str": "abc", "ground_truth": ""}, {"solution_str": "ab", "ground_truth": ""}]
            print([r.score for r in score_batch(length, rows, workers=2, timeout=30)])
    """)
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.splitlines() == ["top level runs in every worker, silently", "[3.0, 2.0]"], done.stderr


def test_a_script_that_scores_at_its_top_level_is_told_to_guard_it(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent("""
        from osmosis_ai.rewards.runtime import score_batch

        def length(solution_str, ground_truth, extra_info=None):
            return float(len(solution_str))

        score_batch(length, [{"solution_str": "abc", "ground_truth": ""}], workers=1, timeout=30)
    """)
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "WorkerStartError: a reward worker process could not load the reward" in done.stderr
    assert 'put the scoring under `if __name__ == "__main__":`' in done.stderr


async def test_a_reward_that_imports_in_the_parent_but_not_in_a_worker_is_a_start_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "parent_only.py").write_text(
        textwrap.dedent("""
        import os
        if "PARENT_ONLY_SEEN" in os.environ:  # set by the parent's import, inherited by the workers
            raise RuntimeError("only the parent has what this module needs")
        os.environ["PARENT_ONLY_SEEN"] = "1"
        def score(solution_str, ground_truth, extra_info=None):
            return 1.0
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("PARENT_ONLY_SEEN", raising=False)
    before = children()
    runtime = RewardRuntime("parent_only:score", workers=2, timeout=10)
    with pytest.raises(WorkerStartError, match=r"^a reward worker process could not load the reward: cannot import "
                       r"'parent_only' for reward 'parent_only:score': RuntimeError: only the parent has"):  # fmt: skip
        await runtime.start()
    await runtime.close()
    assert children() == before


async def test_a_worker_that_dies_while_importing_keeps_its_last_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dies_loading.py").write_text(
        textwrap.dedent("""\
        import os, sys
        if "DIES_LOADING_PARENT" in os.environ:  # the parent's own import passes; the workers' do not
            sys.stderr.write("the licence file is missing")  # no newline, and no exit handler runs
            sys.stderr.flush()
            os._exit(3)
        os.environ["DIES_LOADING_PARENT"] = "1"
        def score(solution_str, ground_truth, extra_info=None):
            return 1.0
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("DIES_LOADING_PARENT", raising=False)
    runtime = RewardRuntime("dies_loading:score", workers=1, timeout=10)
    with pytest.raises(WorkerStartError, match=r"ended before it was ready: the licence file is missing$"):
        await runtime.start()
    await runtime.close()


def test_score_batch_keeps_row_order() -> None:
    results = score_batch(HOSTILE, [row(f"score:{i}") for i in range(30)], workers=2, timeout=10)
    assert [(r.index, r.score) for r in results] == [(i, float(i)) for i in range(30)]


async def test_score_batch_works_inside_a_running_event_loop() -> None:
    """As in Jupyter: the blocking form called where an event loop already runs."""
    before = children()
    results = score_batch(HOSTILE, [row(f"score:{i}") for i in range(4)], workers=2, timeout=10)
    assert [(r.index, r.score) for r in results] == [(i, float(i)) for i in range(4)]
    assert children() == before  # the workers ended with the call


def test_score_batch_checks_every_row_before_any_worker_starts() -> None:
    before = children()
    with pytest.raises(RewardInputError, match=r"^row 2 has no 'ground_truth'"):
        score_batch(HOSTILE, [row("score:1"), row("score:2"), {"solution_str": "x"}], workers=2)
    assert children() == before


async def test_a_raw_target_returns_its_value_and_a_sample_its_caller_stops_waiting_for_has_its_worker_killed() -> (
    None
):
    async with RewardRuntime(f"{H}:raw", raw=True, caller_deadlines=True, timeout=None, workers=1) as runtime:
        result = await runtime.call({"rows": [1, 2]})
        assert result.outcome is C and result.score is None
        worker, value = result.value
        assert value == {"rows": [1, 2]} and worker != os.getpid()
        with pytest.raises(RewardRuntimeError, match=r"score\(\) is for a reward"):
            await runtime.score(row("x"))
        with pytest.raises(asyncio.TimeoutError):  # the caller's deadline: the hang holds the only worker
            await asyncio.wait_for(runtime.call("hang"), 0.5)
        assert (await runtime.call(2)).value[1] == 2  # a fresh worker took over at once
        assert runtime.stats.killed == 1
        for _ in range(1000):  # a bound on a hang, not a claim about speed
            if not alive(worker):
                break
            await asyncio.sleep(0.01)
        assert not alive(worker)


def test_raw_and_caller_deadlines_need_workers() -> None:
    for setting in ("raw", "caller_deadlines"):
        with pytest.raises(RewardSettingError, match="need worker processes"):
            RewardRuntime(f"{H}:raw", workers=0, **{setting: True})
    with pytest.raises(RewardSettingError, match="need worker processes"):
        RewardRuntime(f"{H}:after_setup", workers=0, raw=True, setup=f"{H}:set_up")


async def test_a_setup_runs_once_per_worker_on_the_loop_its_samples_run_on() -> None:
    async with RewardRuntime(
        f"{H}:after_setup", raw=True, timeout=None, workers=1, setup=f"{H}:set_up", setup_args=({"kept": 1},)
    ) as runtime:
        results = await asyncio.gather(*(runtime.call(n) for n in range(3)))
    assert [r.value for r in results] == [({"kept": 1}, True)] * 3


async def test_a_setup_that_raises_fails_the_start_with_its_error() -> None:
    runtime = RewardRuntime(
        f"{H}:after_setup", raw=True, workers=1, setup=f"{H}:set_up", setup_args=("fail",)
    )
    with pytest.raises(WorkerStartError, match="ValueError: the setup refused"):
        await runtime.start()
    await runtime.close()
