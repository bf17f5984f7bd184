"""What a tracked run records: every param, tag, metric and artifact name (:mod:`.names`), those names as MLflow keys
(:mod:`.keys`), values as MLflow keeps them (:mod:`.values`), and the run read back as plain data (:mod:`.run`). Read
every name from this package (``from ablate import record as R``; ``R.T_PARENT``).

The runner writes through these names (:mod:`ablate.runner.emit`, :mod:`ablate.runner.job`) and the study tools read
through them (:mod:`ablate.study`): nothing else spells a name. :mod:`ablate.tracking` moves them in and out of
MLflow and hands back :class:`RecordedRun` objects, so no other module sees an MLflow object.

**Params** hold what ran: ``variant``; the pipeline's shape (``pipeline.retrievers``, ``pipeline.fuser``,
``pipeline.reranker``: stage names, ``none`` when absent); each built stage's parameters under its name
(``bm25.k1``, ``rrf.k``, ``rrf.window``, ``rerank.depth``; a stage that did not run logs nothing); the corpus as
loaded (``corpus.*``), the evaluation rules (``eval.*``), ``abstain.threshold`` and ``stats.*``. Values are the typed
values after validation.

**Tags** say where a run stands: corpus and label identity, its fingerprints (``ablate.fp.<component>``), its sweep,
its held-out status, why it failed.
"""

from __future__ import annotations

# Re-exported (``name as name``) so that every name reads as ``R.<name>``; the names of the schema come whole.
from ablate.record.keys import FUNNEL_PREFIX as FUNNEL_PREFIX
from ablate.record.keys import funnel_metric as funnel_metric
from ablate.record.keys import metric_key as metric_key
from ablate.record.keys import param_key as param_key
from ablate.record.keys import parse_funnel as parse_funnel
from ablate.record.keys import parse_funnel_head as parse_funnel_head
from ablate.record.keys import slice_metric as slice_metric
from ablate.record.names import *  # noqa: F403
from ablate.record.run import RecordedRun as RecordedRun
from ablate.record.run import judge_label as judge_label
from ablate.record.values import cut_artifact as cut_artifact
from ablate.record.values import flatten as flatten
from ablate.record.values import full_value_artifact as full_value_artifact
from ablate.record.values import json_list as json_list
from ablate.record.values import param_value as param_value
from ablate.record.values import shortened as shortened
