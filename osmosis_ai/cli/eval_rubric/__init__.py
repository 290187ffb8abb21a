"""The ``osmosis eval-rubric`` and ``osmosis preview`` app: rubric config files (``config``), JSONL
datasets (``dataset``), the text and JSON reports (``report``), the whole flow (``session``) and
``preview``. The judging itself is the library: the judge in :mod:`osmosis_ai.judge`, each record
judged on the run engine (:mod:`osmosis_ai.runs.judging`)."""
