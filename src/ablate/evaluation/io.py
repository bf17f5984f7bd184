"""Read TREC run files, TREC qrels and BEIR qrels (tsv with header).

* TREC run: ``qid Q0 docid rank score tag`` (whitespace separated). Each line becomes a hit with ``chunk_id = doc_id =
  docid``. Like trec_eval, the rank column is ignored: results are ordered by score, descending, and ties are broken
  by a declared rule (:data:`TIE_RULES`): ``docid-asc`` (default, the same as :data:`ablate.types.TIE_RULE`) or
  ``trec_eval`` (docid descending, what trec_eval does). The rule is stored in ``run.meta["tie_rule"]``. A docid
  listed twice for one query is kept (evaluation dedups it, first appearance after sorting) and counted in
  ``run.meta["duplicate_lines"]``; trec_eval would refuse the file.
* TREC qrels: ``qid iter docid grade`` (grade an integer; negative = judged non-relevant).
* BEIR qrels: a ``query-id<TAB>corpus-id<TAB>score`` header, then one judgement per line.

Malformed lines raise :class:`ablate.errors.InputError` naming ``path:line``. A (qid, id) judged twice with
different grades is an error; an exact repeat is accepted.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from ablate.errors import ConfigError, InputError
from ablate.data.types import UNITS, Hit, Qrels, Run

TIE_RULES: dict[str, str] = {
    "docid-asc": "score desc, then docid asc (rank column ignored)",
    "trec_eval": "score desc, then docid desc, as trec_eval (rank column ignored)",
}
BEIR_HEADER = ("query-id", "corpus-id", "score")


def _read_lines(path: str | Path) -> tuple[list[str], str]:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(str(p), "file not found", "check the path") from None
    except IsADirectoryError:
        raise InputError(str(p), "is a directory, not a file", "give the path of the file itself") from None
    except OSError as e:
        raise InputError(
            str(p), f"cannot be read ({e.strerror})", "check the path and its permissions"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(f"{p}:{line}", "is not valid UTF-8", "save the file as UTF-8") from None
    return text.splitlines(), hashlib.sha256(data).hexdigest()


def read_trec_run(path: str | Path, ties: str = "docid-asc", name: str | None = None) -> Run:
    """A TREC run file as a :class:`~ablate.types.Run` ordered by ``ties`` (see :data:`TIE_RULES`)."""
    if ties not in TIE_RULES:
        raise ConfigError("ties", ties, f"valid options: {', '.join(TIE_RULES)}")
    lines, sha = _read_lines(path)
    per_query: dict[str, list[tuple[str, float]]] = {}
    seen: set[tuple[str, str]] = set()
    duplicates = 0
    tag = None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        f = line.split()
        if len(f) != 6:
            raise InputError(
                f"{path}:{n}",
                f"expected 6 fields 'qid Q0 docid rank score tag', found {len(f)}",
                "write one result per line as 'qid Q0 docid rank score tag'",
            )
        qid, _, docid, _, score_s, tag_s = f
        try:
            score = float(score_s)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise InputError(
                f"{path}:{n}", f"score {score_s!r} is not a finite number", "write a numeric score"
            )
        if (qid, docid) in seen:
            duplicates += 1
        else:
            seen.add((qid, docid))
        per_query.setdefault(qid, []).append((docid, score))
        tag = tag or tag_s
    results: dict[str, list[Hit]] = {}
    for qid, rows in per_query.items():
        rows.sort(key=lambda r: r[0], reverse=(ties == "trec_eval"))
        rows.sort(key=lambda r: -r[1])  # stable: the docid order breaks score ties
        results[qid] = [Hit(d, d, s) for d, s in rows]
    meta = {
        "source": str(path),
        "source_sha256": sha,
        "tie_rule": TIE_RULES[ties],
        "duplicate_lines": duplicates,
    }
    return Run(name or tag or Path(path).stem, results, meta)


def _grade(s: str, where: str) -> int:
    try:
        return int(s)
    except ValueError:
        pass
    try:
        f = float(s)
    except ValueError:
        f = math.nan
    if math.isfinite(f) and f == int(f):  # "2.0" is a grade, "2.5" is not
        return int(f)
    raise InputError(
        where, f"grade {s!r} is not an integer", "write integer grades (0 = judged non-relevant)"
    )


def _add(judgements: dict[str, dict[str, int]], qid: str, uid: str, grade: int, where: str) -> None:
    j = judgements.setdefault(qid, {})
    old = j.get(uid)
    if old is not None and old != grade:
        raise InputError(
            where,
            f"{qid}/{uid} is judged twice with different grades ({old} and {grade})",
            "keep one judgement per query and id",
        )
    j[uid] = grade


def _check_unit(unit: str) -> None:
    if unit not in UNITS:
        raise ConfigError("qrels unit", unit, f"valid options: {', '.join(UNITS)}")


def read_trec_qrels(path: str | Path, unit: str = "doc") -> Qrels:
    """TREC qrels (``qid iter docid grade``)."""
    _check_unit(unit)
    lines, sha = _read_lines(path)
    judgements: dict[str, dict[str, int]] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        f = line.split()
        where = f"{path}:{n}"
        if len(f) != 4:
            raise InputError(
                where,
                f"expected 4 fields 'qid iter docid grade', found {len(f)}",
                "write one judgement per line as 'qid 0 docid grade'",
            )
        _add(judgements, f[0], f[2], _grade(f[3], where), where)
    return Qrels(judgements, unit=unit, name=Path(path).name, source_sha256=sha)  # type: ignore[arg-type]


def read_beir_qrels(path: str | Path, unit: str = "doc") -> Qrels:
    """BEIR qrels tsv: header ``query-id, corpus-id, score`` (tab separated), then one judgement per line."""
    _check_unit(unit)
    lines, sha = _read_lines(path)
    if not lines or tuple(c.strip() for c in lines[0].split("\t")) != BEIR_HEADER:
        raise InputError(
            f"{path}:1",
            "missing the header 'query-id<TAB>corpus-id<TAB>score'",
            "start the file with that header line (BEIR qrels format)",
        )
    judgements: dict[str, dict[str, int]] = {}
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        f = line.split("\t")
        where = f"{path}:{n}"
        if len(f) != 3 or not f[0].strip() or not f[1].strip():
            raise InputError(
                where,
                f"expected 3 tab-separated fields 'query-id corpus-id score', found {len(f)}",
                "separate the fields with tabs, one judgement per line",
            )
        _add(judgements, f[0].strip(), f[1].strip(), _grade(f[2].strip(), where), where)
    return Qrels(judgements, unit=unit, name=Path(path).name, source_sha256=sha)  # type: ignore[arg-type]


def read_qrels(path: str | Path, unit: str = "doc") -> Qrels:
    """BEIR qrels when the first line is the BEIR header, else TREC qrels."""
    lines, _ = _read_lines(path)
    first = lines[0] if lines else ""
    if tuple(c.strip() for c in first.split("\t")) == BEIR_HEADER:
        return read_beir_qrels(path, unit)
    return read_trec_qrels(path, unit)
