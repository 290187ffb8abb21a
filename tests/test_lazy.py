"""``osmosis_ai._lazy``: the lazy export tables behind the packages' ``__getattr__``, and their errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from osmosis_ai._lazy import lazy_exports


def test_a_missing_module_is_reported_with_the_attribute_name() -> None:
    namespace: dict[str, object] = {}
    getattr_, dir_ = lazy_exports("pkg", {"thing": "osmosis_ai.no_such_module"}, namespace)
    with pytest.raises(ImportError, match=r"pkg\.thing is not available"):
        getattr_("thing")
    assert dir_() == ["thing"]


def test_a_missing_optional_dependency_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "needs_fastapi.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'fastapi'\", name='fastapi')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    getattr_, _ = lazy_exports("pkg", {"create_app": "needs_fastapi"}, {})
    with pytest.raises(
        ImportError, match=r"pkg\.create_app needs the package 'fastapi'.*osmosis-ai\[server\]"
    ):
        getattr_("create_app")


def test_a_missing_ray_names_its_extra() -> None:
    from osmosis_ai._lazy import install_hint

    assert install_hint("ray") == "install it with: pip install 'osmosis-ai[ray]'"


def test_the_backend_modules_load_ray_only_when_it_runs() -> None:
    import subprocess
    import sys

    code = (
        "import sys, osmosis_ai.runs.backends.ray, osmosis_ai.runs.backends.open, osmosis_ai.cli.commands.eval, "
        "osmosis_ai.cli.commands.test; print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


OBSERVABILITY_MODULES = ("prometheus_client", "opentelemetry", "wandb", "tensorboardX", "mlflow")


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {name.partition(".")[0] for name in out.split()}


@pytest.mark.parametrize(
    "statement",
    [
        "import osmosis_ai.observe.tracing, osmosis_ai.observe.metrics, osmosis_ai.observe.loggers",
        "import osmosis_ai.runs.engine, osmosis_ai.models.complete, osmosis_ai.rollout.client",
        "from osmosis_ai.rollout.server import create_app; from examples.calculator.agent import agent_loop; "
        "from osmosis_ai.rollout.server.config import ServerConfig; create_app(agent_loop, config=ServerConfig(metrics=False))",
        "from osmosis_ai.cli.main import main",
    ],
)
def test_the_observability_tools_load_only_when_used(statement: str) -> None:
    loaded = _loaded_after(statement)
    if "fastapi" in loaded:  # recent FastAPI versions load the OpenTelemetry API themselves
        loaded.discard("opentelemetry")
    assert not loaded & set(OBSERVABILITY_MODULES)


def test_the_server_loads_redis_and_prometheus_only_when_asked() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from osmosis_ai.rollout.server import executor, serve, state, workers; "
        "import tempfile, os; state.open_state(None); "
        "state.open_state(os.path.join(tempfile.mkdtemp(), 'state.sqlite3')); "
        "print(sorted(m for m in ('redis', 'prometheus_client') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_self_hosted_models_run_is_priced_without_importing_litellm() -> None:
    # LiteLLM's import is seconds at the end of every test or eval, and its table prices no such model
    # (a listed one is priced through it: tests/report/test_cost.py)
    statement = (
        "from osmosis_ai.report.cost import estimated_cost; "
        "assert estimated_cost('scripted', 3728, 1000) is None; "
        "assert estimated_cost('openai/my-vllm-model', 3728, 1000) is None"
    )
    assert "litellm" not in _loaded_after(statement)


def test_the_reward_decorator_import_loads_no_module_a_bare_interpreter_does_not_beside_the_package() -> None:
    """``from osmosis_ai import osmosis_reward`` adds only the package's own few modules to what a
    bare interpreter has loaded, and a few modules of the standard library's import machinery: no
    typing, no importlib.util, no collections (each costs start-up time in every process that scores
    a reward)."""
    listing = "import sys; print(' '.join(sorted(sys.modules)))"
    bare = subprocess.run([sys.executable, "-c", listing], capture_output=True, text=True, check=True).stdout
    code = f"from osmosis_ai import osmosis_reward; {listing}"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    added = set(loaded.split()) - set(bare.split())
    cheap = {"__future__", "importlib", "importlib._bootstrap", "importlib._bootstrap_external", "warnings"}
    assert {m for m in added if m != "osmosis_ai" and not m.startswith("osmosis_ai.")} <= cheap
    assert len([m for m in added if m.startswith("osmosis_ai")]) <= 6, sorted(added)
