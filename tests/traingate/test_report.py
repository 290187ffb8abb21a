"""The ``--output`` records: shallow turn dicts, written in order by a writer thread without stalling the loop."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from osmosis_ai.traingate.report import RecordWriter
from osmosis_ai.traingate.session import RolloutSession, TurnRecord
from osmosis_ai.traingate.tokenizer import ByteTokenizer, render_prompt


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


async def test_big_records_are_written_in_order_without_stalling_the_loop(tmp_path: Path) -> None:
    sessions = [_long_session(f"r{i}", 50) for i in range(3)]
    worst = 0.0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal worst
        while not stop.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.005)
            worst = max(worst, time.perf_counter() - started - 0.005)

    path = tmp_path / "records.jsonl"
    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)
    with RecordWriter(path) as writer:
        await asyncio.gather(*(writer.write(s) for s in sessions))
    stop.set()
    await ticking
    lines = path.read_text(encoding="utf-8").splitlines()
    assert writer.count == 3 and len(lines) == 3
    records = [json.loads(line) for line in lines]
    assert [r["rollout_id"] for r in records] == ["r0", "r1", "r2"]
    assert records[0] == json.loads(json.dumps(sessions[0].to_record()))
    assert len(records[2]["turns"]) == 50 and records[2]["turns"][49]["index"] == 49
    # ~40 MB of JSON in all; encoded turn by turn in the writer thread, the loop keeps ticking.
    assert worst < 0.1, f"the event loop stalled {worst * 1000:.0f} ms while records were written"
