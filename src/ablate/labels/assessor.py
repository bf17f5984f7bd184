"""The LLM assessor: a generator asked, for one (question, passage) pair, how relevant the passage is.

The prompt is a versioned template (:mod:`ablate.labels.relevance_prompt`: a ``### system`` and a ``### user``
section with ``{question}``, ``{passage}`` and, optionally, the question's reference answer ``{reference}``). It asks
for a score on the 0-3 scale of UMBRELA (Upadhyay et al. 2024, the open-source reproduction of the Bing relevance
assessor of Thomas et al. 2024)::

    3  the passage is dedicated to the query and contains the exact answer
    2  it has some answer, but unclear or hidden among extraneous information
    1  it seems related to the query but does not answer it
    0  it has nothing to do with the query

the default template (``conf/prompts/relevance_policy.txt``, its Chinese twin on a Chinese corpus) with a stated
grading policy (topicality, fit, exactness, coverage) and each score's meaning under it, ``relevance_umbrela`` as
UMBRELA published it. The model ends with ``##final score: N`` (:func:`parse_score`; an output without one is no
judgement, never a guessed grade). The score is mapped onto the corpus's grade legend by a mapping (``--map 3:2,2:1,1:0,0:0``,
:func:`parse_mapping`); the default (:func:`default_mapping`) puts the top of the scale on the legend's top grade and
counts "related but does not answer" as not relevant, as TREC DL's binary labels count its 0-3 grades (relevant from
2). On a 2/1/0 legend (2 answers directly, 1 helps, 0 not relevant): 3->2, 2->1, 1->0, 0->0.

A judgement is a generation of the generator stage (:mod:`ablate.stages.generate`), so it is cached like one: by the
model's identity (a GGUF's full sha256, the llama.cpp build), the decoding parameters, the template's sha256 and the
rendered messages, i.e. the pair's texts. The assessor's name in the journal, ``llm:<model>@<sha12>+<template8>+
<setup6>``, holds the model's identity, the template's and (``setup``) everything else that can change a grade: the
decoding parameters, library and code versions, the passage cut and the mapping, and the number of repeats when
there are several. Judgements by another model, template or mapping are another assessor's.

**Repeats** (``judge --repeats R``, R > 1): the generator is asked R times per pair with sampling on (a temperature
above 0) and its own seed per repeat (repeat ``r`` uses ``generator.seed + r``, each cached under its own index, so
the outputs differ where the model is unsure); each repeat's grade is kept (:attr:`Verdict.repeats`) and the
verdict's grade is their majority, a tie going to the lower grade (:mod:`ablate.labels.repeats`). With R = 1 a
verdict is one greedy generation, as it always was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablate.cache import Cache, key_of
from ablate.data.snapshot import Snapshot
from ablate.errors import ConfigError
from ablate.labels.relevance_prompt import FIELDS, OPTIONAL, reference_of, render
from ablate.labels.repeats import majority
from ablate.progress import Progress
from ablate.stages.base import StageContext
from ablate.stages.generate.base import GeneratorBase
from ablate.stages.generate.prompt import PromptTemplate

#: The assessor's scale, highest first, each score as the shipped templates mean it (the policy template's words;
#: UMBRELA's differ in wording, not in order): what the mapping's description prints.
SCALE: tuple[tuple[int, str], ...] = (
    (3, "states the answer for exactly the thing asked"),
    (2, "does not state it, gives something toward it"),
    (1, "on the topic but does not answer it"),
    (0, "nothing to do with the question"),
)
SCORES = tuple(s for s, _ in SCALE)
#: A passage longer than this (characters) is cut: a whole document must still fit the model's context window.
PASSAGE_CHARS = 2000
#: Tokens the assessor may write: the score line, and a short reason where a model adds one.
MAX_TOKENS = 48
#: Bump when how a judgement is asked or read changes (part of the assessor's identity).
CODE_VERSION = "ablate-assessor/1"

_FINAL = re.compile(r"final\s*score\s*(?:\(\s*o\s*\))?\s*[:：=]?\s*[*\s]*(-?\d+)", re.IGNORECASE)
_BARE = re.compile(r"[*\s#]*(-?\d+)[.\s*]*")


def parse_score(text: str) -> int | None:
    """The 0-3 score of an assessor's output: the number after its last ``final score`` (``##final score: 2``,
    ``Final score: **3**``), or the whole output when it is one bare number; ``None`` when there is neither or the
    number is off the scale (never a guess)."""
    found = _FINAL.findall(text or "")
    if found:
        value = int(found[-1])
    else:
        m = _BARE.fullmatch(text or "")
        if not m:
            return None
        value = int(m.group(1))
    return value if value in SCORES else None


# ---------------------------------------------------------------------------------------------------- the mapping
def default_mapping(grades: Sequence[int]) -> dict[int, int]:
    """The default from the 0-3 scale to a legend's ``grades``: 3 -> the top grade; on a legend of three grades or
    more, 2 -> the next one down; on a binary legend 2 -> the top grade too (TREC DL: relevant from 2); 1 -> the
    third grade from the top on a legend of four or more, else 0; 0 -> 0."""
    g = sorted(set(grades), reverse=True)
    if len(g) >= 4:
        return {3: g[0], 2: g[1], 1: g[2], 0: 0}
    if len(g) == 3:
        return {3: g[0], 2: g[1], 1: 0, 0: 0}
    return {3: g[0], 2: g[0], 1: 0, 0: 0}


def mapping_text(mapping: Mapping[int, int]) -> str:
    """``3:2,2:1,1:0,0:0`` (the form ``--map`` takes)."""
    return ",".join(f"{s}:{mapping[s]}" for s in SCORES)


def parse_mapping(text: str | None, grades: Sequence[int], key: str = "--map") -> dict[int, int]:
    """``--map 3:2,2:1,1:0,0:0``: each score of the 0-3 scale once, each to a grade of the legend ``grades``
    (``None``: :func:`default_mapping`). A malformed mapping is a one-line :class:`ConfigError`."""
    if text is None:
        return default_mapping(grades)
    legend = ", ".join(str(g) for g in sorted(grades, reverse=True))
    fix = f"give each score 3,2,1,0 once as SCORE:GRADE, grades from the legend ({legend}), e.g. {mapping_text(default_mapping(grades))}"
    out: dict[int, int] = {}
    for part in str(text).split(","):
        score, sep, grade = part.strip().partition(":")
        try:
            s, g = int(score), int(grade)
        except ValueError:
            raise ConfigError(key, text, f"{part.strip()!r} is not SCORE:GRADE; {fix}") from None
        if not sep or s not in SCORES:
            raise ConfigError(key, text, f"score {score.strip()!r} is not on the 0-3 scale; {fix}")
        if s in out:
            raise ConfigError(key, text, f"score {s} is mapped twice; {fix}")
        if g not in grades:
            raise ConfigError(key, text, f"grade {g} is not in the corpus's grade legend; {fix}")
        out[s] = g
    missing = [s for s in SCORES if s not in out]
    if missing:
        raise ConfigError(key, text, f"score(s) {', '.join(map(str, missing))} not mapped; {fix}")
    if any(out[a] < out[b] for a, b in zip(SCORES, SCORES[1:], strict=False)):
        raise ConfigError(key, text, f"a higher score is mapped to a lower grade; {fix}")
    return out


# ---------------------------------------------------------------------------------------------------- the assessor
@dataclass
class Assessor:
    """A generator set up to judge relevance: its template, the mapping, and its name (``identity``)."""

    generator: GeneratorBase
    template: PromptTemplate
    mapping: dict[int, int]
    identity: str
    details: dict[str, Any] = field(default_factory=dict)

    def messages(self, question: str, passage: str, reference: str = "") -> list[dict[str, str]]:
        return render(self.template, question, passage, reference)


def _model_name(generator: GeneratorBase) -> str:
    model = str(getattr(generator, "model", "") or type(generator).__name__)
    name = Path(model).name
    return name[: -len(".gguf")] if name.endswith(".gguf") else name


def make_assessor(generator: GeneratorBase, template_path: str, mapping: Mapping[int, int]) -> Assessor:
    """``generator`` (built from the composed config) asking the relevance template at ``template_path``; its
    decoding parameters are the generator's (the caller sets them)."""
    template = PromptTemplate.load(template_path, "--prompt", fields=FIELDS, optional=OPTIONAL)
    generator.use_template(template)  # the generator's cache key follows the template's sha256
    model_id = generator.model_identity()
    sha = str(model_id.get("gguf_sha256") or key_of(model_id))
    repeats = int(getattr(generator, "repeats", 1) or 1)
    several = (repeats,) if repeats > 1 else ()  # one repeat: the identity it always had
    setup = key_of(
        CODE_VERSION, generator.generation_identity(), PASSAGE_CHARS, mapping_text(mapping), *several
    )
    identity = f"llm:{_model_name(generator)}@{sha[:12]}+{template.sha256[:8]}+{setup[:6]}"
    params = {k: v for k, v in generator.params().items() if not k.startswith("price_")}
    details = {
        "model": _model_name(generator),
        "model_identity": model_id,
        "template": template.path,
        "template_sha256": template.sha256,
        "params": params,
        "code_version": CODE_VERSION,
        "passage_chars": PASSAGE_CHARS,
        "mapping": mapping_text(mapping),
    }
    if several:
        details["repeats"] = repeats
    return Assessor(generator, template, dict(mapping), identity, details)


