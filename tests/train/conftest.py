"""Fixtures of the training tests: the tiny model, built once per session (offline), and its chat tokenizer."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from osmosis_ai.train.tiny import build_tiny_model

    yield build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def chat_tokenizer(tiny_model: Path):  # type: ignore[no-untyped-def]
    from osmosis_ai.traingate.tokenizer import ChatTokenizer

    return ChatTokenizer.from_directory(tiny_model)
