"""Rewards the runtime tests score in real worker processes, imported there by name.

``hostile`` does what its ``solution_str`` says (``"score:0.5"``, ``"loop"``, ``"segv"``, ...), so one
pool can meet every kind of misbehaviour in one batch. The others try one shape or mode each.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from osmosis_ai import osmosis_reward, osmosis_rubric

CALLS = 0  # module state: counts the calls this worker process has served


def hostile(solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None) -> Any:
    global CALLS
    CALLS += 1
    action, _, argument = solution_str.partition(":")
    if action == "score":
        return float(argument)
    if action == "loop":
        while True:
            pass
    if action == "sleep":
        time.sleep(float(argument or 3600))
        return 1.0
    if action == "hold":  # says it started (argument.started), then runs until argument exists
        open(f"{argument}.started", "w").close()
        while not os.path.exists(argument):
            time.sleep(0.01)
        return 1.0
    if action == "sys_exit":
        sys.exit(3)
    if action == "os_exit":
        os._exit(7)
    if action == "segv":
        ctypes.string_at(0)
    if action == "kill9":  # what the kernel's out-of-memory killer does
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "alloc":
        block = bytearray(int(argument) * 1024 * 1024)
        return float(len(block))
    if action == "print":
        print("x" * 10_000_000)
        print("and to stderr", file=sys.stderr)
        return 1.0
    if action == "fd_print":
        os.write(1, b"y" * 10_000_000)
        return 1.0
    if action == "thread":
        threading.Thread(target=time.sleep, args=(3600,)).start()  # not a daemon: would hold a normal exit
        return 1.0
    if action == "child":  # a process of the reward's own, its command line marked, then a hang
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", argument])
        while True:
            time.sleep(1)
    if action == "session_child":  # the same, out of the worker's group and session; and a grandchild
        script = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)', {argument!r}], start_new_session=True); time.sleep(3600)"
        subprocess.Popen([sys.executable, "-c", script, argument], start_new_session=True)
        while True:
            time.sleep(1)
    if action == "spawn_and_return":  # leaves a process of its own in a new session, and returns
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)", argument], start_new_session=True
        )
        return 1.0
    if action == "numpy":
        import numpy as np  # here, not at the top: every worker imports this module, few score numpy

        return np.float32(0.5)
    if action == "nan":
        return float("nan")
    if action == "true":
        return True
    if action == "raise":
        raise ValueError("bad answer\nsecond line of the message")
    if action == "input":
        return float(input())
    if action == "paid":  # a side effect that must not repeat: the row's tag, once per call
        with open(argument, "a") as ledger:
            ledger.write(f"{ground_truth}\n")
        return 1.0
    if action == "closefds":  # paid, then breaks its worker just after returning: its pipes are gone
        with open(argument, "a") as ledger:
            ledger.write(f"{ground_truth}\n")
        os.closerange(3, 1 << 16)
        return 1.0
    if action == "junk":  # writes to every descriptor it finds open, the worker's result pipe among them
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                os.write(int(fd), b"junk that is not a frame\n")
        return 1.0
    if action == "pickle":  # replaces what frames are made with
        import pickle

        pickle.dumps = lambda *args, **kwargs: b"junk"
        return 1.0
    if action == "leak":  # moves the worker elsewhere and changes its environment
        os.chdir("/")
        os.environ["OSMOSIS_TEST_LEAK"] = "1"
        os.environ.pop("HOME", None)
        return 1.0
    if action == "clean":  # 1.0 when no sample before it changed what it sees
        return float(
            os.getcwd() == argument and "OSMOSIS_TEST_LEAK" not in os.environ and "HOME" in os.environ
        )
    if action == "pid":
        return float(os.getpid())
    if action == "calls":
        return float(CALLS)
    raise AssertionError(f"unknown action {solution_str!r}")


@osmosis_reward
def decorated(solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any) -> float:
    return 1.0 if solution_str.strip() == ground_truth.strip() else 0.0


@osmosis_reward
async def decorated_async(
    solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> float:
    import asyncio  # here, not at the top: the workers running only sync rewards never need it

    action, _, argument = solution_str.partition(":")
    if action == "sleep":
        await asyncio.sleep(float(argument))
    if action == "stubborn":  # swallows its cancellation
        while True:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)
    if action == "block":  # blocks its event loop: only a kill stops it
        time.sleep(3600)
    return 1.0 if solution_str == ground_truth else 0.0


def full_mode(messages: list[dict[str, Any]], ground_truth: str, metadata: dict[str, Any]) -> float:
    """An eval function in full mode: the number of assistant turns, plus the metadata's bonus."""
    return float(sum(m["role"] == "assistant" for m in messages)) + float(metadata.get("bonus", 0))


def simple_mode(solution_str: str, ground_truth: str, extra_info: dict[str, Any]) -> float:
    """An eval function in simple mode: the length of the answer it is given."""
    return float(len(solution_str))


def positional(solution_str: str, truth: str, info: dict[str, Any] | None = None) -> float:
    """A trainer-side reward whose parameters are named its own way: called by position."""
    return 1.0 if solution_str == truth else 0.0


def _make_reward(bonus: float) -> Any:
    def reward(solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None) -> float:
        return bonus + (solution_str == ground_truth)

    return reward


closure = _make_reward(10.0)  # a closure bound at module level: importable by name, never pickled


@osmosis_rubric
def rubric(solution_str: str, ground_truth: str | None, extra_info: dict, **kwargs: Any) -> float:
    """A rubric reward: the judge is a loopback stand-in named by the environment."""
    from osmosis_ai import evaluate_rubric

    return evaluate_rubric(
        rubric="Score 1 when the answer is right.",
        solution_str=solution_str,
        model_info={
            "provider": "openai",
            "model": "gpt-4o-mini",
            "api_key": "sk-test",
            "api_base": os.environ["RUNTIME_TEST_JUDGE"],
        },
        ground_truth=ground_truth,
    )


def not_a_shape(x: int, y: int) -> float:
    return 0.0


def too_few(solution_str: str, ground_truth: str) -> float:
    return 0.0


NOT_CALLABLE = 42

raise_at_import = None  # the module imports: the runtime tests import a broken sibling for that


def raw(value: Any) -> tuple[int, Any]:
    """A raw target (not a reward): its process id and ``value`` back; ``"hang"`` blocks for good."""
    while value == "hang":
        time.sleep(1)
    return os.getpid(), value


SET_UP: dict[str, Any] = {}  # what a runtime's setup left for the samples after it


async def set_up(value: Any) -> None:
    """A runtime's setup: keeps ``value`` and the event loop it ran on; ``"fail"`` raises."""
    if value == "fail":
        raise ValueError("the setup refused")
    SET_UP.update(value=value, loop=asyncio.get_running_loop())


async def after_setup(_: Any) -> tuple[Any, bool]:
    """A raw async target: what the setup kept, and whether this runs on the setup's event loop."""
    return SET_UP["value"], SET_UP["loop"] is asyncio.get_running_loop()
