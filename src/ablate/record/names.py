"""Every param, tag, metric and artifact name a tracked run records: the one place a name is spelled (see
:mod:`ablate.record`)."""

from __future__ import annotations

# -- params ---------------------------------------------------------------------------------------------------------
P_VARIANT = "variant"
P_RETRIEVERS = "pipeline.retrievers"
P_FUSER = "pipeline.fuser"
P_RERANKER = "pipeline.reranker"
P_GENERATOR = "pipeline.generator"
#: The pipeline's shape: what ``conf/variant/*.yaml`` sets. Together they are one factor, "the variant".
PIPELINE_PARAMS: dict[str, str] = {
    P_RETRIEVERS: "retrievers",
    P_FUSER: "fusion",
    P_RERANKER: "reranker",
    P_GENERATOR: "generator",
}
NONE = "none"
P_SPLIT = "corpus.split"
P_CORPUS_NAME = "corpus.name"
P_IDENTITY = "corpus.identity"
P_AS_OF = "corpus.as_of"
P_VERSIONS_POLICY = "versions.policy"
#: Settings recorded inside a component their name does not say (``runner.pipeline.components_of``): the ``dates``
#: component holds the question date and the version policy, so a change of either is that component's change.
PARAM_COMPONENTS = {P_AS_OF: "dates", P_VERSIONS_POLICY: "dates"}
#: Where ``corpus.language`` came from (declared / setting / detected); the language itself is ``corpus.language``.
P_LANGUAGE_SOURCE = "corpus.language_source"
#: On a run whose labels are a committed label version (``corpus.labels``; its name is the tag ``ablate.label_version``):
#: the version it was made from and how many of its labels an LLM made (:mod:`ablate.data.labelsets`).
P_LABELS_PARENT = "labels.parent"
P_LABELS_LLM_MADE = "labels.llm_made"
#: The correction a sweep's report applies to its family of comparisons (``stats.correction``), on the sweep parent
P_CORRECTION = "stats.correction"
#: Who judged a run's answers (``answer.judge``: ``rule`` or ``llm``) and an LLM judge's model (:mod:`ablate.runner.judge`)
P_ANSWER_JUDGE = "answer.judge"
P_ANSWER_JUDGE_MODEL = "answer.judge_model"


#: Metrics a report logs on each run it compares with the baseline: ``mde_ndcg_at_10``, the minimum detectable
#: effect (80% power, alpha 0.05) of the paired comparison on the questions both runs score
MDE_PREFIX = "mde_"
#: Params that never change a run's rankings or scores (prefixes end with "."): bookkeeping for comparisons. (The
#: labels' provenance is bookkeeping too: runs on other labels are told apart by ``ablate.qrels_hash``.)
BOOKKEEPING_PARAMS: tuple[str, ...] = (
    P_VARIANT,
    "stats.",
    "corpus.path",
    P_SPLIT,
    P_LANGUAGE_SOURCE,
    P_LABELS_PARENT,
    P_LABELS_LLM_MADE,
)
#: Params ending so say where another param's value came from (``dense.model_source``: ``setting`` / ``language:zh``):
#: bookkeeping too, since the value itself is what ran.
SOURCE_PARAM_SUFFIX = "_source"

