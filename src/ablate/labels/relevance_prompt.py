"""The relevance prompt an LLM assessor is asked (:mod:`ablate.labels.assessor`): the shipped templates, the one a
corpus gets, and how one (question, passage) pair fills it.

The default, ``conf/prompts/relevance_policy.txt`` (``relevance_policy_zh.txt`` on a Chinese corpus: the corpus
language picks it, as it picks the answer templates), states the grading policy and its four criteria, the way a
human assessor is briefed:

* topicality: the passage is about the question's subject at all;
* fit: it is about exactly the thing asked (the same item, name, number, place, person, role and period), not a
  similar one;
* exactness: it states the answer itself, not only the topic;
* coverage: it states the whole answer, or one part of it when the question asks for several things;

and what each score of the 0-3 scale means under that policy (3 states the answer for exactly the thing asked, 2
gives something needed to reach it, 1 is on the topic but about another thing, 0 is unrelated), so the default
mapping (:func:`ablate.labels.assessor.default_mapping`) puts 3 on "answers directly" and 2 on "helps".

``--prompt`` names another template: a shipped name (``conf/prompts/<name>.txt`` whose name starts with
``relevance``, e.g. ``relevance_umbrela``, the UMBRELA template that was the default before; it resolves to
``<name>_<language>`` when the corpus language has its own, e.g. ``relevance_umbrela_zh``), or a template file's path,
used as it is.

A template's user section holds ``{question}`` and ``{passage}`` and may hold ``{reference}``: the question's reference
answer, the ``answers`` of its line in ``queries.jsonl`` (joined with ``"; "``, cut at :data:`REFERENCE_CHARS`
characters). For a question without one, every line of the user section that holds ``{reference}`` is dropped, so the
model never reads an empty reference, and a template without ``{reference}`` is asked exactly as before.
"""

from __future__ import annotations

import re

from ablate.data.types import Query
from ablate.errors import ConfigError
from ablate.stages.generate.prompt import PROMPTS_DIR, SETTING, PromptChoice, PromptTemplate

#: The shipped template a corpus gets when ``--prompt`` is not given (its language's own when there is one).
DEFAULT = "relevance_policy"
#: Placeholders a relevance template's user section must hold, and the one it may hold.
FIELDS = ("{question}", "{passage}")
OPTIONAL = ("{reference}",)
#: A reference answer longer than this (characters) is cut.
REFERENCE_CHARS = 300
_PREFIX = "relevance"
_FIELD = re.compile(r"\{(question|passage|reference)\}")


def relevance_templates() -> list[str]:
    """Names of the shipped relevance templates: ``conf/prompts/relevance*.txt``."""
    return sorted(p.stem for p in PROMPTS_DIR.glob(f"{_PREFIX}*.txt"))


def choose_template(value: str | None, language: str | None, setting: str = "--prompt") -> PromptChoice:
    """The template file that runs on a corpus in ``language``: ``value`` ``None`` is :data:`DEFAULT`; a shipped
    name resolves to the language's own (``<name>_<language>``) when it exists; a path is used as it is. A name
    that is neither a shipped template nor a file is a one-line :class:`ConfigError` listing the shipped ones."""
    name = DEFAULT if value is None else value
    names = relevance_templates()
    if name not in names:
        if value is not None and ("/" in value or value.endswith(".txt")):
            return PromptChoice(value, None, SETTING)
        raise ConfigError(
            setting,
            value,
            f"give a shipped relevance template ({', '.join(names)}: conf/prompts/<name>.txt) or a template file's path",
        )
    own = f"{name}_{language}" if language else None
    chosen = own if own in names else name
    return PromptChoice(
        str(PROMPTS_DIR / f"{chosen}.txt"), chosen, f"language:{language}" if language else SETTING
    )


def reference_of(query: Query) -> str:
    """The question's reference answer as the assessor reads it: its answers joined with ``"; "`` (``""``: none)."""
    text = "; ".join(" ".join(a.split()) for a in query.answers if a and a.strip())
    return text if len(text) <= REFERENCE_CHARS else text[:REFERENCE_CHARS] + " ..."


def render(
    template: PromptTemplate, question: str, passage: str, reference: str = ""
) -> list[dict[str, str]]:
    """The chat messages for one pair: ``{question}``, ``{passage}`` and ``{reference}`` filled; without a reference,
    the user section's lines holding ``{reference}`` are dropped (module docstring)."""
    user = template.user
    if OPTIONAL[0] in user and not reference.strip():
        user = "\n".join(line for line in user.split("\n") if OPTIONAL[0] not in line)
    values = {"question": question.strip(), "passage": passage.strip(), "reference": reference.strip()}
    filled = _FIELD.sub(lambda m: values[m.group(1)], user)  # one pass: a filled text is never filled again
    return [{"role": "system", "content": template.system}, {"role": "user", "content": filled}]
