"""``osmosis rollout run`` and ``osmosis rollout bench``: drive a rollout server with a local TrainGate.

``run`` sends every dataset row (``--n`` times) through the rollout server — the agent served
in-process with ``-m module:attr``, or an existing server with ``--url`` — answers the agent's LLM
calls with the chosen policy, checks the protocol, and prints a summary (``--output`` keeps one
JSON record per rollout, in dataset order; runs of at most 20 rollouts also get a table with one
row per rollout). The dataset is streamed and the summary tallied as rollouts end, so a run's
memory follows its concurrency, not its dataset. Every finished rollout is committed to a journal
before it counts, so the same command resumes an interrupted run
(:class:`osmosis_ai.runs.executors.traingate.RolloutServer` says what its fingerprint covers).
Everything local is checked first (dataset, reward, tokenizer, agent), then the policy answers one
tiny preflight request, and only then does any rollout start. The last line on stdout counts the
outcomes (printed with ``--quiet`` too); the exit status follows the shared rule of
:func:`osmosis_ai.outcome.verdict`, with the reason on stderr.
``bench`` measures rollouts/s with an instant canned policy.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import TYPE_CHECKING

from osmosis_ai.cli import output
from osmosis_ai.cli.arguments import (
    absolute_path,
    add_journal_arguments,
    add_reward_runtime_arguments,
    add_rows_arguments,
    completion_params,
    finite_number,
    fraction,
    journal_spec,
    model_ref,
    reward_limits,
    whole_number,
)
from osmosis_ai.cli.output import setup_logging
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.rollout_report import Report, drive
from osmosis_ai.cli.rollout_target import add_target_arguments
from osmosis_ai.cli.running import run_command
from osmosis_ai.cli.summary import Outputs, add_summary_arguments, check_run_outputs
from osmosis_ai.cli.trajectories import add_trajectories_argument

if TYPE_CHECKING:
    from osmosis_ai.runs.plan import RunPlan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from osmosis_ai.cli.commands import rollout_bench, rollout_check, rollout_init

    sub = parser.add_subparsers(dest="rollout_command", metavar="{run,bench,check,init,list}", required=True)
    run = sub.add_parser(
        "run",
        help="run a dataset through a rollout server with a local TrainGate",
        description="Run a dataset through a rollout server with a local TrainGate.",
    )
    add_target_arguments(run, adaptive=True)
    run.add_argument(
        "-d",
        "--dataset",
        required=True,
        type=absolute_path,
        help="dataset file (.jsonl, .csv, .parquet) with system_prompt, user_prompt, ground_truth",
    )
    run.add_argument(
        "--model",
        required=True,
        help="policy: a LiteLLM model (e.g. openai/gpt-4o-mini), a model behind --base-url, "
        "or 'scripted' (offline calculator solver for demos)",
    )
    run.add_argument("--base-url", help="OpenAI-compatible base URL of the policy (vLLM, SGLang, Ollama)")
    run.add_argument("--api-key", help="API key of the policy backend (default: the provider's env variable)")
    run.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="HuggingFace model directory: prompts rendered by its chat template, token-in-token-out, "
        "drift checked every turn (a bare tokenizer.json only encodes a fixed rendering; default: bytes)",
    )
    run.add_argument(
        "--chat-template", metavar="FILE", help="a .jinja chat template overriding --tokenizer's"
    )
    run.add_argument(
        "--fail-on-drift", action="store_true", help="exit non-zero when any rollout's template drifts"
    )
    add_rows_arguments(run)
    run.add_argument("--n", type=whole_number(1), default=1, help="rollouts per dataset row (default 1)")
    run.add_argument(
        "--max-turns", type=whole_number(1), default=10, help="max_turns sent to the agent (default 10)"
    )
    run.add_argument(
        "--temperature", type=finite_number(), help="completion_params.temperature sent to the agent"
    )
    run.add_argument(
        "--max-tokens", type=whole_number(1), help="completion_params.max_tokens sent to the agent"
    )
    run.add_argument(
        "--reward",
        metavar="MODULE:FN",
        help="compute the reward trainer-side with fn(solution_str, ground_truth, extra_info)",
    )
    run.add_argument(
        "--gateway-host",
        default="127.0.0.1",
        help="address the TrainGate binds and advertises as server_url (default 127.0.0.1; "
        "give this machine's reachable IP when --url points at another host)",
    )
    run.add_argument(
        "--max-failure-rate",
        type=fraction,
        default=0.0,
        metavar="FRACTION",
        help="share of rollouts (0-1) that may fail without failing the run (default 0: every rollout "
        "must complete); infrastructure failures and timeouts always fail it",
    )
    run.add_argument(
        "-o", "--output", metavar="FILE.jsonl", type=absolute_path, help="write one JSON record per rollout"
    )
    declare_files(run, read=["dataset", "chat_template"], written=["output"])
    add_trajectories_argument(run, unit="rollout")
    add_journal_arguments(run, unit="rollout")
    add_reward_runtime_arguments(run, what="the --reward function")
    add_summary_arguments(run, log_to=True)
    run.add_argument(
        "--progress", action="store_true", help="show the progress bar even when not on a terminal"
    )
    run.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar and no tables: only the outcome line"
    )

    rollout_bench.add_parser(sub)
    rollout_check.add_parser(sub)
    rollout_init.add_parsers(sub)


def run(args: argparse.Namespace) -> int:
    from osmosis_ai.cli.commands import rollout_bench
    from osmosis_ai.cli.loading import agent_spec

    if args.rollout_command in ("init", "list"):
        from osmosis_ai.cli.commands import rollout_init

        return rollout_init.run(args)
    setup_logging(logging.INFO if args.verbose else None)
    if args.rollout_command == "bench":
        return asyncio.run(rollout_bench.bench(args))
    if args.rollout_command == "check":
        from osmosis_ai.cli.commands.rollout_check import check

        return asyncio.run(check(args))
    outputs = Outputs.of(args)
    check_run_outputs(outputs)
    plan = plan_of(args)
    labels = {"command": "rollout run", "model": args.model, "dataset": args.dataset,
              "module": args.url or agent_spec(args)}  # fmt: skip
    report = Report(outputs, args.progress, args.fail_on_drift, url=args.url)
    return run_command(
        lambda: drive(plan, report, labels), on_interrupt=lambda: output.interrupted("rollout")
    )


def plan_of(args: argparse.Namespace) -> RunPlan:
    """The run the command line asks for."""
    from osmosis_ai.cli.loading import agent_ref
    from osmosis_ai.runs.executors.traingate import RolloutServer
    from osmosis_ai.runs.plan import Rows, RunPlan, Scoring

    server = RolloutServer(model_ref(args), agent=None if args.url else agent_ref(args), url=args.url,
                           server_api_key=args.server_api_key, tokenizer=args.tokenizer,
                           chat_template=args.chat_template, gateway_host=args.gateway_host,
                           max_turns=args.max_turns, completion_params=completion_params(args))  # fmt: skip
    rewards = (args.reward,) if args.reward else ()
    scoring = Scoring(rewards, kind="reward function", names=("reward",) if args.reward else (),
                      reward="reward" if args.reward else "agent", **reward_limits(args))  # fmt: skip
    return RunPlan(Rows(args.dataset, args.offset, args.limit), server, scoring, n=args.n, concurrency=args.concurrency,
                   max_concurrency=args.max_concurrency, timeout=args.timeout, journal=journal_spec(args))  # fmt: skip