# -- tags -----------------------------------------------------------------------------------------------------------
T_PARENT = "mlflow.parentRunId"
T_VARIANT = "ablate.variant"
T_VARIANT_ORDER = "ablate.variant_order"
T_GIT = "ablate.git_commit"
T_SWEEP = "ablate.sweep"
#: a sweep's child: its cell's place in the sweep as declared (0 = the first cell of Hydra's cartesian product); the
#: summary and the report list a sweep's runs in this order
T_SWEEP_INDEX = "ablate.sweep_index"
T_ROLE = "ablate.role"
ROLE_SWEEP_PARENT = "sweep-parent"
T_OVERRIDES = "ablate.overrides"
T_PARAM_SOURCES = "ablate.param_sources"
T_SNAPSHOT = "ablate.snapshot"
T_INDEX_SNAPSHOT = "ablate.index_snapshot"
T_QRELS_HASH = "ablate.qrels_hash"
T_QRELS_FILE = "ablate.qrels_file_sha256"
T_LABEL_VERSION = "ablate.label_version"
#: On a run whose chunk labels were projected onto another chunker's chunks (ablate.data.projection): the content hash
#: of the labels as written (what a run on the labels' own chunker has as its qrels_hash), and the chunks projected
#: onto (``tokens-100``). Such runs compare with each other at the document level only.
T_QRELS_SOURCE = "ablate.qrels_source_hash"
T_UNIT_CHANGE = "ablate.labels_projected_onto"
T_SPLIT = "ablate.split"
T_CORPUS = "ablate.corpus"
T_IDENTITY = "ablate.identity"
T_FAILURE = "ablate.failure"
T_HOST = "ablate.host"
T_PID = "ablate.pid"
T_PID_START = "ablate.pid_start"
T_EXPECTED_CHILDREN = "ablate.expected_children"
T_FP_PREFIX = "ablate.fp."
T_CONFIG_FP = "ablate.config_fp"
T_HELDOUT = "ablate.heldout"
T_TEST_REUSE = "ablate.test_reuse"
T_TEST_REUSE_PREVIOUS = "ablate.test_reuse_previous"
T_TEST_REPEAT = "ablate.test_repeat"
T_TEST_FIRST = "ablate.test_first"
#: ``true`` on a held-out-split run launched with ``--confirm-test`` / ``heldout.confirm_test=true``: the user declared
#: it the one final run of settings chosen on dev (a multirun on test is refused without it).
T_TEST_CONFIRMED = "ablate.test_confirmed"
#: on a run of a corpus with one labels file and no split file (an exploratory pilot, ablate.runner.heldout):
#: "no held-out split: exploratory"; its ``ablate.heldout`` is ``exploratory``
T_EXPLORATORY = "ablate.exploratory"
#: Splits that are held out: tune on the others (dev), run these once. The runner's held-out rules and the report's
#: "test-tuned" marking both read this.
HELD_OUT_SPLITS: tuple[str, ...] = ("test",)
T_CHILDREN = "ablate.children"
#: sha256 of everything that decides a run's numbers (ablate.runner.reuse): a FINISHED run with the same key may stand
#: for a new job (tracking.reuse)
T_CELL = "ablate.cell"
#: on a run recorded for a job whose inputs matched an earlier FINISHED run: that run's id (nothing ran again)
T_REUSED_FROM = "ablate.reused_from"
#: sha256 of a finished run's record (its params, metrics and artifacts as logged; ablate.record_digest): set when the
#: record is complete; reuse copies a run only while its record still matches it
T_RECORD_DIGEST = "ablate.record_digest"
#: ``true`` on a run that computed its record (never on a reused run): reuse copies only these
T_ORIGINAL = "ablate.original"
T_FAILED_CHILDREN = "ablate.failed_children"
T_REPORT_BASELINE = "ablate.report_baseline"
#: How the latest report adjusted its family of p-values (holm, bh, none); the sweep's setting is ``stats.correction``
T_REPORT_CORRECTION = "ablate.report_correction"
#: On a run a report compared with its baseline: the baseline's run id that its ``mde_<metric>`` metrics are against
T_MDE_BASELINE = "ablate.mde_baseline"
#: On a run re-scored on a new label version (``python -m ablate.report --parent ID --labels NAME``,
#: :mod:`ablate.runner.relabel`): the run it re-scores (its run.trec and answers.csv, nothing retrieved again); on
#: the new sweep parent: the old sweep parent.
T_RESCORED_FROM = "ablate.rescored_from"
#: On a re-scored run: sha256 over the id and record digest of the run it re-scores and the sha256 of every file read
#: from it (:meth:`ablate.record_digest.RunFiles.key`); a later ``--labels`` call reuses the re-score only while they
#: are the same (an edited ``run.trec`` is refused, a copy of another run's files is another run).
T_RESCORED_INPUTS = "ablate.rescored_inputs"
#: On a re-scored run and its sweep parent: sha256 over the label version's ``<split>.tsv`` files (a version of the
#: same name in another labels folder is another version: never taken for this one's re-scores).
T_LABELS_SHA = "ablate.labels_sha256"

