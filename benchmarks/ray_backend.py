"""``osmosis eval --backend ray`` (2 CPUs) against the same run in one process, and Ray's start-up cost.

Run: ``.venv/bin/python -m benchmarks.ray_backend [--rows 500] [--n 4] [--batch-size 64]``

The eval throughput case of ``benchmarks/eval_throughput.py`` (its provider stand-in in a child
process answering after ``--latency`` seconds, its agent, eval function and dataset), measured side
by side after a warm-up of each: one process (``--backend local``), then Ray with 2 CPUs (two
workers, ``--batch-size`` shared between them) joining a local Ray this process started. Ray's own
cost is reported apart: starting and stopping the local instance (``ray.init(num_cpus=2)``,
``ray.shutdown()``), and the workers' start and stop inside each command (the wall time of a
1-row run). Each run's ratio is ideal / measured, the ideal being ``rows x n x latency / batch size``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from benchmarks.eval_throughput import _dataset, run_eval
from benchmarks.openai_stub import StubProcess


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1, help="the provider's seconds per answer")
    args = parser.parse_args()
    import ray

    runs = args.rows * args.n
    ideal = runs * args.latency / args.batch_size
    ray_options = ("--backend", "ray")
    with tempfile.TemporaryDirectory() as tmp, StubProcess(delay=args.latency) as api_base:
        folder = Path(tmp)
        started = time.perf_counter()
        ray.init(
            address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False
        )
        init = time.perf_counter() - started
        try:
            (folder / "warm").mkdir()
            warm = _dataset(folder / "warm", 1)
            run_eval(api_base, warm, folder / "warm-local.sqlite", n=1, batch_size=1)
            workers = run_eval(
                api_base, warm, folder / "warm-ray.sqlite", n=1, batch_size=2, extra=ray_options
            )
            dataset = _dataset(folder, args.rows)
            local = run_eval(api_base, dataset, folder / "local.sqlite", n=args.n, batch_size=args.batch_size)
            on_ray = run_eval(api_base, dataset, folder / "ray.sqlite", n=args.n, batch_size=args.batch_size,
                              extra=ray_options)  # fmt: skip
        finally:
            started = time.perf_counter()
            ray.shutdown()
            shutdown = time.perf_counter() - started
    print(f"osmosis eval: {args.rows} rows x n={args.n}, --batch-size {args.batch_size}, "
          f"{args.latency * 1000:.0f} ms latency; ideal {ideal:.2f} s")  # fmt: skip
    print(f"{'':<40}{'wall s':>8}{'ratio to ideal':>16}{'driver CPU per run':>20}")
    for label, (wall, cpu) in (
        ("one process (--backend local)", local),
        ("Ray, 2 CPUs (--backend ray)", on_ray),
    ):
        print(f"{label:<40}{wall:>8.2f}{ideal / wall:>15.2f}x{cpu / runs * 1000:>17.2f} ms")
    print(f"Ray over one process: {local[0] / on_ray[0]:.2f}x (goal >= 1.6x where the client CPU binds); "
          f"driver CPU {on_ray[1]:.2f} s of {on_ray[0]:.2f} s; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"Ray's own cost: local instance start {init:.2f} s, stop {shutdown:.2f} s; a command's workers "
          f"start and stop (a 1-row run) {workers[0]:.2f} s, counted in the Ray run above")  # fmt: skip


if __name__ == "__main__":
    main()
