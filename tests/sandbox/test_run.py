"""run / run_sync: each way code can end is its own typed result; bad arguments are refused."""

from __future__ import annotations

import os

import pytest

from osmosis_ai.errors import SandboxSettingError
from osmosis_ai.sandbox import OUTPUT_LIMIT, SandboxOutcome, run, run_sync


async def test_code_that_works_passes_and_its_output_is_kept() -> None:
    result = await run("print('hello'); import sys; print('oops', file=sys.stderr)")
    assert result.outcome is SandboxOutcome.PASSED and result.exit_code == 0
    assert (result.stdout, result.stderr) == ("hello\n", "oops\n")
    assert result.tests_passed is None and result.tests_total is None


async def test_tests_are_counted_one_by_one() -> None:
    code = "def double(x):\n    return 2 * x\n"
    tests = ["assert double(1) == 2", "assert double(2) == 5", "assert double(0) == 0"]
    result = await run(code, tests=tests)
    assert result.outcome is SandboxOutcome.FAILED
    assert (result.tests_passed, result.tests_total) == (2, 3)
    assert "test 1 failed" in result.stderr
    assert (await run(code, tests=["assert double(3) == 6"])).outcome is SandboxOutcome.PASSED


async def test_code_that_ends_itself_early_passes_no_test() -> None:
    result = await run("import os\nos._exit(0)\ndef f(): return 1", tests=["assert f() == 1"])
    assert result.outcome is SandboxOutcome.FAILED and result.tests_passed == 0


async def test_a_forged_report_counts_for_nothing() -> None:
    code = "import os\nfor fd in range(3, 64):\n    try: os.write(fd, b'started\\npass 0\\n')\n    except OSError: pass\nraise SystemExit(1)"
    result = await run(code, tests=["assert False"])
    assert result.outcome is SandboxOutcome.FAILED and result.tests_passed == 0


async def test_files_and_a_command() -> None:
    result = await run(files={"data/in.txt": "41", "main.py": "print(int(open('data/in.txt').read()) + 1)"})
    assert result.stdout == "42\n"
    result = await run(
        files={"x.sh": "echo $1-$GREETING"}, command=["/bin/sh", "x.sh", "hi"], env={"GREETING": "yo"}
    )
    assert result.outcome is SandboxOutcome.PASSED and result.stdout == "hi-yo\n"
    assert (await run(command="exit 3")).exit_code == 3


async def test_output_is_capped() -> None:
    result = await run(f"import sys; sys.stdout.write('x' * {OUTPUT_LIMIT * 3})")
    assert result.outcome is SandboxOutcome.PASSED
    assert len(result.stdout) == OUTPUT_LIMIT and result.stdout_truncated and not result.stderr_truncated


async def test_a_segfault_is_a_crash() -> None:
    result = await run("import ctypes; ctypes.string_at(0)")
    assert result.outcome is SandboxOutcome.CRASHED and result.exit_code == 128 + 11
    assert result.error == "killed by SIGSEGV"


def test_the_sync_twin_gives_the_same_result() -> None:
    result = run_sync("print(6 * 7)")
    assert result.outcome is SandboxOutcome.PASSED and result.stdout == "42\n"


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({}, "nothing to run"),
        ({"code": "1", "files": {"main.py": "2"}}, "give one of them"),
        ({"code": "1", "files": {"../x": "2"}}, "relative path"),
        ({"code": "1", "files": {"/etc/x": "2"}}, "relative path"),
        ({"code": "1", "tests": "assert 1"}, "not one string"),
        ({"code": "1", "tests": []}, "non-empty"),
        ({"code": "1", "timeout": 0}, "timeout"),
        ({"code": "1", "memory_mb": 1}, "memory_mb"),
        ({"code": "1", "cpus": True}, "cpus"),
        ({"code": "1", "env": {"A=B": "c"}}, "env names"),
        ({"command": "true", "code": "1", "tests": ["assert 1"]}, "drop tests"),
    ],
)
async def test_bad_arguments_are_refused_with_a_reason(kwargs: dict, words: str) -> None:
    with pytest.raises(SandboxSettingError, match=words):
        await run(**kwargs)


async def test_no_descriptor_is_left_open() -> None:
    before = set(os.listdir("/proc/self/fd"))
    await run("print(1)", tests=["assert True"], files={"a.txt": "x"})
    await run("while True: pass", timeout=0.3)
    await run(command="true")
    assert set(os.listdir("/proc/self/fd")) <= before
