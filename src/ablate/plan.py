"""``python -m ablate.plan``: how many questions a comparison needs (see :mod:`ablate.app.plan_questions`)."""

from ablate.app.plan_questions import main

if __name__ == "__main__":
    raise SystemExit(main())
