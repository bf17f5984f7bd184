"""``python -m ablate.gate``: a regression gate for CI (see :mod:`ablate.app.gate`); :func:`decide` is its decision
on two mappings question -> value (:mod:`ablate.study.gate`)."""

from ablate.study.gate import Decision, GateError, decide

__all__ = ["Decision", "GateError", "decide"]

if __name__ == "__main__":
    from ablate.app.gate import main

    raise SystemExit(main())
