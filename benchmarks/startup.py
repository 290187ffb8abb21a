"""Start-up and per-call costs of the light surface of osmosis-ai.

Run: ``.venv/bin/python -m benchmarks.startup`` (or ``make bench``).

Everything is measured side by side in one run, alternating the commands, and reported as
medians and ratios, because the machines this runs on are shared and noisy:

* import time of ``from osmosis_ai import osmosis_reward`` against a bare interpreter start
  (goal <= 1.3x),
* peak RSS of that import,
* ``osmosis --help`` against a bare interpreter start (goal <= 2x),
* the same import with ``typing`` loaded too: what the light modules would cost with a plain
  ``from typing import TYPE_CHECKING`` instead of ``TYPE_CHECKING = False`` (kept while >= 1.05x),
* per-call overhead of an ``@osmosis_reward`` function over the undecorated function
  (goal <= 300 ns),
* the estimated cost of a self-hosted model's tokens (what every ``test``/``eval`` summary asks)
  in a fresh process, against the same with LiteLLM loaded, as it was before the price table was
  read from its file (kept while >= 1.05x),
* ``osmosis test --model openai/gpt-4o-mini`` without ``OPENAI_API_KEY``: the time to its
  missing-key line, against the same with LiteLLM imported first, as when LiteLLM's table named the
  variable (goal < 0.5 s).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path

RUNS = 30
# Measure what an installed package costs: with bytecode caches, as pip leaves them after installing.
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
ROOT = Path(__file__).resolve().parent.parent
BARE = [sys.executable, "-c", "pass"]
IMPORT = [sys.executable, "-c", "from osmosis_ai import osmosis_reward"]
IMPORT_WITH_TYPING = [sys.executable, "-c", "import typing; from osmosis_ai import osmosis_reward"]
RSS_PROBE = "import resource; {}; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
PRICE = (
    "from osmosis_ai.report.cost import estimated_cost; estimated_cost('openai/my-vllm-model', 3728, 1000)"
)
PRICE_GATED = [sys.executable, "-c", PRICE]
PRICE_WITH_LITELLM = [
    sys.executable,
    "-c",
    f"from osmosis_ai._litellm import import_litellm; import_litellm(); {PRICE}",
]
PRICE_RUNS = 5  # LiteLLM's import is seconds
MISSING_KEY_ARGS = [
    "test", "-m", "examples.calculator.agent:agent_loop", "-d", "examples/calculator/dataset.jsonl",
    "--model", "openai/gpt-4o-mini", "-q",
]  # fmt: skip
MISSING_KEY = [sys.executable, "-m", "osmosis_ai", *MISSING_KEY_ARGS]
MISSING_KEY_WITH_LITELLM = [
    sys.executable,
    "-c",
    "import sys; from osmosis_ai._litellm import import_litellm; import_litellm(); "
    f"from osmosis_ai.cli.main import main; sys.exit(main({MISSING_KEY_ARGS!r}))",
]
# Without any provider key or base URL (a base URL leaves the answer to LiteLLM).
NO_KEY_ENV = {k: v for k, v in ENV.items() if not k.endswith(("_API_KEY", "_API_BASE", "_BASE_URL"))}


def _wall(command: list[str], env: dict[str, str] = ENV, returncode: int = 0) -> float:
    start = time.perf_counter()
    ran = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if ran.returncode != returncode:
        raise SystemExit(f"{command} exited {ran.returncode}, not {returncode}: {ran.stderr.decode()}")
    return elapsed


def _paired_medians(
    a: list[str], b: list[str], runs: int = RUNS, env: dict[str, str] = ENV, returncode: int = 0
) -> tuple[float, float, float]:
    """Median wall time of ``a`` and ``b`` run alternately, and the median of the pairwise ratios."""
    _wall(a, env, returncode), _wall(b, env, returncode)  # warm the page cache and the bytecode caches
    times_a, times_b = [], []
    for _ in range(runs):
        times_a.append(_wall(a, env, returncode))
        times_b.append(_wall(b, env, returncode))
    ratios = [x / y for x, y in zip(times_a, times_b, strict=True)]
    return statistics.median(times_a), statistics.median(times_b), statistics.median(ratios)


def _peak_rss_mib(statement: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", RSS_PROBE.format(statement)],
        check=True,
        capture_output=True,
        text=True,
        env=ENV,
    ).stdout
    return int(out.strip()) / 1024


def _reward_overhead_ns() -> tuple[float, float]:
    """Per-call time of a plain reward and of the same reward decorated, in ns (best of repeats)."""
    from osmosis_ai import osmosis_reward

    def plain(solution_str: str, ground_truth: str, extra_info: dict = None) -> float:  # type: ignore[assignment]  # noqa: RUF013 (0.2's documented form)
        return 1.0 if solution_str == ground_truth else 0.0

    decorated = osmosis_reward(plain)
    number = 200_000

    def per_call(fn: object) -> float:
        timer = timeit.Timer("f('42', '42', None)", globals={"f": fn})
        return min(timer.repeat(repeat=7, number=number)) / number * 1e9

    per_call(plain), per_call(decorated)  # warm up
    return per_call(plain), per_call(decorated)


def main() -> int:
    osmosis = str(Path(sys.executable).with_name("osmosis"))
    import_s, bare_s, import_ratio = _paired_medians(IMPORT, BARE)
    help_s, bare2_s, help_ratio = _paired_medians([osmosis, "--help"], BARE)
    typing_s, _, typing_ratio = _paired_medians(IMPORT_WITH_TYPING, IMPORT)
    rss_bare = _peak_rss_mib("pass")
    rss_import = _peak_rss_mib("from osmosis_ai import osmosis_reward")
    plain_ns, decorated_ns = _reward_overhead_ns()
    price_s, litellm_s, price_ratio = _paired_medians(PRICE_WITH_LITELLM, PRICE_GATED, runs=PRICE_RUNS)
    late_key_s, key_s, key_ratio = _paired_medians(
        MISSING_KEY_WITH_LITELLM, MISSING_KEY, runs=PRICE_RUNS, env=NO_KEY_ENV, returncode=1
    )
    overhead = decorated_ns - plain_ns

    rows = [
        (
            "from osmosis_ai import osmosis_reward",
            f"{import_s * 1e3:.1f} ms",
            f"{import_ratio:.2f}x bare",
            "<= 1.3x",
        ),
        ("osmosis --help", f"{help_s * 1e3:.1f} ms", f"{help_ratio:.2f}x bare", "<= 2x"),
        (
            "the import if typing were loaded (plain TYPE_CHECKING)",
            f"{typing_s * 1e3:.1f} ms",
            f"{typing_ratio:.2f}x the import",
            "keep the trick if >= 1.05x",
        ),
        (
            "bare interpreter (python -c pass)",
            f"{statistics.mean([bare_s, bare2_s]) * 1e3:.1f} ms",
            "1.00x",
            "",
        ),
        (
            "peak RSS after the import",
            f"{rss_import:.1f} MiB",
            f"+{rss_import - rss_bare:.1f} MiB over bare",
            "",
        ),
        (
            "@osmosis_reward per-call overhead",
            f"{overhead:.0f} ns",
            f"{plain_ns:.0f} -> {decorated_ns:.0f} ns/call",
            "<= 300 ns",
        ),
        (
            "a self-hosted model's cost, fresh process",
            f"{litellm_s * 1e3:.0f} ms",
            f"{price_ratio:.1f}x faster than with LiteLLM ({price_s:.2f} s)",
            "keep the table read if >= 1.05x",
        ),
        (
            "osmosis test's missing-key line",
            f"{key_s * 1e3:.0f} ms",
            f"{key_ratio:.1f}x faster than after LiteLLM's import ({late_key_s:.2f} s)",
            "< 0.5 s",
        ),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    print(f"osmosis-ai start-up benchmark ({RUNS} paired runs, medians; Python {sys.version.split()[0]})")
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    met = import_ratio <= 1.3 and help_ratio <= 2.0 and overhead <= 300 and key_s < 0.5
    print("all goals met" if met else "some goals NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
