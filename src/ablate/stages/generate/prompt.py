"""The prompt a generator sees: a versioned template file, rendered with the question and numbered passages.

A template is a text file with a ``### system`` and a ``### user`` section; the user section holds ``{passages}`` and
``{question}`` (a relevance-judgement template for ``reranker=llm``: ``{passage}`` and ``{question}``). Passages are
numbered from 1 in context order (``[1] title — text``), which is what an answer cites.
Every ``{name}`` of a template is checked when it is loaded (before any run): a placeholder its kind does not fill
(a typo such as ``{quesiton}``), or any placeholder in the system section (only the user section is filled), would
reach the model as it is written, so it is refused, naming the file, the line and the placeholders the kind knows.
The file's sha256 is part of the generator's fingerprint (so changing one word regenerates everything) and the file
is attached to every run that used it.

``generator.prompt`` is a short name or a path (:func:`choose_prompt`). A name (no ``/``, no ``.txt``) is a shipped
answer template, ``conf/prompts/<name>.txt`` (:func:`answer_templates`: ``strict``, ``grounded``, ...); a path is
used as it is. On a corpus whose language has a template of its own, a name resolves to it: ``grounded`` is
``grounded_zh`` on a Chinese corpus (declared, set or detected: the snapshot's language), the same rule for every
corpus; the source of the choice is logged (``generator.prompt_source``: ``setting`` for a path or a name that
already names a language's template, ``language:<code>`` when the corpus language chose the file).
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ablate.errors import ConfigError, InputError

SECTIONS = ("### system", "### user")
#: The shipped templates: ``conf/prompts/`` of this checkout.
PROMPTS_DIR = Path(__file__).resolve().parents[4] / "conf" / "prompts"
#: The source of a prompt the user named as it runs (a path, or a language's own template by name).
SETTING = "setting"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_LANGUAGE_OWN = re.compile(r".+_[a-z]{2}")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def check_placeholders(path: Path, text: str, fields: Sequence[str]) -> None:
    """Refuse a ``{name}`` of ``text`` (a template file's text) that will not be filled: in the user section one
    that is not among ``fields`` (the kind's placeholders, ``"{question}"`` ...), in the system section any.
    :class:`InputError` at ``path:line`` with the known placeholders and the nearest one."""
    user_at = text.find(SECTIONS[1])
    known = ", ".join(fields)
    for m in _PLACEHOLDER.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m.start() < user_at:
            raise InputError(
                f"{path}:{line}",
                f"{m.group(0)} is in the system section, where no placeholder is filled (it would reach the model "
                "as it is written)",
                f"move it to the '### user' section, whose placeholders are {known}",
            )
        if m.group(0) not in fields:
            close = difflib.get_close_matches(m.group(0), fields, n=1, cutoff=0.8)
            raise InputError(
                f"{path}:{line}",
                f"unknown placeholder {m.group(0)} (it would reach the model as it is written)",
                f"did you mean {close[0]}? (this template's placeholders: {known})"
                if close
                else f"use this template's placeholders: {known}",
            )


def answer_templates() -> list[str]:
    """Names of the shipped answer templates: ``conf/prompts/<name>.txt`` whose text asks for ``{passages}`` (the
    relevance templates of ``reranker=llm`` and the label assessor are not answer templates)."""
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.txt") if "{passages}" in p.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class PromptChoice:
    """The template file that runs, the shipped name it has (``None``: a path) and where the choice came from."""

    path: str
    name: str | None
    source: str


def choose_prompt(value: str, language: str | None = None, setting: str = "generator.prompt") -> PromptChoice:
    """``value`` (a name or a path, module docstring) as the file that runs on a corpus in ``language`` (``None``:
    not bound to a corpus yet, the name's own file). A name no shipped answer template has is a
    :class:`~ablate.errors.ConfigError` listing them (a file of that name in the working folder is used as a path)."""
    if not _NAME.fullmatch(value):
        return PromptChoice(value, None, SETTING)
    names = answer_templates()
    if value not in names:
        if Path(value).is_file():
            return PromptChoice(value, None, SETTING)
        raise ConfigError(
            setting,
            value,
            f"give a shipped answer template ({', '.join(names)}: conf/prompts/<name>.txt) or a template file's path",
        )
    if _LANGUAGE_OWN.fullmatch(value):  # a language's own template, named: it runs whatever the corpus
        return PromptChoice(str(PROMPTS_DIR / f"{value}.txt"), value, SETTING)
    own = f"{value}_{language}" if language else None
    chosen = own if own in names else value
    source = f"language:{language}" if language else SETTING
    return PromptChoice(str(PROMPTS_DIR / f"{chosen}.txt"), chosen, source)


@dataclass(frozen=True)
class PromptTemplate:
    path: str
    system: str
    user: str
    sha256: str

    @classmethod
    def load(
        cls,
        path: str,
        setting: str = "generator.prompt",
        fields: tuple[str, ...] = ("{passages}", "{question}"),
        optional: tuple[str, ...] = (),
    ) -> PromptTemplate:
        """The template file at ``path``: its user section must hold every placeholder of ``fields`` and may hold those
        of ``optional`` (the relevance assessor's ``{reference}``); any other placeholder is refused."""
        p = Path(path).expanduser()
        if not p.is_file():
            raise ConfigError(
                setting, path, "name a prompt template file (conf/prompts/*.txt holds the shipped ones)"
            )
        data = p.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(str(p), "is not UTF-8", "save the template as UTF-8") from None
        if not text.lstrip().startswith(SECTIONS[0]) or SECTIONS[1] not in text:
            raise InputError(
                str(p), "has no '### system' and '### user' sections", "start it with '### system'"
            )
        check_placeholders(p, text, (*fields, *optional))
        system, user = text.lstrip()[len(SECTIONS[0]) :].split(SECTIONS[1], 1)
        for field in fields:
            if field not in user:
                raise InputError(str(p), f"its user section has no {field}", f"put {field} where it belongs")
        return cls(str(p.resolve()), system.strip(), user.strip(), hashlib.sha256(data).hexdigest())

    def render(self, question: str, passages: Sequence[str]) -> list[dict[str, str]]:
        """Chat messages: the system text, then the user text with the numbered passages and the question."""
        numbered = "\n".join(f"[{i}] {text.strip()}" for i, text in enumerate(passages, start=1)) or "(none)"
        user = self.user.replace("{passages}", numbered).replace("{question}", question.strip())
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def render_fields(self, **values: str) -> list[dict[str, str]]:
        """Chat messages with each ``{name}`` of the user section replaced by ``values[name]``."""
        user = self.user
        for name, value in values.items():
            user = user.replace("{" + name + "}", value.strip())
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    @property
    def text(self) -> str:
        return Path(self.path).read_text(encoding="utf-8")
