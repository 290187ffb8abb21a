"""One self-contained HTML report for the results of ``rollout run``, ``test``, ``eval`` and ``eval-rubric``.

* :mod:`~osmosis_ai.report.model` — the shape every results file is read into (:class:`Run`, :class:`Row`);
* :mod:`~osmosis_ai.report.readers` — detects which command wrote a file and reads it, tolerating fields
  it does not know and optional fields that are missing;
* :mod:`~osmosis_ai.report.figures` — the summary: outcome counts, mean score with its interval, pass@k,
  latency percentiles, tokens, and the per-row comparison of two runs;
* :mod:`~osmosis_ai.report.merge` — the ``--offset``/``--limit`` shards of one run read as that run;
* :mod:`~osmosis_ai.report.cost` — estimated cost from LiteLLM's price table, looked up lazily;
* :mod:`~osmosis_ai.report.charts` — the score histogram and the pass@k curve as inline SVG;
* :mod:`~osmosis_ai.report.render` — the HTML page: styles and scripts inlined from ``assets/``,
  trajectories embedded gzip-compressed and decompressed by the browser when first opened.

Nothing here prints or reads the command line; ``osmosis report`` (``osmosis_ai.cli.commands.report``) does.
"""
