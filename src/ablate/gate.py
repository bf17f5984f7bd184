"""``python -m ablate.gate``: a regression gate for CI (see :mod:`ablate.app.gate`); ``ablate.gate.decide`` is its
decision on two mappings question -> value (:func:`ablate.study.gate.decide`; several metrics:
:func:`ablate.study.gate.decide_metrics`), loaded when first asked for so that ``--help`` and a mistaken option import
no statistics library."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ablate.study.gate import Decision, GateError, decide, decide_metrics

__all__ = ["Decision", "GateError", "decide", "decide_metrics"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ablate.study import gate

        return getattr(gate, name)
    raise AttributeError(f"module 'ablate.gate' has no attribute {name!r}")


if __name__ == "__main__":
    from ablate.app.gate import main

    raise SystemExit(main())
