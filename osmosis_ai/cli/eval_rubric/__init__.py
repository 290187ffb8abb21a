"""The ``osmosis eval-rubric`` and ``osmosis preview`` app: rubric config files (``config``), JSONL
datasets (``dataset``), judging every record (``engine``), the text and JSON reports (``report``),
the whole flow (``session``) and ``preview``. The judging itself is the library in
:mod:`osmosis_ai.judge`."""
