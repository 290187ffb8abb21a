"""What the commands' arguments share: numeric types, absolute paths, test/eval's common options, and
the dataset rows they select.

A word that is not a number is a usage error (exit status 2); a number outside its range is a value
error (``Error: --n: ...``, exit status 1); see :mod:`osmosis_ai.cli.parser`. Paths are made absolute
as the command line is parsed (:func:`absolute_path`)."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.output_file import declare_files
from osmosis_ai.cli.parser import OptionGroup, OutOfRange, add_exclusive

if TYPE_CHECKING:
    from osmosis_ai._pool import Limit
    from osmosis_ai.runs.dataset import DatasetReader
    from osmosis_ai.runs.executors.local import InProcessAgent
    from osmosis_ai.runs.plan import JournalSpec, ModelRef


def whole_number(minimum: int, maximum: int | None = None, *, name: str = "value") -> Callable[[str], int]:
    """An ``int`` argument within ``[minimum, maximum]`` (no upper bound when ``maximum`` is None)."""
    expected = f"{minimum}-{maximum}" if maximum is not None else f"{minimum} or more"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {name} {text!r}: expected a whole number") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise OutOfRange(f"invalid {name} {value}: expected {expected}")
        return value

    return parse


def finite_number(minimum: float | None = None, *, exclusive: bool = False) -> Callable[[str], float]:
    """A finite ``float`` argument (``nan`` and ``inf``, which ``float()`` accepts, are refused), at least
    ``minimum`` (greater than it when ``exclusive``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise OutOfRange(f"must be a finite number, got {text!r}")
        if minimum is not None and (value <= minimum if exclusive else value < minimum):
            bound = "greater than" if exclusive else "at least"
            raise OutOfRange(f"must be {bound} {minimum:g}, got {text!r}")
        return value

    return parse


def absolute_path(text: str) -> str:
    """A path argument made absolute (``~`` expanded) as the command line is parsed, before any user
    code runs: an agent or eval function that changes the working directory cannot move it."""
    return os.path.abspath(os.path.expanduser(text)) if text else text


def fraction(text: str) -> float:
    """A number between 0 and 1, inclusive (a share of rows, a failure rate)."""
    value = finite_number(0)(text)
    if value > 1:
        raise OutOfRange(f"must be between 0 and 1, got {text!r}")
    return value


def add_agent_arguments(
    parser: argparse.ArgumentParser,
    *,
    module_help: str,
    required: bool = True,
    missing_is_usage: bool = False,
) -> OptionGroup:
    """The required choice of the agent: ``-m MODULE:ATTR``, ``--mcp DIR`` or ``--mcp-url URL``; and
    ``--grader MODULE:CLASS``, the grader of a 0.3 ``AgentWorkflow`` named by ``-m``.

    Two of them, or none with ``required``, is a value error (exit status 1; none is a usage error,
    exit status 2, with ``missing_is_usage``, for ``serve``, whose ``-m`` is required outright). With ``required=False`` the command checks the choice itself (it has sub-commands).
    Returns the group so a command can add another way to name it (``rollout run --url``);
    :func:`osmosis_ai.cli.loading.load_agent` turns the parsed choice into an agent loop.
    """
    group = add_exclusive(parser, required=required, missing_is_usage=missing_is_usage)
    group.add_argument("-m", "--module", "--agent", dest="module", metavar="MODULE:ATTR", help=module_help)
    group.add_argument(
        "--mcp",
        metavar="DIR",
        help="MCP tools directory (its main.py creates a fastmcp server): the model calls these tools",
    )
    group.add_argument(
        "--mcp-url",
        metavar="URL",
        help="running MCP server (streamable HTTP, e.g. http://127.0.0.1:8000/mcp): the model calls its tools",
    )
    parser.add_argument(
        "--grader",
        metavar="MODULE:CLASS",
        help="a 0.3 Grader for the 0.3 AgentWorkflow named by -m: its reward is the rollout's",
    )
    return group


def add_agent_run_arguments(parser: argparse.ArgumentParser, *, unit: str, required: bool = True) -> None:
    """The options every command that runs an agent loop in-process over a dataset shares (``test``,
    ``eval``): the agent, the dataset and its rows, the model, the request limits, the failure rate
    that still passes, ``-o`` and ``-q``. ``unit`` names what the failure rate counts ("row", "run");
    with ``required=False`` the command checks ``-m``/``-d`` itself (it has sub-commands)."""
    add_agent_arguments(parser, module_help="agent loop to run, e.g. examples.calculator.agent:agent_loop",
                        required=required)  # fmt: skip
    parser.add_argument("-d", "--dataset", required=required, type=absolute_path,
                        help="dataset (.jsonl, .csv, .parquet) with system_prompt, user_prompt, ground_truth")  # fmt: skip
    parser.add_argument("--model", default="gpt-5-mini",
                        help="a LiteLLM model (default gpt-5-mini), the model served at --base-url, "
                        "or 'scripted' (the offline calculator solver)")  # fmt: skip
    parser.add_argument("--base-url", help="OpenAI-compatible base URL serving --model")
    parser.add_argument("--api-key", help="API key (default: the provider's environment variable)")
    add_rows_arguments(parser)
    parser.add_argument("--max-turns", type=whole_number(1), default=10, help="max_turns of each request")
    parser.add_argument("--max-tokens", type=whole_number(1), help="completion_params.max_tokens")
    parser.add_argument("--temperature", type=finite_number(), help="completion_params.temperature")
    parser.add_argument("--timeout", type=finite_number(0, exclusive=True), metavar="SECONDS",
                        help=f"time limit of each {unit}, the agent and its scoring together; a {unit} past it "
                        "ends as 'timeout' (default: none)")  # fmt: skip
    parser.add_argument("--max-failure-rate", type=fraction, default=0.0, metavar="FRACTION",
                        help=f"share of {unit}s (0-1) that may fail without failing the command (default 0)")  # fmt: skip
    parser.add_argument(
        "-o", "--output", metavar="FILE.json", type=absolute_path, help="write the results as JSON"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the outcome line")
    declare_files(parser, read=["dataset"], written=["output"])


def completion_params(args: argparse.Namespace) -> tuple[tuple[str, Any], ...]:
    """``--temperature`` and ``--max-tokens``, the ones given."""
    pairs = (("temperature", args.temperature), ("max_tokens", args.max_tokens))
    return tuple((k, v) for k, v in pairs if v is not None)


def model_ref(args: argparse.Namespace) -> ModelRef:
    """The model ``--model``, ``--base-url`` and ``--api-key`` name."""
    from osmosis_ai.runs.plan import ModelRef

    return ModelRef(args.model, args.base_url, args.api_key)


def in_process_agent(
    args: argparse.Namespace, models: tuple[tuple[str, ModelRef], ...], command: str, debug_dir: str
) -> InProcessAgent:
    """The executor spec of :func:`add_agent_run_arguments`' agent run in-process, its calls answered
    by ``models`` (by tag); ``--debug`` writes the agents' traces to ``debug_dir``."""
    from osmosis_ai.cli.loading import agent_ref
    from osmosis_ai.runs.executors.local import InProcessAgent

    return InProcessAgent(agent_ref(args), models, command, max_turns=args.max_turns,
                          completion_params=completion_params(args), debug_dir=debug_dir if args.debug else None)  # fmt: skip


def add_rows_arguments(parser: argparse.ArgumentParser) -> None:
    """``--limit N`` and ``--offset N``: the rows of ``-d`` a run takes (the plan's
    :class:`~osmosis_ai.runs.plan.Rows`); a journal's task id names them, so shards run side by side."""
    parser.add_argument("--limit", type=whole_number(1), help="rows to run (default: all)")
    parser.add_argument("--offset", type=whole_number(0), default=0, help="rows to skip first (default 0)")


JOURNAL_DEFAULT = "one per configuration under $OSMOSIS_CACHE_DIR/eval or ~/.cache/osmosis/eval"


def add_journal_arguments(
    parser: argparse.ArgumentParser,
    *,
    unit: str,
    failed: str = "the model failed",
    default: str = JOURNAL_DEFAULT,
) -> None:
    """``--journal``, ``--fresh`` and ``--retry-failed``: where a resumable run keeps its finished
    ``unit``s (``default``: where it does without ``--journal``), and what a rerun of the same
    command runs again (the ``unit``s ``failed`` says)."""
    parser.add_argument(
        "--journal", metavar="FILE", type=absolute_path, help=f"journal file (default: {default})"
    )
    again = add_exclusive(parser)
    again.add_argument("--fresh", action="store_true", help="start over; the old journal is kept as a backup")
    again.add_argument("--retry-failed", action="store_true", help=f"also rerun {unit}s {failed}")
    declare_files(parser, read_and_written=["journal"])


def journal_spec(args: argparse.Namespace, *, keep_messages: bool = False) -> JournalSpec:
    """The plan's journal as :func:`add_journal_arguments`' flags name it."""
    from osmosis_ai.runs.plan import JournalSpec

    return JournalSpec(
        args.journal, fresh=args.fresh, retry_failed=args.retry_failed, keep_messages=keep_messages
    )


def open_dataset(args: argparse.Namespace) -> tuple[DatasetReader, int, int]:
    """The dataset ``-d`` names and the rows ``--offset``/``--limit`` select: ``(reader, rows in the
    file, rows to run)``. Every selected row is read and checked now, one at a time (the file is never
    loaded whole; ~7 µs a row), so a malformed line fails before any paid request, not after the rows
    before it ran."""
    from osmosis_ai.runs.dataset import DatasetReader

    reader = DatasetReader(args.dataset)
    total = len(reader)
    selected = max(0, min(total - args.offset, args.limit if args.limit is not None else total))
    if selected == 0:
        raise CLIError(
            f"{reader.file_path}: no rows to run (the dataset has {total}, --offset {args.offset})"
        )
    for _ in reader.iter_rows(limit=selected, offset=args.offset):
        pass
    return reader, total, selected


def add_reward_runtime_arguments(
    parser: argparse.ArgumentParser, *, what: str, prefixes: tuple[str, ...] = ("--reward-",)
) -> None:
    """How the reward runtime scores (``what``: "eval functions", "the reward"): ``--reward-timeout``,
    ``--reward-workers``, ``--reward-memory-limit``; a command whose work is only the scoring
    (``reward score``, ``regrade``) also spells them ``--timeout``, ``--workers``, ``--memory-limit``
    (``prefixes``: each flag's spellings, the first shown first). Read by :func:`reward_limits`
    either way. Defaults that protect: a timeout, and
    worker processes (one per CPU) that a hung or crashing reward cannot take the run down with."""

    def flags(name: str) -> list[str]:
        return [prefix + name for prefix in prefixes]

    parser.add_argument(*flags("timeout"), dest="reward_timeout", type=finite_number(0), default=60.0, metavar="SECONDS",
                        help=f"time {what} may take per sample, measured where they run; past it the "
                        "sample is 'reward_timeout' and its worker is replaced (default 60; 0: no limit)")  # fmt: skip
    parser.add_argument(*flags("workers"), dest="reward_workers", type=whole_number(0), metavar="N",
                        help=f"worker processes scoring with {what} (default: one per CPU; 0 scores in this "
                        "process, where a hung one cannot be stopped)")  # fmt: skip
    parser.add_argument(*flags("memory-limit"), dest="reward_memory_limit", type=whole_number(1), metavar="MB",
                        help="memory limit of each worker process; past it the sample is 'reward_crash'")  # fmt: skip


def reward_limits(args: argparse.Namespace) -> dict[str, Any]:
    """The reward runtime's limits as :func:`add_reward_runtime_arguments`' flags give them, as the
    keywords of :class:`~osmosis_ai.runs.plan.Scoring`."""
    return {"timeout": args.reward_timeout or None, "workers": args.reward_workers,
            "memory_limit_mb": args.reward_memory_limit}  # fmt: skip


def add_log_to_argument(parser: argparse.ArgumentParser) -> None:
    """``--log-to TOOL`` (repeatable): send the finished run to an experiment logger. A command adds it
    here and calls :func:`osmosis_ai.cli.summary.log_experiment` once its figures exist (``finish_run``
    does); a missing extra is refused as the command line is parsed, before any work."""
    from osmosis_ai.observe.loggers import TOOLS

    def tool(text: str) -> str:
        from osmosis_ai.observe.loggers import install_line

        line = install_line(text) if text in TOOLS else None  # an unknown name: the choices' error
        if line is not None:
            raise OutOfRange(line)
        return text

    parser.add_argument("--log-to", type=tool, choices=list(TOOLS), action="append", metavar="TOOL",
                        help=f"also log the run ({', '.join(TOOLS)}: config, summary, pass@k, score histogram, sample table) "
                        "to this experiment tracker; repeatable (settings: each tool's own environment "
                        "variables, e.g. WANDB_PROJECT, TENSORBOARD_LOGDIR, MLFLOW_TRACKING_URI)")  # fmt: skip


def concurrency_value(text: str) -> str | int:
    """A concurrency on the command line: a whole number of at least 1, or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return whole_number(1)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"invalid value {text!r}: expected a whole number or 'auto'"
        ) from None


def add_max_concurrency_argument(parser: argparse.ArgumentParser, flag: str) -> None:
    """``--max-concurrency``: the most an ``auto`` ``flag`` may grow to."""
    parser.add_argument("--max-concurrency", type=whole_number(1), metavar="N",
                        help=f"the most '{flag} auto' may grow to (default 256)")  # fmt: skip


def run_limit(value: str | int, args: argparse.Namespace, *, base_url: str | None) -> Limit:
    """The run's concurrency limit: fixed, or ``auto`` following the model server at ``base_url``."""
    from osmosis_ai.models.concurrency import concurrency_limit

    try:
        return concurrency_limit(value, maximum=getattr(args, "max_concurrency", None), base_url=base_url)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def limit_summary(limit: Limit) -> dict[str, Any]:
    """The run's concurrency for ``--json``: an ``auto`` limit's course over the run, or the fixed number."""
    summary = getattr(limit, "summary", None)
    return {"mode": "fixed", "limit": limit.ceiling} if summary is None else summary()


def limit_line(limit: Limit) -> str | None:
    """What an ``auto`` limit did over the run, in one line (``None`` for a fixed limit)."""
    summary = getattr(limit, "summary", None)
    if summary is None:
        return None
    figures = summary()
    return (
        f"Concurrency: auto ({figures['minimum']}-{figures['maximum']}): {figures['lowest']} to "
        f"{figures['highest']} in flight, {figures['mean']:g} on average, {figures['limit']} at the end"
    )


def ray_address(text: str) -> str:
    """A Ray cluster address: ``auto`` (the cluster this machine belongs to) or ``ray://HOST:PORT``."""
    if text == "auto" or (text.startswith("ray://") and len(text) > len("ray://")):
        return text
    raise argparse.ArgumentTypeError(
        f"invalid address {text!r}: expected 'auto' (the Ray this machine is a node of) or 'ray://HOST:PORT' "
        "(a head node's client server, port 10001 unless `ray start --ray-client-server-port` set another)"
    )


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """``--backend local|processes|ray`` and ``--ray-address``: where the work items run (the plan's
    ``backend`` and ``ray_address``; :func:`osmosis_ai.runs.backends.open.open_backend` opens it)."""
    parser.add_argument("--backend", choices=("local", "processes", "ray"), default="local",
                        help="run the items in this process (default), in worker processes of this machine "
                        "that --timeout can kill (processes), or on Ray workers (ray; needs osmosis-ai[ray]); "
                        "one worker per CPU, at most one per item in flight; the dataset, journal and "
                        "outputs stay here")  # fmt: skip
    parser.add_argument("--ray-address", type=ray_address, metavar="auto|ray://HOST:PORT",
                        help="with --backend ray: join this cluster (the working directory is shipped to it) "
                        "instead of starting a local Ray with this machine's CPUs; default: RAY_ADDRESS, "
                        "which a Ray job's driver is given")  # fmt: skip


def check_backend_arguments(
    args: argparse.Namespace, concurrency: object = None, *, calls: str = "model calls"
) -> None:
    """``--ray-address`` only with ``--backend ray``, and with workers no ``--concurrency auto`` (given
    as ``concurrency``), which follows one process's ``calls``."""
    backend = getattr(args, "backend", "local")
    if getattr(args, "ray_address", None) and backend != "ray":
        raise CLIError("--ray-address needs --backend ray")
    if concurrency == "auto" and backend != "local":
        raise CLIError(
            f"--concurrency auto follows one process's {calls}; give --concurrency N with --backend {backend}"
        )
