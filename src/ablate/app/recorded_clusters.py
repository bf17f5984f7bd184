"""The question clusters of a run logged before ablate recorded them in ``per_query.csv``, again: from the corpus its
``config.yaml`` names (loaded as the run loaded it: split file, label version) at its relevance level, as a new run
records them (:func:`ablate.data.splitting.question_clusters`). What :func:`ablate.study.clusters.with_clusters` calls
for the report and the plan; None when the run's config or corpus cannot be read (the study then treats the questions
as independent and says so)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ablate.errors import AblateError
from ablate.record import RecordedRun
from ablate.study.clusters import Recompute, Recorded


def recompute(tracker: Any) -> Recompute:
    """A :data:`~ablate.study.clusters.Recompute` reading runs from ``tracker``'s store."""

    def again(run: RecordedRun, qids: list[str]) -> Recorded | None:
        from ablate.app.label_common import load
        from ablate.data.splitting import question_clusters
        from ablate.record_digest import RunFiles
        from ablate.runner.rescore import _config, recorded_settings

        with tempfile.TemporaryDirectory(prefix="ablate-clusters-") as tmp:
            try:  # config.yaml checked against the run's sealed record
                cfg = _config(tracker, run.run_id, tmp, RunFiles(tracker, run, Path(tmp)))
                corpus, settings = recorded_settings(cfg)
                snapshot = load(corpus)
            except (AblateError, OSError):
                return None
        return question_clusters(snapshot, qids, settings.eval.relevance_level)

    return again
