"""The one qrels reader: BEIR tsv and TREC qrels, by one set of rules (corpus folders and ``ablate.evaluate`` alike).

Accepted lines (blank lines are skipped):

* BEIR: ``query-id<TAB>corpus-id<TAB>score``; the header line ``query-id corpus-id score`` is optional.
* TREC: ``qid iter docid grade`` (the ``iter`` column is ignored).

A file is **tab-separated** when its first non-blank line holds a tab (then ids may contain spaces, and every line
must use tabs), else whitespace-separated. A UTF-8 byte-order mark is ignored. A grade is an integer (``2`` or ``2.0``,
never ``2.5``); grade 0 means *judged non-relevant*, negative grades (some TREC sets mark spam with -1/-2) are judged
and below every relevance level. A (query, id) judged twice with different grades is an error; an exact repeat is
accepted. Every problem raises :class:`~ablate.errors.InputError` naming ``path:line`` and the fix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from ablate.data.types import UNITS, Qrels
from ablate.errors import ConfigError, InputError

HEADER_FIELDS = ("query-id", "query_id", "qid")
FORMATS = "BEIR 'query-id<TAB>corpus-id<TAB>score' or TREC 'qid iter docid grade'"

#: ``check(qid, unit_id, where)`` raises an InputError when a judged id is not in the corpus or query set.
Check = Callable[[str, str, str], None]


def read_text_lines(path: str | Path) -> tuple[list[str], str]:
    """The lines of a UTF-8 text file (a BOM dropped) and the sha256 of its bytes; one-line errors otherwise."""
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
        enc = guess_encoding(data)
        line = data[: e.start].count(b"\n") + 1 if enc != "UTF-16" else 1
        raise InputError(
            f"{p}:{line}",
            f"is not UTF-8 (it looks like {enc})",
            f"re-encode it as UTF-8, e.g. iconv -f {enc} -t UTF-8 {p.name} > {p.stem}.utf8{p.suffix}",
        ) from None
    return text.removeprefix("\ufeff").splitlines(), hashlib.sha256(data).hexdigest()


def guess_encoding(data: bytes) -> str:
    """A best guess at the encoding of bytes that are not UTF-8: UTF-16 (BOM or many NULs), GB18030 (GBK and GB2312
    included) when that decodes, else Latin-1."""
    head = data[:4096]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or head.count(b"\x00") > len(head) // 4:
        return "UTF-16"
    try:
        data.decode("gb18030")
    except UnicodeDecodeError:
        return "LATIN1"
    return "GBK"


#: The grades a label file may hold: 0 = judged non-relevant, 1..MAX_GRADE = relevant (higher is better), negative
#: down to MIN_GRADE = judged junk (TREC's -1/-2), below every relevance level. Outside this range a grade is a
#: mistake (and 2^grade would overflow the nDCG gain).
MIN_GRADE, MAX_GRADE = -2, 10


def parse_grade(s: str, where: str) -> int:
    """An integer grade in ``[MIN_GRADE, MAX_GRADE]`` (``"2"``, ``"2.0"``), else an InputError."""
    try:
        g = int(s)
    except ValueError:
        try:
            f = float(s)
        except ValueError:
            f = float("nan")
        if not (f == f and f not in (float("inf"), float("-inf")) and f == int(f)):
            raise InputError(
                where, f"grade {s!r} is not an integer", "write integer grades (0 = judged non-relevant)"
            ) from None
        g = int(f)
    if not MIN_GRADE <= g <= MAX_GRADE:
        raise InputError(
            where,
            f"grade {g} is outside {MIN_GRADE}..{MAX_GRADE}",
            "use 0 for judged non-relevant, 1, 2, ... for relevant (higher is better), -1/-2 for junk",
        )
    return g


def read_qrels(
    path: str | Path, unit: str = "doc", *, name: str | None = None, check: Check | None = None
) -> Qrels:
    """Read BEIR or TREC qrels at ``unit`` (``doc`` or ``chunk``); ``check`` validates each judged id."""
    if unit not in UNITS:
        raise ConfigError("qrels unit", unit, f"valid options: {', '.join(UNITS)}")
    lines, sha = read_text_lines(path)
    judgements: dict[str, dict[str, int]] = {}
    tabbed: bool | None = None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        if tabbed is None:
            tabbed = "\t" in line
            first = (line.split("\t") if tabbed else line.split())[0].strip().lower()
            if first in HEADER_FIELDS:
                continue
        if tabbed and "\t" not in line:
            raise InputError(
                where, "has no tab, but the file is tab-separated", f"write every line as {FORMATS}"
            )
        fields = [f.strip() for f in line.split("\t")] if tabbed else line.split()
        if len(fields) == 4:
            fields = [fields[0], fields[2], fields[3]]
        if len(fields) != 3 or not fields[0] or not fields[1]:
            raise InputError(
                where, f"expected {FORMATS}, found {len(fields)} fields", "write one judgement per line"
            )
        qid, uid, score = fields
        grade = parse_grade(score, where)
        if check is not None:
            check(qid, uid, where)
        judged = judgements.setdefault(qid, {})
        old = judged.get(uid)
        if old is not None and old != grade:
            raise InputError(
                where, f"({qid}, {uid}) is judged twice with different grades ({old} and {grade})", "keep one"
            )
        judged[uid] = grade
    return Qrels(judgements, unit=unit, name=name or Path(path).name, source_sha256=sha)  # type: ignore[arg-type]
