"""YAML from files a user controls (a document's front matter and sidecar, ``corpus.yaml``, ``conf/``, a run's
``config.yaml``), read with the limits PyYAML's safe loader lacks.

PyYAML's safe loader builds no objects but still follows anchors and aliases (``&a`` / ``*a``) without a bound:
nine aliases of nine aliases of ... (the "billion laughs") make a front matter of a few hundred bytes a value of
tens of megabytes once written out, and an alias inside the value it names (``&a [*a]``) makes a value that contains itself, which no JSON writer
can write. Here aliases are fine as long as what they repeat stays small: every alias adds the size of the value it
names (one per node plus the characters of its scalars), and the total may not pass ``max_expansion``
(:data:`MAX_EXPANSION` unless the caller says less: front matter and sidecars allow their own size limit). An alias
to a value that contains it, and nesting deeper than Python's stack, are refused as well. Each refusal is a
:class:`YamlLimitError`, a ``yaml.MarkedYAMLError`` naming the line of the alias, so a caller that reports YAML
errors by line reports these too.
"""

from __future__ import annotations

from typing import Any

import yaml

#: The characters (plus one per node) that aliases may repeat in one YAML text: far above any hand-written reuse of
#: an anchor, far below what a reader or a JSON writer would choke on.
MAX_EXPANSION = 1 << 20
_FIX = "write the values out instead of repeating them with anchors and aliases (&name ... *name)"


class YamlLimitError(yaml.MarkedYAMLError):
    """A YAML text past a limit of this module: ``problem`` says which, ``problem_mark`` where, ``fix`` how to
    write it instead."""

    def __init__(self, problem: str, problem_mark: Any, fix: str = _FIX) -> None:
        super().__init__(problem=problem, problem_mark=problem_mark)
        self.fix = fix


def _size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """What a node stands for once its aliases are written out: one per node plus its scalars' characters."""
    got = sizes.get(id(node))
    if got is None:
        if isinstance(node, yaml.ScalarNode):
            got = 1 + len(str(node.value))
        elif isinstance(node, yaml.SequenceNode):
            got = 1 + sum(_size(c, sizes) for c in node.value)
        else:
            got = 1 + sum(_size(k, sizes) + _size(v, sizes) for k, v in node.value)
        sizes[id(node)] = got
    return got


class _Counting:
    """A composer mixin: counts what each alias repeats and refuses past ``max_expansion``."""

    max_expansion = MAX_EXPANSION

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)  # type: ignore[call-arg]
        self._added = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):  # type: ignore[attr-defined]
            event = self.peek_event()  # type: ignore[attr-defined]
            node = self.anchors.get(event.anchor)  # type: ignore[attr-defined]
            if node is not None:
                if not isinstance(node, yaml.ScalarNode) and node.end_mark is None:
                    raise YamlLimitError(
                        f"the alias *{event.anchor} is inside the value it names (a value that contains itself)",
                        event.start_mark,
                    )
                self._added += _size(node, self._sizes)
                if self._added > self.max_expansion:
                    raise YamlLimitError(
                        f"its aliases repeat more than {self.max_expansion:,} characters of values (at "
                        f"*{event.anchor}): an alias bomb",
                        event.start_mark,
                    )
        return super().compose_node(parent, index)  # type: ignore[misc]


class SafeLoader(_Counting, yaml.SafeLoader):
    """``yaml.SafeLoader`` with the alias limit (module docstring)."""


def loader_with(base: type[yaml.SafeLoader], max_expansion: int = MAX_EXPANSION) -> type[yaml.SafeLoader]:
    """A loader class: ``base`` (a ``yaml.SafeLoader`` subclass, e.g. one without the date rule) with the limit."""
    return type(f"Limited{base.__name__}", (_Counting, base), {"max_expansion": max_expansion})


def safe_load(text: str, loader: type[yaml.SafeLoader] = SafeLoader) -> Any:
    """``yaml.safe_load`` with the limits: :class:`YamlLimitError` (a ``yaml.YAMLError``) past one."""
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        raise YamlLimitError(
            "it nests values deeper than Python's stack allows",
            None,
            "write fewer levels of nested lists and mappings",
        ) from None
