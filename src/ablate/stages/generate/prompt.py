"""The prompt a generator sees: a versioned template file, rendered with the question and numbered passages.

A template is a text file with a ``### system`` and a ``### user`` section; the user section holds ``{passages}`` and
``{question}`` (a relevance-judgement template for ``reranker=llm``: ``{passage}`` and ``{question}``). Passages are numbered from 1 in context order (``[1] title — text``), which is what an answer cites.
The file's sha256 is part of the generator's fingerprint (so changing one word regenerates everything) and the file
is attached to every run that used it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ablate.errors import ConfigError, InputError

SECTIONS = ("### system", "### user")


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
