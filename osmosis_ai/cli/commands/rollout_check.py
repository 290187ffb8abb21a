"""``osmosis rollout check``: is this agent + chat template safe for token-in-token-out training?

It runs a handful of dataset rows through the agent with a local TrainGate that renders the model's
own chat template (``--tokenizer DIR``), keeps each rollout's token sequence the way a trainer does
and compares it every turn with a fresh render of the conversation. The verdict is one of:

* ``SAFE for token-in-token-out training`` (exit 0): every turn's prompt extended the previous
  prompt and completion exactly;
* ``NOT SAFE`` (exit 1): the first drift (rollout, turn, message, token), its cause, the two texts
  around it, the template line responsible where it can be found and what to do about it;
* ``CANNOT TELL`` (exit 1): no turn was served or the template refused the conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.arguments import whole_number
from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.rollout_target import add_target_arguments, rollout_server

if TYPE_CHECKING:
    from osmosis_ai.traingate.drift import DriftEvent
    from osmosis_ai.traingate.session import RolloutSession

DEFAULT_ROWS = 5

# What to do about each cause of drift (keys are osmosis_ai.traingate.drift's cause names).
ADVICE = {
    "reasoning_removed": "the template drops earlier turns' reasoning, so the next prompt no longer extends "
    "what the model generated: keep reasoning_content in history (render it for every assistant turn), "
    "or train each turn as its own sample",
    "whitespace_at_boundary": "the template writes different whitespace after an assistant turn in "
    "history than a continuation starts with: write the same end-of-turn text in both places",
    "tool_call_rerendered": "tool-call arguments are re-serialised when the message is rendered again: "
    "print the arguments string verbatim in the template and keep it unchanged in the agent",
    "special_token_differs": "a turn is closed with another special token in history than when it was "
    "generated (often the final assistant turn): close every assistant turn with the same token",
    "backend_prompt": "the backend renders prompts with another template than --tokenizer's: point "
    "--tokenizer at the directory of the model the backend serves",
    None: "inspect the two texts; the template renders this part of the history differently the second time",
}


def add_parser(sub: Any) -> None:
    """Register ``check`` on the ``rollout`` sub-command parser ``sub``."""
    check = sub.add_parser(
        "check",
        help="run a few rows and say whether the chat template is safe for token-in-token-out training",
        description="Run a few dataset rows through the agent with the model's chat template and say "
        "whether token-in-token-out training is safe, or where and why the template drifts.",
    )
    add_target_arguments(check)
    check.add_argument("-d", "--dataset", required=True, help="dataset file (.jsonl, .csv, .parquet)")
    check.add_argument(
        "--tokenizer",
        required=True,
        metavar="DIR",
        help="local HuggingFace model directory (tokenizer.json, tokenizer_config.json / chat_template.jinja)",
    )
    check.add_argument(
        "--chat-template", metavar="FILE", help="a .jinja chat template overriding the directory's"
    )
    check.add_argument(
        "--model",
        default="scripted",
        help="policy: 'scripted' (default, offline calculator solver), a LiteLLM model, or a model behind --base-url",
    )
    check.add_argument(
        "--base-url", help="OpenAI-compatible base URL (vLLM, SGLang); its token ids are used and checked"
    )
    check.add_argument("--api-key", help="API key of the policy backend")
    check.add_argument(
        "--rows",
        "--limit",
        dest="rows",
        type=whole_number(1),
        default=DEFAULT_ROWS,
        help=f"dataset rows to run (default {DEFAULT_ROWS})",
    )
    check.add_argument(
        "--max-turns", type=whole_number(1), default=10, help="max_turns sent to the agent (default 10)"
    )
    check.add_argument("--json", action="store_true", help="print the verdict as one JSON object")


def drift_events(sessions: Sequence[RolloutSession]) -> list[tuple[str, DriftEvent]]:
    """Every drift event of a run with its rollout id, in rollout order."""
    return [(s.rollout_id, event) for s in sessions for event in s.drift_events]


def verdict(sessions: Sequence[RolloutSession]) -> tuple[bool, list[str]]:
    """``(safe, lines)``: the verdict a person can act on, first line first."""
    turns = sum(s.num_turns for s in sessions)
    events = drift_events(sessions)
    violations = [(s.rollout_id, v) for s in sessions for v in s.violations]
    template_errors = [e for s in sessions for e in s.errors if "chat template" in e]
    if events:
        rollout_id, first = events[0]
        lines = [
            f"NOT SAFE for token-in-token-out training: {len(events)} drift event(s) in "
            f"{len({r for r, _ in events})} of {len(sessions)} rollout(s).",
            f"First drift: {rollout_id}, {first.headline()}",
            f"  trajectory: {first.trajectory!r}",
            f"  rendered:   {first.rendered!r}",
        ]
        if first.template_line is not None:
            lines.append(f"  template line {first.template_line}: {first.template_text}")
        advice = ADVICE.get(first.kind if first.kind == "backend_prompt" else first.cause, ADVICE[None])
        lines.append(f"Fix: {advice}.")
        return False, lines
    if violations:
        rollout_id, violation = violations[0]
        return False, [
            f"NOT SAFE for token-in-token-out training: the agent edits its history "
            f"({len(violations)} append-only violation(s)).",
            f"First: {rollout_id}, {violation.describe()}",
            "Fix: append the assistant message as received and never change earlier messages.",
        ]
    if template_errors:
        return False, [f"CANNOT TELL: the chat template failed: {template_errors[0]}"]
    if turns == 0:
        return False, ["CANNOT TELL: no chat turn was served (did the agent call the model?)"]
    tokens = sum(s.context_tokens for s in sessions)
    return True, [
        f"SAFE for token-in-token-out training: {len(sessions)} rollout(s), {turns} turn(s), "
        f"{tokens} trajectory token(s), each turn's prompt equal to a fresh render of the template."
    ]


async def check(args: argparse.Namespace) -> int:
    """Run ``args.rows`` rows with a template-rendering TrainGate and print the verdict."""
    from osmosis_ai.cli.loading import load_agent
    from osmosis_ai.runs.dataset import DatasetReader
    from osmosis_ai.runs.rollouts import RunConfig, run_rollouts
    from osmosis_ai.traingate.gateway import TrainGate
    from osmosis_ai.traingate.policy import make_policy
    from osmosis_ai.traingate.tokenizer import ChatTokenizer, load_tokenizer

    rows = list(itertools.islice(DatasetReader(args.dataset).iter_rows(), args.rows))
    tokenizer = load_tokenizer(args.tokenizer, chat_template=args.chat_template)
    if not isinstance(tokenizer, ChatTokenizer):
        raise CLIError(
            f"--tokenizer {args.tokenizer}: give a model directory (with tokenizer.json and its chat "
            "template), or a tokenizer.json together with --chat-template FILE"
        )
    agent_loop = None if args.url else load_agent(args)
    policy = make_policy(args.model, base_url=args.base_url, api_key=args.api_key, request_token_ids=True)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(policy.aclose)
        await policy.preflight()
        gate = await stack.enter_async_context(TrainGate(policy, tokenizer=tokenizer))
        url, key = await stack.enter_async_context(rollout_server(args, agent_loop))
        config = RunConfig(
            server_url=url,
            server_api_key=key,
            concurrency=args.concurrency,
            timeout=args.timeout,
            max_turns=args.max_turns,
        )
        sessions = await run_rollouts(gate, rows, config)
    safe, lines = verdict(sessions)
    if args.json:
        from osmosis_ai.cli.output import print_json

        print_json({"safe": safe, "verdict": lines[0], "details": lines[1:], "rollouts": len(sessions),
                    "turns": sum(s.num_turns for s in sessions),
                    "drift_events": len(drift_events(sessions))})  # fmt: skip
    else:
        print("\n".join(lines), flush=True)
    if not safe:
        raise CLIError(lines[0].split(":", 1)[0] + ": " + _reason(sessions))
    return 0


def _reason(sessions: Sequence[RolloutSession]) -> str:
    """The failed verdict in one line, for the ``Error:`` line (the details are printed above it)."""
    from osmosis_ai.traingate.drift import CAUSE_TEXT

    events = drift_events(sessions)
    if events:
        rollout_id, first = events[0]
        cause = "backend prompt differs" if first.kind == "backend_prompt" else CAUSE_TEXT.get(first.cause)
        return f"{cause} at {rollout_id} turn {first.turn}, message {first.message} (details above)"
    return "see the lines above"


def run(args: argparse.Namespace) -> int:
    return asyncio.run(check(args))
