"""The one config layer: the base of every stage's settings model and the pieces its fields are made of.

Every stage's settings (``TrainConfig``, ``JudgeSettings``, ``FilterConfig``, the curate ``Recipe``
and its stages) is a :class:`Settings`: a pydantic model that

- refuses unknown keys and non-finite numbers (a NaN passes every range check);
- holds its own validation: field types, pydantic's constraints, and :func:`rule` / :func:`one_of`
  checks whose messages and hints are cheems' own (any validator reports with :func:`invalid`);
- raises one :class:`~cheems.errors.InputError` naming the key when it is built with a bad value,
  and names file and line as well when :mod:`cheems.yamlfile` reads it from a file;
- says how a field shows on the command line: its ``description`` is the option's help, and a
  :class:`Cli` marker beside it the flag names (:mod:`cheems.cli.options` builds the options).

:data:`Text`, :data:`TextList`, :data:`Whole`, :data:`Number` and :data:`Flag` are field types that
answer a value of the wrong type with ``expected ..., got ...`` (the training config's messages).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WrapValidator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from cheems.errors import InputError
from cheems.yamlfile import located_validation_error

if TYPE_CHECKING:  # the name pydantic keeps private; at run time it is what BaseModel's type is
    from pydantic._internal._model_construction import ModelMetaclass as _ModelType
else:
    _ModelType = type(BaseModel)


class _SettingsType(_ModelType):
    """Calling a settings class with a bad value raises one ``InputError`` naming the key.

    Positional values fill the fields in order, as with the dataclasses the settings once were
    (``JudgeSettings("qwen2.5-72b-instruct", base_url=...)``). Here and not in ``__init__``:
    pydantic builds nested models without calling this, so an error inside a nested model keeps
    its full key path (and line) when the outer model is validated.
    """

    def __call__(cls, /, *values: Any, **data: Any) -> Any:
        names = list(cast(type[BaseModel], cls).model_fields)
        if len(values) > len(names):
            raise TypeError(f"{cls.__name__}() takes at most {len(names)} positional values, got {len(values)}")
        for name, value in zip(names, values):
            if name in data:
                raise TypeError(f"{cls.__name__}() got two values for {name!r}")
            data[name] = value
        try:
            return super().__call__(**data)
        except ValidationError as e:
            raise located_validation_error(e, cls, None, {}) from None


class Settings(BaseModel, metaclass=_SettingsType):
    """The base of every stage's settings: unknown keys and NaN or infinite numbers are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Cli:
    """How a settings field shows on the command line; its ``description`` is the option's help.

    ``names``: a ``--long`` name instead of the one made from the field's name, and short names
    (``-d``); ``flag``: a bool given as a plain ``--x`` (true when given) instead of ``--x/--no-x``;
    ``path``: text that the command line reads, and ``--help`` shows, as a path.
    """

    def __init__(self, *names: str, flag: bool = False, path: bool = False) -> None:
        self.names = names
        self.flag = flag
        self.path = path


class RunSettings(Settings):
    """How a command runs, whatever it computes: the options many commands share."""

    skip_invalid: Annotated[bool, Cli(flag=True)] = Field(
        False, description="Skip bad lines (each one is listed) instead of stopping."
    )
    no_progress: Annotated[bool, Cli(flag=True)] = Field(False, description="No progress bar.")
    verbose: Annotated[bool, Cli("--verbose", "-v", flag=True)] = Field(
        False, description="Show the libraries' own output (load reports, hub and tokenizer warnings, progress bars)."
    )


def invalid(message: str, hint: str | None = None, at: str | tuple[Any, ...] | None = None) -> PydanticCustomError:
    """The error a validator raises: ``message`` as the user reads it, ``hint`` how to fix it, and
    ``at`` the key (or key path, a tuple) below the validated one that is wrong (its line is the one shown)."""
    return PydanticCustomError("cheems", message, {"hint": hint, "at": at})


def rule(ok: Callable[[Any], bool], message: str, hint: str | None = None) -> AfterValidator:
    """A field constraint with cheems' own message: ``{value}`` (or ``{value!r}``) in it is the value."""

    def check(value: Any) -> Any:
        if not ok(value):
            raise invalid(message.format(value=value), hint)
        return value

    return AfterValidator(check)


def one_of(choices: Sequence[str], what: str) -> AfterValidator:
    """The value must be one of ``choices``: ``unknown <what> 'x' — use one of ...`` otherwise."""
    return rule(lambda value: value in choices, f"unknown {what} {{value!r}}", f"use one of {', '.join(choices)}")


