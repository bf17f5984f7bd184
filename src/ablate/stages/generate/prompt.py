"""The prompt a generator sees: a versioned template file, rendered with the question and numbered passages.

A template is a text file with a ``### system`` and a ``### user`` section; the user section holds ``{passages}`` and
``{question}`` (a relevance-judgement template for ``reranker=llm``: ``{passage}`` and ``{question}``). Passages are
numbered from 1 in context order (``[1] title — text``), which is what an answer cites.
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
    ) -> PromptTemplate:
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
