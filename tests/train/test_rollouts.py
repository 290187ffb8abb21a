"""The training core against real servers over loopback: an agent served in-process (0.2's wire) and a
0.3 server, the policy a scripted token policy; the samples are the ids TrainGate recorded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from osmosis_ai.outcome import Outcome
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.server import create_app, create_rollout_server
from osmosis_ai.train.rollouts import Collector, Limits, Sample, Target, collect_samples, exclude_thin_groups
from osmosis_ai.traingate.policy.base import Generation, Message
from osmosis_ai.traingate.policy.tokens import TokenPolicy, assistant_message, parse_tool_calls
from osmosis_ai.traingate.tokenizer import ChatTokenizer
from tests.support.server import RunningServer
from tests.train.agents import NUDGE, LabelGrader, TwoTurnAgent, TwoTurnWorkflow

pytestmark = pytest.mark.xdist_group("trl")

CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "4 + 15"}}</tool_call>'


class Scripted(TokenPolicy):
    """Calls the calculator on its first turn and answers on its second; remembers every prompt."""

    name = "scripted-tokens"

    def __init__(self, tokenizer: ChatTokenizer, *, call: bool = True) -> None:
        self.tokenizer, self.call = tokenizer, call
        self.prompts: list[list[int]] = []

    async def generate_ids(
        self, prompt_ids: list[int], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        self.prompts.append(list(prompt_ids))
        first = self.tokenizer.decode(prompt_ids).count("<|im_start|>assistant") == 1
        text = CALL if first and self.call else "The answer is 19."
        ids = self.tokenizer.encode(text + "<|im_end|>")
        return Generation(assistant_message(text), token_ids=ids, logprobs=[-0.5] * len(ids))


def rows(*rewards: float, fail: int | None = None) -> list[dict[str, Any]]:
    return [
        {"system_prompt": "Use the calculator.", "user_prompt": f"What is {i} + 15?", "ground_truth": "19",
         "reward": reward, "fail": i == fail}
        for i, reward in enumerate(rewards)
    ]  # fmt: skip


def generated(sample: Sample) -> list[int]:
    return [token for token, bit in zip(sample.completion_ids, sample.mask, strict=True) if bit]


def test_parse_tool_calls_takes_well_formed_blocks_and_keeps_the_rest() -> None:
    text, calls = parse_tool_calls(f"Let me see. {CALL} <tool_call>not json</tool_call>")
    assert text == "Let me see.  <tool_call>not json</tool_call>"
    assert calls == [{"id": "call_0", "type": "function",
                      "function": {"name": "calculator", "arguments": '{"expression": "4 + 15"}'}}]  # fmt: skip
    assert assistant_message("42") == {"role": "assistant", "content": "42"}


def test_samples_of_an_in_process_agent_are_the_ids_the_model_saw(chat_tokenizer: ChatTokenizer) -> None:
    policy = Scripted(chat_tokenizer)
    samples = asyncio.run(
        collect_samples(
            Target(agent=TwoTurnAgent()),
            policy,
            chat_tokenizer,
            rows(1.0, 0.25),
            n=2,
            limits=Limits(timeout=30),
        )
    )
    assert [(s.row_index, s.sample_index) for s in samples] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [s.reward for s in samples] == [1.0, 1.0, 0.25, 0.25]
    assert all(s.trainable and s.outcome is Outcome.COMPLETED for s in samples)
    first_prompts = {tuple(p) for p in policy.prompts if chat_tokenizer.decode(p).count("assistant\n") == 1}
    for sample in samples:
        assert tuple(sample.prompt_ids) in first_prompts
        call = chat_tokenizer.encode(CALL + "<|im_end|>")
        answer = chat_tokenizer.encode("The answer is 19.<|im_end|>")
        assert generated(sample) == call + answer
        # Between the two turns: exactly the tool message and the next generation prompt, mask 0.
        between = sample.completion_ids[len(call) : -len(answer)]
        assert sample.mask == [1] * len(call) + [0] * len(between) + [1] * len(answer)
        assert (
            chat_tokenizer.decode(between)
            == "\n<|im_start|>user\n<tool_response>19</tool_response><|im_end|>\n<|im_start|>assistant\n"
        )
        # The second turn was generated from exactly the first prompt + the trajectory up to it.
        assert sample.prompt_ids + sample.completion_ids[: -len(answer)] in policy.prompts
        assert sample.logprobs == [-0.5 if bit else 0.0 for bit in sample.mask]


def test_a_failing_rollout_is_a_typed_failure_never_a_reward(chat_tokenizer: ChatTokenizer) -> None:
    samples = asyncio.run(
        collect_samples(
            Target(agent=TwoTurnAgent()), Scripted(chat_tokenizer, call=False), chat_tokenizer,
            rows(1.0, 1.0, fail=1), limits=Limits(timeout=30),
        )
    )  # fmt: skip
    ok, failed = samples
    assert ok.trainable and ok.reward == 1.0
    assert (
        chat_tokenizer.decode([t for t, b in zip(ok.completion_ids, ok.mask, strict=True) if not b]).count(
            NUDGE
        )
        == 1
    )
    assert (failed.trainable, failed.reward, failed.outcome) == (False, None, Outcome.AGENT_ERROR)
    assert failed.error and "broke on purpose" in failed.error


def test_batches_at_once_in_one_loop_each_give_one_sample_per_rollout_in_order(
    chat_tokenizer: ChatTokenizer,
) -> None:
    """Many batches, each serving its own agent, run side by side in one event loop and end at
    different times (every third rollout's agent raises): each batch gives one sample per (row,
    sample), in order, and only the agents' own failures are untrainable."""
    batch_rows = [{**row, "fail": 0} for row in rows(1.0, 0.5, 0.25, 0.75)]

    async def batch() -> list[Sample]:
        return await collect_samples(
            Target(agent=TwoTurnAgent(fail_every=3)), Scripted(chat_tokenizer), chat_tokenizer,
            batch_rows, n=2, limits=Limits(timeout=60),
        )  # fmt: skip

    async def together() -> list[list[Sample]]:
        return list(await asyncio.gather(*(batch() for _ in range(12))))

    expected = [(row, sample) for row in range(4) for sample in range(2)]
    for samples in asyncio.run(together()):
        assert [(s.row_index, s.sample_index) for s in samples] == expected
        assert [s.outcome for s in samples] == [
            Outcome.AGENT_ERROR if row % 3 == 0 else Outcome.COMPLETED for row, _ in expected
        ]
        assert [s.reward for s in samples if s.trainable] == [0.5, 0.5, 0.25, 0.25]


