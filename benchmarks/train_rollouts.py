"""Rollouts/s of the tiny model on a CPU through TrainGate, against the model's own generation of the same tokens.

Run: ``.venv/bin/python -m benchmarks.train_rollouts [--rollouts 32] [--concurrency 8] [--rounds 3]``

A GRPO step's rollouts as ``OsmosisRollouts`` runs them (the calculator agent served in this process,
the tiny model answering through TrainGate, ``--concurrency`` rollouts in flight, the model's
``generate`` one call at a time), timed as rollouts/s; in the same round, the same turns generated
by the bare model (:func:`benchmarks.train_adapter.bare_generation`). The figure is rollouts/s and
its ratio to the bare generation's rate: the share of the machine's generation speed a training
step keeps.
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks.train_adapter import bare_generation, rows, setup, through_traingate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rollouts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=16)
    options = parser.parse_args()
    trainer, model_dir = setup(options.max_tokens)
    data = rows(options.rollouts)
    through_traingate(trainer, model_dir, data[:2], 1)  # warm: imports, the first generate
    rates, ratios = [], []
    for round_ in range(1, options.rounds + 1):
        gate_s, turns = through_traingate(trainer, model_dir, data, options.concurrency)
        bare_s = bare_generation(trainer, turns)
        rates.append(len(data) / gate_s)
        ratios.append(bare_s / gate_s)
        print(f"round {round_}: {len(data)} rollouts ({len(turns)} turns) in {gate_s:.2f}s = {rates[-1]:.1f} "
              f"rollouts/s; the same tokens by the bare model {bare_s:.2f}s ({len(data) / bare_s:.1f}/s)")  # fmt: skip
    print(f"tiny model on CPU: {statistics.median(rates):.1f} rollouts/s through TrainGate at concurrency "
          f"{options.concurrency}, x{statistics.median(ratios):.2f} the bare generation's rate "
          f"(median of {options.rounds} rounds)")  # fmt: skip


if __name__ == "__main__":
    main()
