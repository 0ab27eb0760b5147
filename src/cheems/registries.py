"""A registry per extension point (scorers, ``--metric`` metrics, import formats): name -> entry.

A new entry is one function and one line, the registry's decorator; ``--help``, the error for an
unknown name ("use one of ...") and the docs list the registered names, in registration order.
Each registry lives beside what it registers: :data:`cheems.models.registry.SCORERS`,
:data:`cheems.metrics.metric_registry.METRICS`, :data:`cheems.data.formats.FORMATS` (filled by
:mod:`cheems.data.importers`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from cheems.errors import InputError

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered name: its value (a function, or what a registry's decorator builds) and one line of help."""

    name: str
    value: T
    help: str


class Registry(Generic[T]):
    """Named entries of one ``kind`` (the word errors use), chosen by the option ``option``."""

    def __init__(self, kind: str, option: str) -> None:
        self.kind = kind
        self.option = option
        self._entries: dict[str, Entry[T]] = {}

    def add(self, name: str, value: T, help: str) -> T:
        """Register ``value`` as ``name``; a name registered twice is a programming error."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = Entry(name, value, help)
        return value

    def register(self, name: str, *, help: str) -> Callable[[T], T]:
        """Decorator: register the function as ``name``."""
        return lambda value: self.add(name, value, help)

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test's own entry, or a plugin replacing one)."""
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        """The names, in registration order (as a dict's keys)."""
        return iter(tuple(self._entries))

    def entries(self) -> tuple[Entry[T], ...]:
        return tuple(self._entries.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def hint(self) -> str:
        """``use one of a, b, c``: the hint of every error naming an unknown entry."""
        return f"use one of {', '.join(self._entries)}"

    def get(self, name: str, path: str | None = None) -> T:
        """The entry ``name``; an unknown one is an ``InputError`` at ``path`` (default the option) listing them."""
        if name not in self._entries:
            raise InputError(f"unknown {self.kind} {name!r}", path=path or self.option, hint=self.hint())
        return self._entries[name].value

    def help_text(self, sep: str = ", ", last: str = " or ") -> str:
        """``a (help), b (help) or c (help)``: the names with their help, for ``--help`` and the docs."""
        parts = [f"{e.name} ({e.help})" if e.help else e.name for e in self._entries.values()]
        return sep.join(parts[:-1]) + last + parts[-1] if len(parts) > 1 else "".join(parts)