def test_a_collector_serves_many_batches_and_forgets_each_once_done(chat_tokenizer: ChatTokenizer) -> None:
    async def two_batches() -> tuple[list[Sample], list[Sample], int]:
        target = Target(agent=TwoTurnAgent())
        async with Collector(target, Scripted(chat_tokenizer), chat_tokenizer) as collector:
            first = await collector.collect(rows(1.0), n=2)
            second = await collector.collect(rows(0.5, 0.25))
            assert collector.gate is not None
            return first, second, len(collector.gate.sessions)

    first, second, kept = asyncio.run(two_batches())
    assert [s.reward for s in first] == [1.0, 1.0] and [s.reward for s in second] == [0.5, 0.25]
    assert len({s.rollout_id for s in first + second}) == 4
    assert kept == 0


class Held(Scripted):
    """Answers nothing until the rollout is stopped: says when ``rollouts`` calls wait (``asked``)."""

    def __init__(self, tokenizer: ChatTokenizer, rollouts: int) -> None:
        super().__init__(tokenizer)
        self.rollouts, self.asked = rollouts, asyncio.Event()

    async def generate_ids(
        self, prompt_ids: list[int], *, tools: list[Message], params: dict[str, Any]
    ) -> Generation:
        self.prompts.append(list(prompt_ids))
        if len(self.prompts) == self.rollouts:
            self.asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_batch_stopped_midway_leaves_nothing_on_a_collectors_gateway(chat_tokenizer: ChatTokenizer) -> None:
    """A collector's gateway outlives its batches (verl keeps one per worker): a batch cancelled while its
    rollouts run must not leave their sessions, and their token data, on it."""

    async def stopped() -> int:
        async with Collector(
            Target(agent=TwoTurnAgent()), Scripted(chat_tokenizer), chat_tokenizer
        ) as collector:
            held = Held(chat_tokenizer, rollouts=2)  # both past their init: stopped while the model works
            batch = asyncio.ensure_future(collector.collect(rows(1.0, 0.5), policy=held))
            await asyncio.wait_for(held.asked.wait(), 60)  # the bound only ends a failing test
            batch.cancel()
            with pytest.raises(asyncio.CancelledError):
                await batch
            assert collector.gate is not None
            return len(collector.gate.sessions)

    assert asyncio.run(stopped()) == 0


