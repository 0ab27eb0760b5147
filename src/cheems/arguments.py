"""The public API's arguments checked against their type hints, once, at the call (:func:`checked`).

A wrong type given to a public function would otherwise fail far from the call: a str where a list of
paths goes is iterated character by character (``load_bench('open.jsonl')`` reads ``o``, ``p``, ...),
a dict where a record goes raises an ``AttributeError`` nine frames down. :func:`checked` reads the
function's annotations and raises :class:`ArgumentTypeError` naming the argument, what it must be
and what it got, before the body runs. A ``str`` or ``os.PathLike`` given where a ``Path`` goes is
made a ``Path`` (what the body would have done itself).

What is checked: plain classes (``isinstance``; ``int`` is not a ``bool``, a ``float`` may be an
``int``), ``None``, unions, ``Literal``, callables, and containers: ``list``/``Sequence``/``Iterable``
never accept a ``str``, ``bytes`` or mapping, and the items of a list or tuple given for them are
checked too (a generator is left unread); ``Mapping``/``dict`` check their keys and values. A class
the module imports only for type checking is checked by its name. Anything else (a ``TypeVar``,
``Any``) is not checked.
"""

from __future__ import annotations

import builtins
import collections.abc as abc
import functools
import inspect
import os
import types
import typing
from pathlib import Path
from typing import Any, Callable, TypeVar

from cheems.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])
_UNCHECKED = object()  # an annotation this module does not check


class ArgumentTypeError(InputError, TypeError):
    """A public function got an argument of the wrong type: an ``InputError`` (one line, the argument named as
    its field) that is also a ``TypeError``, so ``except TypeError`` catches it as Python's own would."""


