"""The shared numeric argument types: accepted values and the usage messages for the rest."""

from __future__ import annotations

import argparse

import pytest

from osmosis_ai.cli.arguments import finite_number, whole_number
from osmosis_ai.cli.parser import OutOfRange


@pytest.mark.parametrize(
    ("parse", "text", "expected"),
    [
        (whole_number(1), "3", 3),
        (whole_number(0), "0", 0),
        (whole_number(1, 65535, name="port"), "65535", 65535),
        (finite_number(), "-2.5", -2.5),
        (finite_number(0), "0", 0.0),
        (finite_number(0, exclusive=True), "0.1", 0.1),
    ],
)
def test_accepted_values(parse, text, expected) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (whole_number(1), "many", "invalid value 'many': expected a whole number"),
        (whole_number(1), "0", "invalid value 0: expected 1 or more"),
        (whole_number(1, 65535, name="port"), "70000", "invalid port 70000: expected 1-65535"),
        (finite_number(), "hot", "expected a number, got 'hot'"),
        (finite_number(), "nan", "must be a finite number, got 'nan'"),
        (finite_number(), "-inf", "must be a finite number, got '-inf'"),
        (finite_number(0), "-1", "must be at least 0, got '-1'"),
        (finite_number(0, exclusive=True), "0", "must be greater than 0, got '0'"),
    ],
)
def test_refused_values_say_what_was_expected(parse, text, message) -> None:
    # A word that is not a number is a usage error; a number out of range is a value error.
    refused = argparse.ArgumentTypeError if text in {"many", "hot"} else OutOfRange
    with pytest.raises(refused) as exc:
        parse(text)
    assert str(exc.value) == message
