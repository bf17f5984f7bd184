"""The oracle: the gold evidence ranked by grade, permission-filtered, and the stage contract."""

from ablate.stages.retrievers.oracle import OracleRetriever
from ablate.testing.contracts import RetrieverContract, contract_corpus


class TestOracleContract(RetrieverContract):
    option = "retrievers/oracle"
    variations = {"min_grade": 2}
    invalid = {"min_grade": "high"}

    def make(self, **params):
        return OracleRetriever(**params)


def test_grades_rank_first_and_labels_come_from_the_bound_split(tmp_path):
    snap = contract_corpus(tmp_path / "c")
    dev = OracleRetriever().bind(snap, "dev")
    from ablate.cache import Cache
    from ablate.stages.base import StageContext

    dev.prepare(StageContext(snap, Cache(tmp_path / "cache")))
    run = dev.search([snap.queries["q2"], snap.queries["q1"], snap.queries["q6"]], 10)
    assert [h.chunk_id for h in run.get("q2")] == [
        "POL-2026#4.2-b",
        "POL-2026#4.2-a",
    ]  # grade 2 before grade 1
    assert [h.chunk_id for h in run.get("q1")] == ["INV-102#p0"]  # grade 0 is judged, never gold
    assert run.get("q6") == []
    strict = OracleRetriever(min_grade=2).bind(snap, "dev")
    strict.prepare(StageContext(snap, Cache(tmp_path / "cache")))
    assert [h.chunk_id for h in strict.search([snap.queries["q2"]], 10).get("q2")] == ["POL-2026#4.2-b"]
    train = OracleRetriever().bind(snap, "train")
    assert train.fingerprint().key != dev.fingerprint().key  # other labels, other identity
