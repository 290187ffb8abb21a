"""The report package's error: a results file it cannot read, named with what is wrong and where."""

from __future__ import annotations

from osmosis_ai.errors import OsmosisError


class ReportInputError(OsmosisError, ValueError):
    """A results file is missing, is not JSON/JSONL, or is not the output of a command the report knows."""