def passage_of(snapshot: Snapshot, unit: str) -> str:
    """The text a judge reads for ``unit``: a chunk's text (it starts with its document's title), or a document's
    title and text; cut to :data:`PASSAGE_CHARS` characters."""
    if snapshot.qrels_unit == "doc":
        doc = snapshot.documents[unit]
        text = f"{doc.title} — {doc.text}" if doc.title else doc.text
    else:
        text = snapshot.chunk_text[unit]
    text = " ".join(text.split())
    return text if len(text) <= PASSAGE_CHARS else text[:PASSAGE_CHARS] + " ..."


@dataclass(frozen=True)
class Verdict:
    """One pair judged: the model's 0-3 ``score`` (``None``: unparseable), the mapped ``grade``, what it wrote, the
    time the generation took (when it was made, also for a cached one) and whether it came from the cache. Asked
    several times: ``repeats`` holds each repeat's grade, ``grade`` is their majority, ``score`` the first parsed
    repeat's whose grade is the majority, ``output`` every repeat's output, ``latency_s`` their sum."""

    qid: str
    unit: str
    score: int | None
    grade: int | None
    output: str
    latency_s: float
    cached: bool
    repeats: tuple[int | None, ...] = ()


def verdict(
    qid: str, unit: str, texts: Sequence[str], latency_s: float, cached: bool, mapping: Mapping[int, int]
) -> Verdict:
    """The verdict of one pair from its generations ``texts`` (one per repeat)."""
    scores = [parse_score(t) for t in texts]
    grades = tuple(None if s is None else mapping[s] for s in scores)
    if len(texts) == 1:
        return Verdict(qid, unit, scores[0], grades[0], texts[0], latency_s, cached)
    grade = majority(grades)
    score = next((s for s, g in zip(scores, grades, strict=True) if g is not None and g == grade), None)
    output = "\n".join(f"[repeat {r}] {t}" for r, t in enumerate(texts))
    return Verdict(qid, unit, score, grade, output, latency_s, cached, grades)


