"""A small GRPO job from a plan: what ``osmosis train`` runs (TRL's ``GRPOTrainer`` over :mod:`osmosis_ai.train.trl`).

A :class:`TrainPlan` is plain data: the model (a directory, a Hugging Face name, or ``tiny``: the
tiny model built offline into the output directory), the dataset, the rollout server being trained
(:class:`TargetSpec`: an agent named ``MODULE:ATTR`` served in this process, a 0.3 workflow with its
grader, or the URL of a running 0.2 or 0.3 server) and the GRPO settings. :func:`run_training`
checks what is cheap first (the dataset's rows, the model's path, the agent's import, the server's
``/health``) before torch is imported, then trains for ``steps`` steps of ``batch_size`` prompts,
each run ``group_size`` times through TrainGate. Every rollout is recorded in the run engine's
journal (``OUTPUT/journal.sqlite``, one model tag per step: ``step-0001``...) as ``rollout run``'s
record, with the dataset row it ran, whether it was trained on and why not; after each step
``on_step`` gets a :class:`StepReport` (the trainer's loss and reward, the share excluded, tokens/s
and the step's records), and the trained model is saved to ``OUTPUT/model``. A typed failure is
excluded from its group, never a reward of 0 (docs/design/training.md); a run in which no rollout
could be trained on raises :class:`~osmosis_ai.errors.TrainingError`.
"""

from __future__ import annotations

import importlib.util
import re
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from osmosis_ai.errors import TrainingError

__all__ = [
    "StepReport",
    "TargetSpec",
    "TrainPlan",
    "TrainResult",
    "check_model",
    "run_training",
]

TINY = "tiny"
HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
JOURNAL = "journal.sqlite"
TRAINER_MODULES = ("torch", "transformers", "trl", "datasets")  # what the trl extra installs


@dataclass(frozen=True)
class TargetSpec:
    """The rollout server being trained: ``agent`` (``MODULE:ATTR``, with ``grader`` ``MODULE:CLASS``
    when it names a 0.3 workflow) served in this process, or ``url`` (``api_key`` its Bearer key)."""

    agent: str | None = None
    grader: str | None = None
    url: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        if self.url is not None:
            return self.url
        return str(self.agent) if self.grader is None else f"{self.agent} + {self.grader}"


@dataclass(frozen=True)
class TrainPlan:
    """A GRPO job as data (see the module docstring). ``batch_size`` counts prompts per step, each run
    ``group_size`` times; ``max_tokens`` bounds each model turn, ``timeout`` each rollout (seconds)."""

    model: str
    dataset: str
    target: TargetSpec
    output_dir: str
    steps: int = 4
    group_size: int = 4
    batch_size: int = 2
    learning_rate: float = 1e-6
    max_tokens: int = 256
    max_turns: int = 4
    temperature: float = 1.0
    seed: int = 0
    timeout: float = 300.0
    limit: int | None = None

    def description(self) -> dict[str, Any]:
        """The plan as JSON values (what the journal is made for; no API key)."""
        return asdict(self) | {"target": self.target.describe()}


@dataclass
class StepReport:
    """One training step as it ended: the trainer's figures (``logs``: TRL's log of the step) and the
    rollouts it trained on, as journal records."""

    step: int
    steps: int
    logs: dict[str, float]
    records: list[dict[str, Any]]
    rollout_seconds: float
    generated_tokens: int

    @property
    def loss(self) -> float | None:
        return self.logs.get("loss")

    @property
    def reward(self) -> float | None:
        """The mean reward of the step's scored rollouts, as the trainer computed it."""
        return self.logs.get("reward")

    @property
    def excluded_frac(self) -> float | None:
        return self.logs.get("osmosis/excluded_frac")

    @property
    def trained(self) -> int:
        return sum(bool(r.get("trained")) for r in self.records)

    @property
    def tokens_per_s(self) -> float | None:
        return self.generated_tokens / self.rollout_seconds if self.rollout_seconds > 0 else None


@dataclass
class TrainResult:
    """A finished job: where its model and journal are, and every step's report."""

    model_dir: Path
    journal: Path
    seconds: float
    steps: list[StepReport]

    @property
    def rollouts(self) -> int:
        return sum(len(step.records) for step in self.steps)

    @property
    def trained(self) -> int:
        return sum(step.trained for step in self.steps)


