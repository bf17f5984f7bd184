"""The report's defaults and choices that an entry point's ``--help`` shows, kept apart from the modules that compute
the report (they import pandas and scipy): :mod:`ablate.study.report` and :mod:`ablate.study.slices` import them
from here, so the help cannot drift from what runs."""

from __future__ import annotations

#: Metrics of the narrow ablation table (``--metrics``).
DEFAULT_METRICS: tuple[str, ...] = ("ndcg@10", "recall@10", "mrr@10", "hit@10")
#: Names of the paired tests selectable with ``--test`` (:data:`ablate.study.report.TESTS` maps them to functions).
PAIRED_TESTS: tuple[str, ...] = ("randomization", "bootstrap")
#: The two question tags the slices compare side by side (``--contrast``).
DEFAULT_CONTRAST: tuple[str, str] = ("exact-id", "paraphrase")
