"""``python -m ablate.report``: the ablation report of tracked runs (see :mod:`ablate.app.report`)."""

from ablate.app.supervise import supervise

if __name__ == "__main__":
    supervise()  # re-scoring (--labels) runs at length: a crash in native code is one line, no run left RUNNING

from ablate.app.report import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
