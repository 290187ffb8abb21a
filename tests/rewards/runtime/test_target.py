"""Resolving a reward: every way to name one, and every way of getting it wrong, before any process starts."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from osmosis_ai.rewards.eval_fn import FULL, SIMPLE
from osmosis_ai.rewards.runtime import RewardLoadError, RewardRuntime
from osmosis_ai.rewards.runtime.target import resolve
from tests.rewards.runtime import hostile
from tests.support.processes import children

H = "tests.rewards.runtime.hostile"


@pytest.mark.parametrize(
    ("reward", "name", "mode", "keywords"),
    [
        (f"{H}:hostile", f"{H}:hostile", SIMPLE, ("solution_str", "ground_truth", "extra_info")),
        (hostile.hostile, f"{H}:hostile", SIMPLE, ("solution_str", "ground_truth", "extra_info")),
        (hostile.decorated, f"{H}:decorated", SIMPLE, ("solution_str", "ground_truth", "extra_info")),
        (hostile.full_mode, f"{H}:full_mode", FULL, ("messages", "ground_truth", "metadata")),
        (hostile.positional, f"{H}:positional", SIMPLE, None),  # its own parameter names: by position
        (hostile.closure, f"{H}:closure", SIMPLE, ("solution_str", "ground_truth", "extra_info")),
    ],
)
def test_a_reward_is_named_by_module_and_attribute(
    reward: object, name: str, mode: str, keywords: object
) -> None:
    target = resolve(reward, by_name=True)  # type: ignore[arg-type]
    assert (target.name, target.mode, target.keywords) == (name, mode, keywords)
    assert target.module == H and target.main_file is None


def test_an_async_reward_is_known_to_be_async() -> None:
    assert resolve(hostile.decorated_async, by_name=True).is_async
    assert not resolve(hostile.decorated, by_name=True).is_async


def test_a_module_in_the_working_directory_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_rewards_in_cwd.py").write_text(
        "def score(solution_str, ground_truth, extra_info=None):\n    return 1.0\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    assert resolve("my_rewards_in_cwd:score", by_name=True).name == "my_rewards_in_cwd:score"


@pytest.mark.parametrize(
    ("reward", "message"),
    [
        ("no_colon", r"invalid reward 'no_colon': expected 'module.path:attribute' \(e.g. 'my_rewards:exact_match'\)"),
        (":fn", r"invalid reward ':fn'"),
        ("no_such_module_xyz:fn", r"cannot import 'no_such_module_xyz' for reward 'no_such_module_xyz:fn': "
         r"No module named 'no_such_module_xyz' \(looked in the working directory "),
        (f"{H}:missing", rf"module '{H}' has no attribute 'missing'; its public attributes are: .*decorated"),
        (f"{H}:NOT_CALLABLE", rf"reward '{H}:NOT_CALLABLE' is a int, not a callable"),
        (f"{H}:not_a_shape", rf"reward '{H}:not_a_shape' takes \(x, y\); its first parameter must be 'solution_str' "
         r"\(fn\(solution_str, ground_truth, extra_info\)\) or 'messages'"),
        (f"{H}:too_few", rf"reward '{H}:too_few' takes \(solution_str, ground_truth\), which cannot be called as "
         r"fn\(solution_str, ground_truth, extra_info\)"),
        ("tests.rewards.runtime.broken_module:fn", r"cannot import 'tests.rewards.runtime.broken_module' for reward "
         r"'tests.rewards.runtime.broken_module:fn': RuntimeError: this module cannot be imported$"),
        (42, r"a reward must be a callable or a 'module.path:attribute' string, got a int"),
    ],
)  # fmt: skip
def test_a_bad_reward_fails_before_any_worker_starts_with_a_precise_message(
    reward: object, message: str
) -> None:
    before = children()
    with pytest.raises(RewardLoadError, match=message):
        RewardRuntime(reward, workers=2)  # type: ignore[arg-type]
    assert children() == before


def test_what_a_worker_cannot_import_by_name_is_refused_unless_in_process() -> None:
    def local(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 1.0

    for reward in (
        local,
        lambda solution_str, ground_truth, extra_info: 1.0,
        functools.partial(hostile.hostile),
    ):
        with pytest.raises(
            RewardLoadError, match="cannot be imported by name in a worker process: define it at module"
        ):
            RewardRuntime(reward, workers=1)
        assert not RewardRuntime(reward, workers=0).isolated  # in-process, any callable will do


def test_the_cause_of_an_import_failure_is_kept_for_the_command_line() -> None:
    with pytest.raises(RewardLoadError) as caught:
        RewardRuntime("tests.rewards.runtime.broken_module:fn", workers=0)
    assert isinstance(caught.value.__cause__, RuntimeError)
