"""The ``trainer`` fixture of the rollout tests (a TrainGate stand-in), for the serve command's tests."""

from tests.rollout.conftest import _trainer_session, trainer

__all__ = ["_trainer_session", "trainer"]
