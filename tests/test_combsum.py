"""CombSUM: the fuser contract, and one hand-computed case."""

from ablate.data.types import Hit, Run
from ablate.stages.fusion.combsum import CombSUM
from ablate.testing.contracts import FuserContract


class TestCombSUMContract(FuserContract):
    option = "fusion/combsum"
    variations = {"window": 3, "normalize": "none"}
    invalid = {"window": 0, "normalize": "zscore"}

    def make(self, **params):
        return CombSUM(**params)


def test_scores_are_the_sum_of_min_max_normalised_scores():
    a = Run("a", {"q": [Hit("x", "X", 3.0), Hit("y", "Y", 2.0), Hit("z", "Z", 1.0)]})
    b = Run("b", {"q": [Hit("z", "Z", 10.0), Hit("x", "X", 0.0)]})
    out = CombSUM().fuse([a, b], 3).get("q")
    assert [(h.chunk_id, h.score) for h in out] == [("x", 1.0), ("z", 1.0), ("y", 0.5)]
