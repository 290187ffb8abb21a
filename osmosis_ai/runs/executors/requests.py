"""A dataset row as the ``RolloutRequest`` a local run hands to the agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osmosis_ai.runs.dataset import REQUIRED_COLUMNS

LOCAL_SERVER_URL = "http://local-rollout.local"  # no TrainGate: the agent's calls go to the in-process client


def dataset_row_to_request(
    row: Mapping[str, Any],
    row_index: int,
    max_turns: int = 10,
    max_tokens_total: int = 4096,
    completion_params: Mapping[str, Any] | None = None,
    rollout_id_prefix: str = "local",
    rollout_id: str | None = None,
    metadata_overrides: Mapping[str, Any] | None = None,
) -> Any:
    """The request for a normalised ``row``: its system and user prompts, the limits, and metadata.

    The metadata carries ``ground_truth``, ``row_index`` and every extra column of the row, then
    ``metadata_overrides``. The rollout id is ``rollout_id`` or ``"<prefix>-<row_index>"``.
    """
    from osmosis_ai.rollout.core.schemas import RolloutRequest

    metadata: dict[str, Any] = {k: v for k, v in row.items() if k not in REQUIRED_COLUMNS}
    metadata.update(ground_truth=row["ground_truth"], row_index=row_index)
    metadata.update(metadata_overrides or {})
    return RolloutRequest(
        rollout_id=rollout_id or f"{rollout_id_prefix}-{row_index}",
        server_url=LOCAL_SERVER_URL,
        messages=[
            {"role": "system", "content": row["system_prompt"]},
            {"role": "user", "content": row["user_prompt"]},
        ],
        completion_params=dict(completion_params or {}),
        max_turns=max_turns,
        max_tokens_total=max_tokens_total,
        metadata=metadata,
    )
