"""osmosis_ai.rollout.testing without the server extra installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# Runs in a fresh interpreter in which every import of fastapi fails, as on an install without the
# ``server`` extra.
WITHOUT_FASTAPI = textwrap.dedent(
    """
    import sys

    class RefuseFastAPI:
        def find_spec(self, name, path=None, target=None):
            if name == "fastapi" or name.startswith("fastapi."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, RefuseFastAPI())

    from osmosis_ai.rollout.testing import RolloutCompletionTracker, create_mock_trainer_app

    tracker = RolloutCompletionTracker()
    tracker.record(response={"status": "COMPLETED"})
    assert tracker.wait(0) and tracker.responses == [{"status": "COMPLETED"}]
    try:
        create_mock_trainer_app(tracker)
    except ImportError as exc:
        print(type(exc).__name__)
        print(exc)
    else:
        raise SystemExit("create_mock_trainer_app() worked without fastapi")
    """
)


def test_mock_trainer_without_fastapi_names_the_extra_to_install() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_FASTAPI],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    kind, message = result.stdout.splitlines()[:2]
    assert kind == "ImportError"
    assert "pip install 'osmosis-ai[server]'" in message
    assert "create_mock_trainer_app()" in message