def test_an_agent_editing_what_the_model_saw_is_not_trained_on(chat_tokenizer: ChatTokenizer) -> None:
    data = [*rows(1.0), {**rows(1.0)[0], "rewrite": True}]
    kept, edited = asyncio.run(
        collect_samples(
            Target(agent=TwoTurnAgent()), Scripted(chat_tokenizer, call=False), chat_tokenizer, data
        )
    )
    assert kept.trainable
    assert (edited.trainable, edited.reward, edited.outcome) == (False, None, Outcome.AGENT_ERROR)
    assert edited.error == "append-only violation: turn 1, message 1: modified ('content' changed)"


def test_a_rollout_past_its_time_limit_is_a_timeout(chat_tokenizer: ChatTokenizer) -> None:
    data = [*rows(1.0, 0.5), {**rows(0.0)[0], "hang": True}]
    samples = asyncio.run(
        collect_samples(
            Target(agent=TwoTurnAgent()),
            Scripted(chat_tokenizer),
            chat_tokenizer,
            data,
            limits=Limits(timeout=3),
        )
    )
    assert [s.outcome for s in samples] == [Outcome.COMPLETED, Outcome.COMPLETED, Outcome.TIMEOUT]
    assert [s.reward for s in samples] == [1.0, 0.5, None]
    assert samples[2].error and "3s" in samples[2].error


def test_samples_of_a_0_2_server_at_a_url(chat_tokenizer: ChatTokenizer) -> None:
    server = RunningServer(create_app(TwoTurnAgent())).start()
    try:
        samples = asyncio.run(
            collect_samples(
                Target(url=server.url),
                Scripted(chat_tokenizer),
                chat_tokenizer,
                rows(0.5),
                limits=Limits(timeout=30),
            )
        )
    finally:
        server.stop()
    (sample,) = samples
    assert sample.trainable and sample.reward == 0.5
    assert generated(sample) == chat_tokenizer.encode(CALL + "<|im_end|>The answer is 19.<|im_end|>")


def test_samples_of_a_0_3_server(chat_tokenizer: ChatTokenizer) -> None:
    app = create_rollout_server(backend=LocalBackend(workflow=TwoTurnWorkflow, grader=LabelGrader),
                                configure_logging=False)  # fmt: skip
    policy = Scripted(chat_tokenizer)
    data = [{"user_prompt": "What is 4 + 15?", "ground_truth": label} for label in ("1", "0")]
    server = RunningServer(app).start()
    try:
        target = Target(url=server.url)
        samples = asyncio.run(
            collect_samples(target, policy, chat_tokenizer, data, n=2, limits=Limits(timeout=30))
        )
    finally:
        server.stop()
    assert [s.reward for s in samples] == [1.0, 1.0, 0.0, 0.0]
    for sample in samples:
        assert sample.trainable, sample.error
        assert generated(sample) == chat_tokenizer.encode(CALL + "<|im_end|>The answer is 19.<|im_end|>")
        assert 0 in sample.mask


def test_a_server_that_does_not_answer_fails_before_any_rollout(chat_tokenizer: ChatTokenizer) -> None:
    from osmosis_ai.traingate.launcher import ServerUnreachable
    from tests.support.sockets import free_port

    with pytest.raises(ServerUnreachable):
        asyncio.run(
            collect_samples(
                Target(url=f"http://127.0.0.1:{free_port()}"),
                Scripted(chat_tokenizer),
                chat_tokenizer,
                rows(1.0),
                limits=Limits(timeout=5),
            )
        )


def test_a_target_is_one_thing() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Target()
    with pytest.raises(ValueError, match="exactly one"):
        Target(agent=TwoTurnAgent(), url="http://127.0.0.1:1")


def test_thin_groups_are_excluded_whole() -> None:
    assert exclude_thin_groups([1.0, None, 0.0, None, None, 1.0], 3) == [1.0, None, 0.0, None, None, None]
    # A process's slice starting mid-group: groups are counted from the trainer's batch start, and
    # the parts of groups on other processes are left alone.
    assert exclude_thin_groups([None, 1.0, None, None, 1.0], 3, offset=2) == [None, None, None, None, 1.0]
    assert exclude_thin_groups([1.0, None, 1.0, None], 3, offset=2) == [1.0, None, None, None]
