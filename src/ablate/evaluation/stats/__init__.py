"""Uncertainty over queries: bootstrap confidence intervals, the Wilson interval, paired tests, Holm's correction.

**The unit of resampling is the query.** Every function here takes one value per query (a per-query metric such as
``ndcg@10`` or a 0/1 ``hit@10``) and treats the queries as the sample drawn from the population of questions users
ask. Repeated generations or repeated runs of one query are *not* new samples: 30 questions answered 3 times each are
still 30 observations. Average repeats per query first (``table.groupby(level=0).mean()``); :func:`bootstrap_cis`
refuses a table whose index repeats a query id. How wide such intervals are at the sizes people test with:
docs/metrics.md.

**Clusters of queries.** Questions that share their gold evidence (paraphrases, sub-questions of one case) move
together. :func:`bootstrap_ci`, :func:`bootstrap_cis` and the paired tests take ``groups`` (one cluster label per
query): when a cluster holds two or more queries they resample *clusters* (the cluster bootstrap; signs flipped per
cluster; the paired bootstrap studentised by the cluster-robust standard error); with every query its own cluster
they compute exactly what they compute without ``groups``.

One module per concept: :mod:`~ablate.evaluation.stats.bootstrap` (intervals),
:mod:`~ablate.evaluation.stats.paired` (paired tests), :mod:`~ablate.evaluation.stats.cluster` and
:mod:`~ablate.evaluation.stats.cluster_paired` (the same over clusters of queries), :mod:`~ablate.evaluation.stats.holm`
and :mod:`~ablate.evaluation.stats.correction` (multiple comparisons: Holm, Benjamini-Hochberg),
:mod:`~ablate.evaluation.stats.power` (what a paired comparison over n questions can detect, and how many questions
detect a given effect), :mod:`~ablate.evaluation.stats.wilson` (proportions), :mod:`~ablate.evaluation.stats.ppi` (a
mean from an assessor's labels corrected by a random human-checked sample: prediction-powered inference),
:mod:`~ablate.evaluation.stats.agreement` (two assessors' grades of the same pairs: Cohen's kappa with intervals
over questions, the confusion matrix, Kendall's tau of the runs' order), on the shared
:mod:`~ablate.evaluation.stats.checks` and :mod:`~ablate.evaluation.stats.resampling`;
:mod:`~ablate.evaluation.stats.kept` keeps intervals in a cache by content. Import the names from this package.

Conventions shared by all functions:

* Pure functions over 1-D arrays (or pandas objects); inputs are never modified.
* Deterministic: every resampling function takes an integer ``seed`` and draws from
  ``numpy.random.default_rng(seed)``; the same inputs and seed give bit-identical outputs, whatever the chunk size
  used internally to bound memory.
* Paired functions take ``a`` (the variant) and ``b`` (the baseline) aligned by query; ``delta = mean(a - b)``, so a
  positive delta means the variant scores higher. Two :class:`pandas.Series` are aligned by their index (query ids).
* ``nan_policy``: per-query values may be undefined (nDCG of a query with no relevant document). ``"raise"`` (the
  default) refuses NaN so that the caller decides which queries count; ``"omit"`` leaves them out (see each function).
* Bad input raises :class:`StatsInputError` and bad settings :class:`StatsConfigError`; both are
  :class:`ablate.errors.AblateError` subclasses (one-line message with the fix) *and* :class:`ValueError` subclasses.

References
----------
* Efron, B. & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. Chapman & Hall. Ch. 13 (percentile
  intervals), ch. 14 (BCa), §16.4 (the one-sample problem: testing by resampling data shifted to the null).
* Efron, B. (1987). Better bootstrap confidence intervals. *JASA* 82(397):171-185.
* Hall, P. & Wilson, S. R. (1991). Two guidelines for bootstrap hypothesis testing. *Biometrics* 47(2):757-762.
* Sakai, T. (2006). Evaluating evaluation metrics based on the bootstrap. *SIGIR 2006*, 525-532.
* Smucker, M. D., Allan, J. & Carterette, B. (2007). A comparison of statistical significance tests for information
  retrieval evaluation. *CIKM 2007*, 623-632.
* Fisher, R. A. (1935). *The Design of Experiments*. Oliver & Boyd (randomization test).
* Phipson, B. & Smyth, G. K. (2010). Permutation p-values should never be zero. *Stat. Appl. Genet. Mol. Biol.*
  9(1):39.
* Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference. *JASA* 22:209-212.
* Benjamini, Y. & Hochberg, Y. (1995). Controlling the false discovery rate. *JRSS B* 57(1):289-300.
* Angelopoulos, A. N., Duchi, J. C. & Zrnic, T. (2023). PPI++: Efficient prediction-powered inference.
  arXiv:2311.01453.
* Cameron, A. C. & Miller, D. L. (2015). A practitioner's guide to cluster-robust inference. *J. Human Resources*
  50(2):317-372.
* Field, C. A. & Welsh, A. H. (2007). Bootstrapping clustered data. *JRSS B* 69(3):369-390.
* Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scand. J. Statist.* 6(2):65-70.
"""

from __future__ import annotations

from ablate.evaluation.stats.agreement import Confusion, confusion, json_finite, kappa_interval, kendall_tau
from ablate.evaluation.stats.bootstrap import bootstrap_ci, bootstrap_cis
from ablate.evaluation.stats.checks import (
    BOOTSTRAP_METHODS,
    NAN_POLICIES,
    Interval,
    StatsConfigError,
    StatsInputError,
)
from ablate.evaluation.stats.correction import (
    CORRECTION_NAMES,
    CORRECTIONS,
    adjust,
    benjamini_hochberg,
)
from ablate.evaluation.stats.holm import holm
from ablate.evaluation.stats.kept import bootstrap_cis_kept, code_digest
from ablate.evaluation.stats.paired import (
    PairedResult,
    paired_bootstrap_test,
    paired_bootstrap_tests,
    paired_randomization_test,
    paired_randomization_tests,
)
from ablate.evaluation.stats.power import (
    mde,
    n_needed,
    sd_diff,
    simulated_power,
    t_power,
    undetermined,
    wilson_width,
)
from ablate.evaluation.stats.ppi import PPIResult, ppi_mean
from ablate.evaluation.stats.wilson import wilson_interval

__all__ = [
    "Confusion",
    "confusion",
    "json_finite",
    "kappa_interval",
    "kendall_tau",
    "BOOTSTRAP_METHODS",
    "NAN_POLICIES",
    "Interval",
    "PairedResult",
    "PPIResult",
    "StatsConfigError",
    "StatsInputError",
    "bootstrap_ci",
    "bootstrap_cis",
    "bootstrap_cis_kept",
    "code_digest",
    "holm",
    "CORRECTIONS",
    "CORRECTION_NAMES",
    "adjust",
    "benjamini_hochberg",
    "mde",
    "n_needed",
    "sd_diff",
    "simulated_power",
    "t_power",
    "undetermined",
    "wilson_width",
    "paired_bootstrap_test",
    "paired_bootstrap_tests",
    "paired_randomization_test",
    "paired_randomization_tests",
    "ppi_mean",
    "wilson_interval",
]
