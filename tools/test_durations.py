"""Where the test suite's time goes, from the JUnit XML report ``make test`` writes (``.test-reports/junit.xml``).

``python tools/test_durations.py [.test-reports/junit.xml] [--top 15]`` prints the seconds per test file (setup,
call and teardown of its tests, summed: pytest's ``junit_duration_report = total``), its share of the summed time,
its test count, and the slowest single tests. Under ``pytest -n 2`` the summed time is about twice the wall time:
each worker's tests are counted. Standard library only.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET  # noqa: S405 - our own pytest's report, not input from elsewhere
from collections import defaultdict
from pathlib import Path

DEFAULT = Path(".test-reports/junit.xml")


def cases(path: Path) -> list[tuple[str, str, float, str]]:
    """(file, test name, seconds, outcome) of every test case in the report."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):  # noqa: S314 - see the import
        module = case.get("classname", "").split(".")
        file = "/".join(module[: next((i for i, p in enumerate(module) if p.startswith("test_")), 0) + 1])
        outcome = "skipped" if case.find("skipped") is not None else "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        out.append((f"{file}.py", case.get("name", ""), float(case.get("time", 0.0)), outcome))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--top", type=int, default=15, help="how many files and tests to list (default 15)")
    args = ap.parse_args(argv)
    if not args.report.is_file():
        print(f"error: {args.report}: no such report; run `make test` first (it writes it)", file=sys.stderr)
        return 2
    rows = cases(args.report)
    total = sum(s for _, _, s, _ in rows) or 1.0
    per_file: dict[str, list[float]] = defaultdict(list)
    for file, _, seconds, _ in rows:
        per_file[file].append(seconds)
    print(f"{len(rows)} tests, {total:.0f} s summed over {len(per_file)} files")
    print(f"{'seconds':>8} {'share':>6} {'tests':>6}  file")
    for file, times in sorted(per_file.items(), key=lambda kv: -sum(kv[1]))[: args.top]:
        print(f"{sum(times):8.1f} {sum(times) / total:6.1%} {len(times):6d}  {file}")
    print(f"\n{'seconds':>8}  slowest tests")
    for file, name, seconds, _ in sorted(rows, key=lambda r: -r[2])[: args.top]:
        print(f"{seconds:8.1f}  {file}::{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
