"""The ``--output`` records: shallow turn dicts, written in order by a writer thread without stalling the loop."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from osmosis_ai.models.rendering import render_prompt
from osmosis_ai.traingate.report import OrderedRecordWriter
from osmosis_ai.traingate.session import RolloutSession, TurnRecord
from osmosis_ai.traingate.tokenizer import ByteTokenizer


def _long_session(rollout_id: str, turns: int) -> RolloutSession:
    """A rollout of ``turns`` 1 KB turns: the prompt ids grow every turn (megabytes of token ids in all)."""
    tokenizer = ByteTokenizer()
    session = RolloutSession(rollout_id, 0, 0, "key", [{"role": "user", "content": "q"}], {})
    messages = list(session.messages)
    for index in range(turns):
        reply = {"role": "assistant", "content": "x" * 1000}
        prompt = tokenizer.encode(render_prompt(messages))
        usage = {"prompt_tokens": len(prompt), "completion_tokens": 1000, "total_tokens": len(prompt) + 1000}
        record = TurnRecord(
            index,
            len(messages),
            reply,
            "stop",
            list(range(1000)),
            [0.0] * 1000,
            prompt,
            usage,
            {},
            "bytes",
            1.0,
        )
        session.add_turn(record)
        messages += [reply, {"role": "user", "content": "y" * 1000}]
    session.finish("COMPLETED")
    return session


def test_turn_dict_shares_the_token_lists() -> None:
    turn = _long_session("r", 1).turns[0]
    data = turn.to_dict()
    assert data["token_ids"] is turn.token_ids and data["prompt_token_ids"] is turn.prompt_token_ids
    assert list(data) == list(vars(turn))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a named pipe")
@pytest.mark.timeout(60)
async def test_big_records_are_written_in_order_without_stalling_the_loop(tmp_path: Path) -> None:
    # The file is a named pipe that only this event loop drains: ~6 MB (a hundred times the pipe's
    # 64 KB buffer, six times the most a pipe can be given) cannot pass it unless the loop keeps
    # running while records are encoded and written. A writer that blocked the loop would hang here
    # (the timeout above fails the test).
    sessions = [_long_session(f"r{i}", 20) for i in range(3)]
    path = tmp_path / "records.jsonl"
    os.mkfifo(path)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**26, loop=loop)
    pipe = open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb", buffering=0)  # noqa: SIM115
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    try:
        drained = asyncio.create_task(reader.read())  # everything, up to the writer's close
        with OrderedRecordWriter(path, window=len(sessions)) as writer:
            for seq in range(len(sessions)):
                await writer.admit(seq)
            await asyncio.gather(*(writer.put_record(seq, s.to_record()) for seq, s in enumerate(sessions)))
        data = await drained
    finally:
        transport.close()
    lines = data.decode("utf-8").splitlines()
    assert writer.count == 3 and len(lines) == 3
    records = [json.loads(line) for line in lines]
    assert [r["rollout_id"] for r in records] == ["r0", "r1", "r2"]
    assert records[0] == json.loads(json.dumps(sessions[0].to_record()))
    assert len(records[2]["turns"]) == 20 and records[2]["turns"][19]["index"] == 19


async def test_ordered_writer_writes_in_sequence_and_bounds_what_waits(tmp_path: Path) -> None:
    path = tmp_path / "ordered.jsonl"
    sessions = [
        RolloutSession(f"r{i}", i, 0, "key", [{"role": "user", "content": "q"}], {}) for i in range(4)
    ]
    with OrderedRecordWriter(path, window=2) as writer:
        await writer.admit(0)
        await writer.admit(1)
        await writer.put_record(1, sessions[1].to_record())  # ended first, waits for rollout 0
        assert path.read_text() == "" and writer.waiting == 1
        third = asyncio.create_task(writer.admit(2))  # two would be waiting: held back
        # With nothing due, admission is decided on the loop without I/O: ten turns of the loop are
        # plenty for it to return if it could.
        for _ in range(10):
            await asyncio.sleep(0)
        assert not third.done()
        await writer.put_record(0, sessions[0].to_record())  # 0 and 1 go out together; 2 may start
        await asyncio.wait_for(third, 5)
        await writer.put_record(3, sessions[3].to_record())
        await writer.put_record(2, sessions[2].to_record())
        assert writer.waiting == 0 and writer.count == 4
    assert [json.loads(line)["rollout_id"] for line in path.read_text().splitlines()] == [
        "r0",
        "r1",
        "r2",
        "r3",
    ]


async def test_records_waiting_when_a_run_ends_early_are_kept_in_order(tmp_path: Path) -> None:
    path = tmp_path / "interrupted.jsonl"
    sessions = [
        RolloutSession(f"r{i}", i, 0, "key", [{"role": "user", "content": "q"}], {}) for i in range(4)
    ]
    with OrderedRecordWriter(path, window=8) as writer:
        await writer.put_record(3, sessions[3].to_record())
        await writer.put_record(1, sessions[1].to_record())  # rollouts 0 and 2 never finish
    assert [json.loads(line)["rollout_id"] for line in path.read_text().splitlines()] == ["r1", "r3"]
    assert writer.count == 2


def test_non_finite_numbers_are_written_as_null() -> None:
    from osmosis_ai.traingate.report import encode_record

    line = encode_record({"reward": float("nan"), "turns": [{"logprobs": [float("-inf"), -0.5]}]})
    assert json.loads(line) == {"reward": None, "turns": [{"logprobs": [None, -0.5]}]}


async def test_ordered_writer_puts_premade_records_in_the_places_of_skipped_rollouts(tmp_path: Path) -> None:
    journaled = {seq: {"rollout_id": f"old{seq}", "turns": []} for seq in (0, 1, 3, 6, 7)}
    asked: list[tuple[int, int]] = []

    def premade(start: int, stop: int) -> list[dict[str, object]]:
        asked.append((start, stop))
        return [journaled[seq] for seq in range(start, stop) if seq in journaled]

    path = tmp_path / "resumed.jsonl"
    with OrderedRecordWriter(path, window=4, premade=premade) as writer:
        await writer.admit(2)  # 0 and 1 were skipped: written before 2 may start
        assert path.read_text().count("\n") == 2
        await writer.admit(4)
        await writer.admit(5)
        await writer.put_record(5, {"rollout_id": "new5", "turns": []})
        await writer.put_record(4, {"rollout_id": "new4", "turns": []})
        await writer.put_record(2, {"rollout_id": "new2", "turns": []})  # 2, 3 (premade), 4, 5 go out
        await writer.complete(8)  # the skipped tail
    ids = [json.loads(line)["rollout_id"] for line in path.read_text().splitlines()]
    assert ids == ["old0", "old1", "new2", "old3", "new4", "new5", "old6", "old7"]
    assert writer.count == 8 and asked == [(0, 2), (3, 4), (6, 8)]


def test_a_tally_counts_a_record_read_back_as_it_counted_the_rollout() -> None:
    from osmosis_ai.traingate.report import RunTally

    sessions = [_long_session(f"r{i}", 2) for i in range(3)]
    sessions[1].status, sessions[1].error_message = "ERROR", "broke"
    sessions[0].reward = 0.5
    live, replayed = RunTally(keep_lines=5), RunTally(keep_lines=5)
    for session in sessions:
        live.add(session)
        replayed.add_record(json.loads(json.dumps(session.to_record())), replayed=True)
    assert replayed.summary(1.0).to_dict() == {**live.summary(1.0).to_dict(), "rollouts_per_s": 0.0}
    assert replayed.lines == live.lines and replayed.agent_errors == live.agent_errors


async def test_an_interrupted_resumed_run_keeps_the_premade_records_before_its_last_rollout(
    tmp_path: Path,
) -> None:
    def premade(start: int, stop: int) -> list[dict[str, object]]:
        return [{"rollout_id": f"old{seq}", "turns": []} for seq in range(start, stop)]

    path = tmp_path / "interrupted.jsonl"
    with OrderedRecordWriter(path, window=8, premade=premade) as writer:
        await writer.admit(1)  # 0 is premade and written at once
        await writer.admit(3)
        await writer.admit(5)
        await writer.put_record(5, {"rollout_id": "new5", "turns": []})  # 1 and 3 never finish
    ids = [json.loads(line)["rollout_id"] for line in path.read_text().splitlines()]
    assert ids == ["old0", "old2", "old4", "new5"] and writer.count == 4