def expect(what: str, *refused: type) -> WrapValidator:
    """Answer a value of the wrong type with ``expected <what>, got <value>``.

    pydantic's lax conversions apply otherwise (YAML 1.1 reads ``5e-6`` as text: it is a number
    here); values of the ``refused`` types are wrong even where pydantic would convert them
    (``yes`` is not a number, ``2.5`` not a whole one).
    """

    def check(value: Any, handler: Callable[[Any], Any]) -> Any:
        if type(value) not in refused:
            try:
                return handler(value)
            except ValidationError:
                pass
        raise invalid(f"expected {what}, got {value!r}")

    return WrapValidator(check)


def _path_text(value: Any) -> Any:
    return str(value) if isinstance(value, PurePath) else value


def _as_list(value: Any) -> Any:
    """One text or path is a list of one (``data: train.jsonl``)."""
    if isinstance(value, (str, PurePath)):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise invalid(f"expected a list, got {value!r}")
    return list(value)


Text = Annotated[str, BeforeValidator(_path_text), expect("a string")]
TextList = Annotated[list[Text], BeforeValidator(_as_list)]
Whole = Annotated[int, expect("a whole number", bool, float)]
Number = Annotated[float, expect("a finite number", bool)]
Flag = Annotated[bool, expect("true or false", int, float)]


def merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """The layers' keys, a later layer winning; a mapping over a mapping merges key by key
    (a file's ``lora: {r: 4}`` and the command line's ``--lora`` give ``{r: 4, enabled: true}``)."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            below = out.get(key)
            out[key] = merged(below, value) if isinstance(below, Mapping) and isinstance(value, Mapping) else value
    return out


# ---------------------------------------------------------------- settings from command-line values
# (cheems.cli.options makes the options; what they give is merged and validated here, typer-free)
M = TypeVar("M", bound=BaseModel)


def field_info(model: type[BaseModel], name: str) -> FieldInfo:
    """The field ``name`` of ``model``; a dotted name is a field of a nested settings model (``lora.enabled``)."""
    head, _, rest = name.partition(".")
    info = model.model_fields[head]
    if not rest:
        return info
    nested = next(
        a for a in (info.annotation, *get_args(info.annotation)) if isinstance(a, type) and issubclass(a, BaseModel)
    )
    return field_info(nested, rest)


def cli_marker(info: FieldInfo) -> Cli:
    """The field's :class:`Cli` marker (an empty one when it has none)."""
    return next((m for m in info.metadata if isinstance(m, Cli)), Cli())


def option_name(model: type[BaseModel], name: str) -> str:
    """The ``--long`` name of the option for setting ``name``: from its :class:`Cli` marker, else its name with
    ``-`` for ``_`` (``max_length`` -> ``--max-length``); a one-letter setting marked ``Cli("-n")`` is ``-n`` alone."""
    names = cli_marker(field_info(model, name)).names
    long = [n for n in names if n.startswith("--")]
    leaf = name.rpartition(".")[2].replace("_", "-")
    if long:
        return long[0]
    return f"-{leaf}" if f"-{leaf}" in names else f"--{leaf}"  # a one-letter setting (bon's -n): its short name


Models = type[BaseModel] | tuple[type[BaseModel], ...]


def owner(models: Models, name: str) -> type[BaseModel]:
    """The first of ``models`` (one model, or several a command composes) with the setting ``name``."""
    if not isinstance(models, tuple):
        return models
    return next(m for m in models if name.partition(".")[0] in m.model_fields)


def settings_of(model: type[M], given: Mapping[str, Any]) -> M:
    """``model`` from those of the settings ``given`` that are its fields (a command composing several
    settings models hands each its own); a bad value is one line naming its option."""
    return from_options(model, {k: v for k, v in given.items() if k in model.model_fields})


def given_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides the options make: setting name -> value for those given (None: not given);
    a dotted name goes into its nested mapping (``lora.enabled`` -> ``{"lora": {"enabled": ...}}``)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        *parents, leaf = name.split(".")
        target = out
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value
    return out


def from_options(model: type[M], given: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> M:
    """``model`` from ``base`` (e.g. a config file's values, checked where they were read) with the
    settings ``given`` on the command line over it; a bad option value is one ``InputError`` that
    names the option (and the setting)."""
    try:
        return model.model_validate(merged(base or {}, given))
    except ValidationError as e:
        error = located_validation_error(e, model, None, {})
    loc = error.field.split(".") if error.field else []
    keys = next((loc[:n] for n in range(len(loc), 0, -1) if _has(given, loc[:n])), None)
    option = option_name(model, ".".join(keys)) if keys else None
    raise InputError(error.message, path=option, field=error.field, hint=error.hint)


def _has(values: Mapping[str, Any], keys: list[str]) -> bool:
    """Whether the nested ``values`` hold a value at ``keys``."""
    for key in keys[:-1]:
        values = values.get(key)  # type: ignore[assignment]
        if not isinstance(values, Mapping):
            return False
    return keys[-1] in values