# -- metrics --------------------------------------------------------------------------------------------------------
#: The headline metrics (library keys) shown in console tables.
HEADLINE: tuple[str, ...] = ("ndcg@10", "recall@10", "hit@10", "mrr@10", "recall@100")
#: Metrics reported per question tag.
SLICE_METRICS: tuple[str, ...] = (
    "ndcg@10",
    "recall@10",
    "hit@10",
    "mrr@10",
    "subq_coverage@10",  # only runs whose questions declare sub-questions have these two
    "subq_all@10",
)
#: Answer metrics reported per question tag (runs with a generator).
ANSWER_SLICE_METRICS: tuple[str, ...] = (
    "answer_correct",
    "answer_f1",
    "answer_citations_support",
    "answer_generation_failures",
    "answer_retrieval_failures",
    "answer_n",
    "answer_parts_covered",  # only runs whose questions declare answer_parts have these two
    "answer_parts_all",
)
#: Document-level scores of a run scored at unit chunk over a chosen chunker: ``doc_ndcg@10`` (metric
#: ``doc_ndcg_at_10``, per-query column ``doc_ndcg@10``), against document labels derived from the original labels.
DOC_PREFIX = "doc_"
#: What carrying chunk labels onto another chunker's chunks did: ``labels_projected``, ``labels_split``, ``labels_lost``.
PROJECTION_METRIC_PREFIX = "labels_"
#: Params of that projection: ``labels.projection.from`` / ``.rule`` / ``.min_overlap`` / ``.label_version``.
P_PROJECTION = "labels.projection"
CI_LOW, CI_HIGH = "_ci_low", "_ci_high"
WILSON_LOW, WILSON_HIGH = "_wilson_low", "_wilson_high"
# -- artifacts ------------------------------------------------------------------------------------------------------
A_CONFIG = "config.yaml"
A_RUN = "run.trec"
A_PER_QUERY = "per_query.csv"
A_MANIFEST = "corpus_manifest.json"
A_COMPONENTS = "components.json"
A_ACCOUNTING = "accounting.json"
A_UNJUDGED = "unjudged.csv"
A_SLICES = "slices.csv"
A_ABSTENTION = "abstention.json"
A_SUMMARY = "summary.md"
A_ANSWERS = "answers.csv"
A_PROMPT = "prompt.txt"
A_FUNNEL = "funnel.csv"
#: The per-question table logged with MLflow's ``log_table`` under this one name on every run (a reused run carries
#: it too), so MLflow's artifact compare view lines runs up question by question: ``qid``, ``category``,
#: ``persona``, ``tags``, the :data:`PER_QUERY_TABLE_METRICS` columns and, with a generator, the
#: :data:`PER_QUERY_TABLE_ANSWERS` columns (those the run has), values as in ``per_query.csv``.
A_PER_QUERY_TABLE = "per_query_table.json"
#: Columns of ``per_query.csv`` naming each question's cluster: ``cluster`` the evidence cluster (questions sharing a
#: gold document or series, a declared group or their normalised text, at the run's relevance level: the smallest
#: question id of the cluster; :func:`ablate.data.splitting.evidence_groups`), ``group`` its declared ``group`` ("" if
#: none). The report and the plan resample these clusters (:mod:`ablate.study.clusters`).
PQ_CLUSTER = "cluster"
PQ_GROUP = "group"
PER_QUERY_TABLE_KEYS: tuple[str, ...] = ("category", "persona", "tags")
PER_QUERY_TABLE_METRICS: tuple[str, ...] = ("ndcg@10", "recall@10", "hit@10", "rr@10", "judged@10")
PER_QUERY_TABLE_ANSWERS: tuple[str, ...] = (
    "answer_correct",
    "answer_f1",
    "answer_refused",
    "answer_citations_support",
    "answer_diagnosis",
)
#: The funnel per question (ablate.runner.funnel): one row per answerable question and stage, in stage order; the
#: mean of a stage's ``recall`` (``topk_recall``) over its questions is the logged ``funnel/<i>_<stage>_recall``
#: (``_topkrecall``). The report reads it to say at which stage a question lost its evidence.
A_FUNNEL_PER_QUERY = "funnel_per_query.csv"
FUNNEL_PER_QUERY_COLUMNS: tuple[str, ...] = (
    "qid",
    "position",
    "stage",
    "depth",
    "relevant",
    "found",
    "recall",
    "first_rank",
    "topk",
    "topk_found",
    "topk_recall",
)
#: what the tag ``ablate.record_digest`` covers, item by item (ablate.record_digest): what changed, when it no
#: longer matches
A_RECORD_DIGEST = "record_digest.json"
REPORT_DIR = "report"
#: In a sweep's folder: the id of its parent run (a report goes into the folder a parent's tag names only when the
#: folder holds this file naming that run).
SWEEP_PARENT_FILE = ".ablate_parent_run"
#: Where the whole value of a param or tag too long for MLflow is kept, one file per key
#: (:func:`full_value_artifact`); the logged value is cut and says so (:func:`shortened`). Those of tags are not part
#: of the record digest (tags say where a run stands, not what it measured).
A_FULL_VALUES = "full_values"
A_FULL_TAG_VALUES = f"{A_FULL_VALUES}/tags"
