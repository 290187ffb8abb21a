"""Shared rollout fixtures: ``trainer``, a scriptable TrainGate stand-in (see ``tests/rollout/trainer.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.rollout.trainer import TrainerStandIn


@pytest.fixture(scope="session")
def _trainer_session() -> Iterator[TrainerStandIn]:
    with TrainerStandIn() as trainer:
        yield trainer


@pytest.fixture
def trainer(_trainer_session: TrainerStandIn) -> Iterator[TrainerStandIn]:
    """The session's TrainGate stand-in on 127.0.0.1, with empty queues and records for this test."""
    _trainer_session.reset()
    yield _trainer_session
    _trainer_session.reset()