def _name(hint: Any) -> str:
    """How the type is said in the message: ``list of str | Path``, ``Record``, ``None``."""
    if hint is type(None):
        return "None"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(origin):
        return " | ".join(_name(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (list, abc.Sequence, abc.Iterable, abc.Iterator, abc.Collection, tuple, set, frozenset):
        what = {list: "a list", tuple: "a tuple", set: "a set", frozenset: "a set"}.get(origin, "a list")
        return f"{what} of {_name(args[0])}" if args and args[0] is not Ellipsis else what
    if origin in (dict, abc.Mapping):
        return f"a mapping of {_name(args[0])} to {_name(args[1])}" if args else "a mapping"
    if origin is abc.Callable:
        return "a callable"
    return getattr(hint, "__name__", str(hint))


def _is_union(origin: Any) -> bool:
    return origin is typing.Union or origin is types.UnionType


def _ok(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits ``hint``; annotations not understood here fit anything."""
    if hint is Any or hint is _UNCHECKED or isinstance(hint, TypeVar) or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(origin):
        return any(_ok(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if origin is typing.Annotated:
        return _ok(value, args[0])
    if origin is abc.Callable or hint is abc.Callable:
        return callable(value)
    if origin in (list, tuple, set, frozenset, abc.Sequence, abc.Iterable, abc.Iterator, abc.Collection):
        return _ok_items(value, origin, args)
    if origin in (dict, abc.Mapping):
        if not isinstance(value, abc.Mapping):
            return False
        return not args or all(_ok(k, args[0]) and _ok(v, args[1]) for k, v in value.items())
    if isinstance(hint, type):
        if issubclass(hint, _ByName):
            return any(c.__name__ == hint.__name__ for c in type(value).__mro__)
        if hint is float:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if hint is int:
            return isinstance(value, int) and not isinstance(value, bool)
        if issubclass(hint, Path):
            return isinstance(value, (str, os.PathLike))  # made a Path at the call
        if getattr(hint, "_is_protocol", False) and not getattr(hint, "_is_runtime_protocol", False):
            return True  # a Protocol isinstance cannot check: checked by use
        return isinstance(value, hint)
    if origin is not None and isinstance(origin, type):  # a generic class: ChatRun[X]
        return isinstance(value, origin)
    return True


def _ok_items(value: Any, origin: Any, args: tuple[Any, ...]) -> bool:
    """A container of items: never a str, bytes or mapping (iterating one gives characters or keys)."""
    if isinstance(value, (str, bytes, abc.Mapping)):
        return False
    concrete = {list: list, tuple: tuple, set: (set, frozenset), frozenset: (set, frozenset)}.get(origin)
    if concrete is not None and not isinstance(value, concrete):  # type: ignore[arg-type]
        return False
    if origin is abc.Sequence and not isinstance(value, abc.Sequence):
        return False
    if origin is abc.Iterator and not isinstance(value, abc.Iterator):
        return False
    if not isinstance(value, abc.Iterable):
        return False
    if not isinstance(value, (list, tuple, set, frozenset)) or not args:
        return True  # a generator is read by the body, not here
    if origin is tuple and args[-1] is not Ellipsis:  # tuple[A, B]: one type per place
        return len(args) == len(value) and all(_ok(v, a) for v, a in zip(value, args))
    return all(_ok(v, args[0]) for v in value)


class _ByName:
    """Stands for a class the function's module imports only for type checking (to keep its imports light): a
    value fits when its class, or a class it derives from, has that name."""

    def __class_getitem__(cls, item: Any) -> Any:
        return cls  # ChatRun[X]: the class alone is checked


class _Names(dict[str, Any]):
    """The names an annotation is evaluated in: the module's, the builtins, and for any other a :class:`_ByName`."""

    def __init__(self, module: dict[str, Any]) -> None:
        super().__init__()
        self.module = module

    def __missing__(self, key: str) -> Any:
        if key in self.module:
            return self.module[key]
        if hasattr(builtins, key):
            return getattr(builtins, key)
        return type(key, (_ByName,), {})


def _hint_of(fn: Callable[..., Any], annotation: Any) -> Any:
    """The parameter's annotation, evaluated in the function's module (``from __future__ import annotations``
    keeps it a string); unchecked when it cannot be evaluated."""
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, {"__builtins__": builtins}, _Names(fn.__globals__))  # the module's own annotation
    except Exception:  # e.g. a construct of a newer Python: left to the body
        return _UNCHECKED


def _is_path_hint(hint: Any) -> bool:
    """``Path`` or ``Path | None``: a str given there is made a Path."""
    if isinstance(hint, type) and issubclass(hint, Path):
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    return _is_union(origin) and any(isinstance(a, type) and issubclass(a, Path) for a in args) and str not in args


def _as_paths(value: Any, hint: Any) -> Any:
    """``value`` with a str made a ``Path`` where ``hint`` wants a ``Path``, and in a list of paths each item."""
    if value is None:
        return value
    if _is_path_hint(hint):
        return Path(value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(origin):
        fits = [a for a in args if a is not type(None) and _ok(value, a)]
        return _as_paths(value, fits[0]) if len(fits) == 1 else value
    if origin in (list, abc.Sequence, abc.Iterable, abc.Collection) and args and isinstance(value, (list, tuple)):
        return type(value)(_as_paths(v, args[0]) for v in value) if _is_path_hint(args[0]) else value
    return value


def _what(value: Any) -> str:
    kind = type(value).__name__
    if isinstance(value, (str, bytes)):
        shown = repr(value) if len(value) <= 40 else repr(value[:37]) + "..."
        return f"{kind} {shown}"
    if isinstance(value, (list, tuple)) and value:
        return f"{kind} holding {type(value[0]).__name__}"
    return kind


def _hint(value: Any, hint: Any) -> str:
    """How to fix the commonest mistakes."""
    origin = typing.get_origin(hint)
    containers = (list, tuple, abc.Sequence, abc.Iterable, abc.Collection)
    members = typing.get_args(hint) if _is_union(origin) else (hint,)
    wants_items = any(typing.get_origin(a) in containers for a in members)
    if isinstance(value, (str, os.PathLike)) and wants_items:
        return f"wrap one file in a list: [{str(value)!r}]"
    if isinstance(value, dict) or (isinstance(value, (list, tuple)) and value and isinstance(value[0], dict)):
        return "build the object from the dict first (e.g. cheems.Record.model_validate(row))"
    return "see the function's docstring (help(cheems.NAME))"


def checked(fn: F, name: str | None = None) -> F:
    """Check the arguments of a public function against its annotations at each call (see the module's docstring).

    The annotations are read at the first call (the module is loaded by then); a wrong argument raises
    :class:`ArgumentTypeError` with the function (as ``cheems.NAME``: ``name``, else its own) and the argument
    named, before the body runs.
    """
    public = name or fn.__name__
    signature = inspect.signature(fn)
    hints: dict[str, Any] = {}

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not hints:  # the first call: every annotation can be evaluated now
            hints.update({n: _hint_of(fn, p.annotation) for n, p in signature.parameters.items()})
        try:  # partial: a wrong value is named even when another argument is missing
            bound = signature.bind_partial(*args, **kwargs)
        except TypeError as e:  # an unknown argument: Python's own message, said for this function
            raise TypeError(f"{public}(): {e}") from None
        for arg, value in bound.arguments.items():
            parameter, hint = signature.parameters[arg], hints[arg]
            if parameter.annotation is inspect.Parameter.empty or parameter.kind is parameter.VAR_KEYWORD:
                continue  # **settings: the settings model checks each one
            for one in value if parameter.kind is parameter.VAR_POSITIONAL else (value,):
                if not _ok(one, hint):
                    raise ArgumentTypeError(
                        f"argument '{arg}' of {public}() must be {_name(hint)}, not {_what(one)}",
                        hint=_hint(one, hint).replace("NAME", public),
                    )
            if parameter.kind is not parameter.VAR_POSITIONAL:
                bound.arguments[arg] = _as_paths(value, hint)
        try:
            signature.bind(*bound.args, **bound.kwargs)
        except TypeError as e:  # a missing argument
            raise TypeError(f"{public}(): {e}") from None
        return fn(*bound.args, **bound.kwargs)

    call.__checked__ = True  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]
