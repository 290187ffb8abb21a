"""Fixtures of the training tests: the tiny model, built once per session (offline), and its chat tokenizer."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
# The venv's ``kernels`` (pulled in by verl) is older than transformers 5.10 expects: importing a
# model class fails on it. Hidden, transformers treats it as absent, which these CPU tests never need.
sys.modules.setdefault("kernels", None)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from osmosis_ai.train.tiny import build_tiny_model

    yield build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def chat_tokenizer(tiny_model: Path):  # type: ignore[no-untyped-def]
    from osmosis_ai.traingate.tokenizer import ChatTokenizer

    return ChatTokenizer.from_directory(tiny_model)
