"""A run's params: what ran, typed — the pipeline's shape, each built stage's parameters under its name, the corpus
as loaded, the evaluation rules and the statistics settings (names from :mod:`ablate.record`)."""

from __future__ import annotations

from typing import Any

from ablate import record as R
from ablate.data.snapshot import Snapshot
from ablate.runner.settings import CorpusSpec, RunSettings


def params_for(
    variant: str, result: Any, snapshot: Snapshot, corpus: CorpusSpec, settings: RunSettings
) -> dict[str, Any]:
    """The run's params: what ran, typed. Stages that did not run log nothing."""
    pipe = result.pipeline
    params: dict[str, Any] = {
        R.P_VARIANT: variant,
        R.P_RETRIEVERS: [r.name for r in pipe.retrievers],
        R.P_FUSER: pipe.fuser.name if pipe.fuser is not None else R.NONE,
        R.P_RERANKER: pipe.reranker.name if pipe.reranker is not None else R.NONE,
        R.P_GENERATOR: pipe.generator.name if pipe.generator is not None else R.NONE,
    }
    for stage in pipe.stages:
        params.update(R.flatten(stage.params(), stage.name))
    params.update(
        {
            R.P_CORPUS_NAME: snapshot.name,
            "corpus.path": str(snapshot.root),
            R.P_SPLIT: result.split,
            R.P_IDENTITY: corpus.identity,
            R.P_AS_OF: corpus.as_of,
            R.P_VERSIONS_POLICY: corpus.version_policy,
            "corpus.split_file": corpus.split_file,
            "corpus.language": snapshot.language,
            R.P_LANGUAGE_SOURCE: snapshot.language_source,
            "corpus.chunker": snapshot.chunker.params(),
        }
    )
    if snapshot.projection is not None:  # labels carried onto other chunks: how (the counts are metrics)
        params.update(R.flatten(snapshot.projection.record(), R.P_PROJECTION))
    params.update(label_params(snapshot))
    params.update(R.flatten(settings.eval.as_dict(), "eval"))
    params["abstain.threshold"] = settings.abstain_threshold
    params["stats.bootstrap"] = settings.bootstrap
    params["stats.seed"] = settings.seed
    return params


def label_params(snapshot: Snapshot) -> dict[str, Any]:
    """Labels from a committed label version (its name is the tag ``ablate.label_version``): the version it was made
    from and how many of its labels an LLM made; nothing for a corpus's own ``qrels/``."""
    prov = snapshot.label_provenance
    if not prov:
        return {}
    return {R.P_LABELS_PARENT: prov["label_version_parent"], R.P_LABELS_LLM_MADE: prov["labels_llm_made"]}