def judge_pairs(
    assessor: Assessor,
    snapshot: Snapshot,
    pairs: Sequence[tuple[str, str]],
    cache: Cache,
    done: Callable[[Verdict], None] | None = None,
    label: str = "judge",
    show_progress: bool = True,
) -> list[Verdict]:
    """Judge each (qid, unit) of ``pairs`` in order, one generation at a time (cached by content), calling
    ``done(verdict)`` as each is made (the journal is appended there, so an interrupted run keeps what it did);
    progress with an ETA on stderr."""
    gen = assessor.generator
    gen.prepare(StageContext(snapshot, cache, False))
    out: list[Verdict] = []
    with Progress(label, len(pairs), unit="pairs", enabled=show_progress) as progress:
        for qid, unit in pairs:
            query = snapshot.queries[qid]
            messages = assessor.messages(query.text, passage_of(snapshot, unit), reference_of(query))
            gens = gen.generate([messages], cache)[0]  # one per repeat (generator.repeats)
            latency = sum(g.latency_s for g in gens)
            v = verdict(
                qid, unit, [g.text for g in gens], latency, all(g.cached for g in gens), assessor.mapping
            )
            out.append(v)
            if done is not None:
                done(v)
            progress.update(1)
    return out


def time_per_judgement(verdicts: Iterable[Verdict]) -> float | None:
    """Mean seconds a judgement took to generate (cached ones count with the time they took when made)."""
    times = [v.latency_s for v in verdicts if v.latency_s == v.latency_s]
    return sum(times) / len(times) if times else None