def check_model(model: str) -> str | None:
    """Why ``model`` cannot name a model (``tiny``, a directory with ``config.json``, or a Hugging Face
    name ``org/name``), or ``None``. Reads no file beyond the directory's listing and imports nothing."""
    if model == TINY:
        return None
    path = Path(model).expanduser()
    if path.is_dir():
        return None if (path / "config.json").is_file() else f"{model}: a model directory holds config.json"
    if path.exists():
        return f"{model}: not a directory (a model is a directory, a Hugging Face name or 'tiny')"
    if HUB_NAME.fullmatch(model) and not model.startswith((".", "/", "~")):
        return None
    return f"{model}: no such model directory (a model is a directory, a Hugging Face name or 'tiny')"


def run_training(plan: TrainPlan, on_step: Callable[[StepReport], None] | None = None) -> TrainResult:
    """Run ``plan`` (see the module docstring); ``on_step`` is called after each step.

    Raises:
        DatasetError: the dataset cannot be read, or has fewer rows than a step needs.
        LoadError: the agent (or grader) cannot be imported.
        TrainGateError: the ``url`` server does not answer its ``/health``.
        JournalError: the journal cannot be written.
        TrainingError: the model does not load, the trainer refuses a setting, or nothing was trainable.
    """
    started = time.monotonic()
    missing = [name for name in TRAINER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise TrainingError(f"training needs {', '.join(missing)}: pip install 'osmosis-ai[trl]'")
    rows = _rows(plan)
    problem = check_model(plan.model)
    if problem is not None:
        raise TrainingError(problem)
    target = _target(plan.target)
    output = Path(plan.output_dir)
    from osmosis_ai.runs.journal import COMPLETED, Journal

    labels = {
        "command": "train",
        "model": plan.model,
        "dataset": plan.dataset,
        "module": plan.target.describe(),
    }
    journal = Journal.open(output / JOURNAL, plan.description(), fresh=True, labels=labels)
    try:
        steps = _train(plan, rows, target, output, journal, on_step)
        journal.mark(COMPLETED)
    finally:
        journal.close()
    if not any(step.trained for step in steps):
        total = sum(len(step.records) for step in steps)
        first = next((r.get("not_trained") for s in steps for r in s.records if r.get("not_trained")), None)
        raise TrainingError(
            f"no rollout could be trained on: all {total} were excluded (first: {first}); "
            f"see the journal {output / JOURNAL}"
        )
    return TrainResult(output / "model", output / JOURNAL, time.monotonic() - started, steps)


def _rows(plan: TrainPlan) -> list[dict[str, Any]]:
    from osmosis_ai.errors import DatasetValidationError
    from osmosis_ai.runs.dataset import DatasetReader

    rows = [dict(row) for row in DatasetReader(plan.dataset).read(plan.limit)]
    if len(rows) < plan.batch_size:
        raise DatasetValidationError(
            f"{plan.dataset}: {len(rows)} row(s), fewer than batch_size ({plan.batch_size}) prompts per step"
        )
    return rows


def _target(spec: TargetSpec) -> Any:
    """The :class:`~osmosis_ai.train.rollouts.Target`: the agent imported, or the server's ``/health`` answered."""
    from osmosis_ai.train.rollouts import Target

    if spec.url is None:
        from osmosis_ai.rollout.loading import AgentRef

        return Target(agent=AgentRef(module=spec.agent, grader=spec.grader).load())
    from osmosis_ai._sync import run_sync
    from osmosis_ai.traingate.launcher import RolloutLauncher

    async def check() -> None:
        async with RolloutLauncher(spec.url or "", api_key=spec.api_key) as launcher:
            await launcher.check()

    run_sync(check())
    return Target(url=spec.url, api_key=spec.api_key)


class _StepRollouts:
    """``OsmosisRollouts`` as the trainer calls it, keeping each call's rollouts as journal records."""

    def __init__(self, rollouts: Any, model: str) -> None:
        self.rollouts = rollouts
        self.model = model
        self.sessions: list[Any] = []
        self.done: deque[tuple[list[dict[str, Any]], float, int]] = deque()

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from osmosis_ai.train.trl import REWARD_KEY

        self.sessions = []
        started = time.monotonic()
        output: dict[str, Any] = self.rollouts(prompts, trainer)
        seconds = time.monotonic() - started
        by_position = {session.row_index: session for session in self.sessions}
        seen: dict[int, int] = {}
        records = []
        for position, prompt in enumerate(prompts):
            row = self.rollouts.index_of(prompt)
            occurrence = seen[row] = seen.get(row, -1) + 1
            record = by_position[position].to_record()  # every rollout the adapter returned was scored
            reward = output[REWARD_KEY][position]
            record |= {
                "row_index": row,
                "sample_index": occurrence,
                "batch_index": position,
                "model": self.model,
                "trained": reward is not None,
                "not_trained": None if reward is not None else output["osmosis_error"][position],
            }
            records.append(record)
        generated = sum(sum(mask) for mask in output["env_mask"])
        self.done.append((records, seconds, generated))
        return output


def _train(
    plan: TrainPlan,
    rows: list[dict[str, Any]],
    target: Any,
    output: Path,
    journal: Any,
    on_step: Callable[[StepReport], None] | None,
) -> list[StepReport]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    from osmosis_ai.outcome import Outcome
    from osmosis_ai.runs.journal import SampleRecord
    from osmosis_ai.train.rollouts import Limits
    from osmosis_ai.train.tiny import build_tiny_model
    from osmosis_ai.train.trl import OsmosisRollouts, prompt_of, server_reward

    model_dir: str | Path = plan.model
    if plan.model == TINY:
        model_dir = build_tiny_model(output / "tiny-model", seed=plan.seed)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
    except (OSError, ValueError) as exc:
        raise TrainingError(f"{plan.model}: the model does not load: {exc}") from None
    if Path(model_dir).is_dir():
        tokenizer_dir = Path(model_dir)
    else:  # a Hugging Face name: TrainGate renders with the tokenizer files transformers fetched
        tokenizer_dir = output / "tokenizer"
        tokenizer.save_pretrained(tokenizer_dir)
    reports: list[StepReport] = []
    recorder: _StepRollouts

    def keep(session: Any) -> None:
        recorder.sessions.append(session)

    try:
        limits = Limits(timeout=plan.timeout, max_turns=plan.max_turns)
        rollouts = OsmosisRollouts(
            target, dataset=rows, tokenizer=tokenizer_dir, limits=limits, on_rollout=keep
        )
    except ValueError as exc:
        raise TrainingError(str(exc)) from None
    recorder = _StepRollouts(rollouts, plan.model)

    class Steps(TrainerCallback):
        def on_log(
            self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kw: Any
        ) -> None:
            if not logs or "loss" not in logs or not recorder.done:
                return
            records, seconds, generated = recorder.done.popleft()
            step = len(reports) + 1
            tag = f"step-{step:04d}"
            journal.record_many([
                SampleRecord(r["row_index"], r["sample_index"], Outcome(r["outcome"]), r, model_tag=tag)
                for r in records
            ])  # fmt: skip
            figures = {k: float(v) for k, v in logs.items() if isinstance(v, (int, float))}
            report = StepReport(step, plan.steps, figures, records, seconds, generated)
            reports.append(report)
            if on_step is not None:
                on_step(report)

    cuda = torch.cuda.is_available()
    try:
        args = GRPOConfig(
            output_dir=str(output / "trainer"), per_device_train_batch_size=plan.batch_size * plan.group_size,
            num_generations=plan.group_size, max_steps=plan.steps, max_completion_length=plan.max_tokens,
            learning_rate=plan.learning_rate, temperature=plan.temperature, seed=plan.seed, logging_steps=1,
            report_to=[], save_strategy="no", use_cpu=not cuda, bf16=cuda and torch.cuda.is_bf16_supported(),
            beta=0.0, disable_tqdm=True,
        )  # fmt: skip
        with warnings.catch_warnings():  # rollout_func is documented as experimental: this is its use
            warnings.filterwarnings("ignore", message=".*rollout_func.*experimental", category=UserWarning)
            trainer = GRPOTrainer(
                model=model,
                processing_class=tokenizer,
                reward_funcs=[server_reward],
                args=args,
                train_dataset=Dataset.from_list([{"prompt": prompt_of(row)} for row in rows]),
                rollout_func=recorder,
                callbacks=[Steps()],
            )
    except ValueError as exc:
        raise TrainingError(f"the trainer refused the settings: {exc}") from None
    # A library prints nothing: the steps reach the caller through on_step.
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    try:
        trainer.train()
    except RuntimeError as exc:  # torch's own failures (out of memory, a device error) end the job
        raise TrainingError(f"training stopped at step {len(reports) + 1}: {exc}") from exc
    trainer.save_model(str(output / "model"))
    tokenizer.save_pretrained(output / "model")
    return reports
