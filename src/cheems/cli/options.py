"""Command-line options: settings fields as options (as TRL's ``TrlParser``), and the rule for numbers.

A command lists the fields of its settings models it exposes with :func:`settings_options`: each is an
option named from the field (or its :class:`~cheems.settings.Cli` marker), with its ``description`` as help.
The command gets the options given as overrides and builds its settings with :func:`cheems.settings.settings_of`
or :func:`~cheems.settings.from_options` (over a config file). A new setting is one field and its name here.

Every float option is checked by :func:`finite` as the command line is parsed (``float()`` takes ``nan``, ``inf``
and ``1e400``, which mean nothing as a margin or a learning rate): one ``InputError`` line naming the option.
"""

from __future__ import annotations

import functools
import inspect
import math
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import annotated_types
import typer

from cheems.errors import InputError
from cheems.settings import (
    Models,
    RunSettings,
    Settings,
    cli_marker,
    field_info,
    from_options,
    given_settings,
    option_name,
    owner,
)

# How hard to try with a server: fields of cheems.llm.endpoint.ConnectionSettings, the judge's options
# (score, eval and bon use them for an RM server, vllm: or openrlhf:).
CONNECTION_OPTIONS = ("concurrency", "timeout", "max_retries", "max_consecutive_failures", "give_up_after")
Workers = Annotated[
    Optional[int],
    typer.Option(
        "--workers",
        min=1,
        help="Processes for reading and checking records (default: $CHEEMS_WORKERS or every core; 1: this process). "
        "The output is the same for any number.",
    ),
]


def finite(low: float | None = None, high: float | None = None) -> Callable[..., float | None]:
    """An option callback: the value must be a finite number within ``[low, high]`` (each bound optional;
    ``None``, an option left out, passes)."""

    def check(param: typer.CallbackParam, value: float | None) -> float | None:
        if value is None:
            return None
        option = max(param.opts, key=len) if param.opts else param.name or "option"
        if not math.isfinite(value):
            raise InputError(
                f"must be a finite number, got {value}",
                path=option,
                hint="NaN and infinity mean nothing here; give a number such as 0.5",
            )
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                bounds = f"between {low:g} and {high:g}"
            else:
                bounds = f"at least {low:g}" if low is not None else f"at most {high:g}"
            raise InputError(f"must be {bounds}, got {value:g}", path=option, hint=f"give a number {bounds}")
        return value

    return check


# ---------------------------------------------------------------------- settings as options
def _cli_type(annotation: Any, path: bool) -> Any:
    """The type typer parses (and ``--help`` shows) for a field: ``X | None`` is ``X``, a union with a
    path or a bool is that (``str | Path``, ``bool | "auto"``), ``list[X]`` a repeatable option."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _cli_type(typing.get_args(annotation)[0], path)
    if origin is list:
        return list[_cli_type(typing.get_args(annotation)[0], path)]  # type: ignore[misc]
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        chosen = next((t for t in (Path, bool) if t in args), args[0] if len(args) == 1 else None)
        if chosen is None:
            raise TypeError(f"no command-line type for {annotation}")
        return _cli_type(chosen, path)
    return Path if path and annotation is str else annotation


def setting_option(model: Models, name: str, show_default: bool = False) -> inspect.Parameter:
    """The typer option for setting ``name`` of ``model``, as a parameter of a command's signature.

    The help is the field's ``description``; the type comes from its annotation (a float is
    checked by :func:`finite`, within its ``ge`` / ``le`` bounds; a list is repeatable); a bool is
    ``--x/--no-x`` unless its :class:`Cli` marker says ``flag``. The option's default is None (not
    given), or the field's default with ``show_default`` (a command without a config file shows it in ``--help``).
    """
    model = owner(model, name)
    info = field_info(model, name)
    cli = cli_marker(info)
    kind = _cli_type(info.annotation, cli.path)
    long = option_name(model, name)
    decls = [f"{long}/--no-{long[2:]}" if kind is bool and not cli.flag else long]
    decls += [n for n in cli.names if not n.startswith("--") and n != long]
    # a float's bounds (``Field(ge=, le=)``) are checked as the command line is parsed, naming the option
    low = next((typing.cast(float, m.ge) for m in info.metadata if isinstance(m, annotated_types.Ge)), None)
    high = next((typing.cast(float, m.le) for m in info.metadata if isinstance(m, annotated_types.Le)), None)
    option = typer.Option(*decls, help=info.description, callback=finite(low, high) if kind is float else None)
    default = info.get_default(call_default_factory=True) if show_default and not info.is_required() else None
    return inspect.Parameter(
        _py(name),
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[Optional[kind], option],
    )


def shared_option(name: str) -> Any:
    """The parameter type of an option many commands share: the :class:`~cheems.settings.RunSettings` field ``name``."""
    return setting_option(RunSettings, name).annotation


def settings_options(
    model: Models, *order: str, show_defaults: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the options for some settings of ``model`` (or of a tuple of models it composes: a name
    is the first one's with that field).

    ``order`` lists the options as ``--help`` shows them: field names (dotted for a nested one) mixed with the
    command's own parameters (``config``); those not listed (arguments such as IN) come first. The command
    receives the settings given as ``settings`` (:func:`~cheems.settings.given_settings`).
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(command, eval_str=True).parameters
        settings = {_py(n): n for n in order if n not in own}  # parameter name -> setting name
        listed = [_py(n) for n in order]
        params = [p for n, p in own.items() if n not in listed and n != "settings"]
        params += [setting_option(model, settings[n], show_defaults) if n in settings else own[n] for n in listed]
        # keyword-only: an option with a default may come before an argument without one
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]

        @functools.wraps(command)
        def with_settings(**values: Any) -> Any:
            given = given_settings({settings[n]: values.pop(n) for n in list(values) if n in settings})
            return command(**values, settings=given)

        with_settings.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # typer reads it
        # the settings behind its options, for the test that each has a description shown in --help
        with_settings.settings_fields = [(owner(model, n), n) for n in settings.values()]  # type: ignore[attr-defined]
        with_settings.__annotations__ = {p.name: p.annotation for p in params}
        return with_settings

    return decorate


def _py(name: str) -> str:
    """A setting's name as a Python parameter name (``lora.enabled`` -> ``lora__enabled``)."""
    return name.replace(".", "__")


# options many commands share, declared once
SkipInvalid = shared_option("skip_invalid")
NoProgress = shared_option("no_progress")
Verbose = shared_option("verbose")


# ---------------------------------------------------------------------- the training commands
S = TypeVar("S", bound=Settings)
ConfigFile = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="YAML config; command-line options override it.")
]
"""A trainer's ``--config``: its settings as YAML (``train_config.yaml`` of a run), under the options."""


def run_settings(
    cls: type[S],
    load: Callable[[Path | None, dict[str, Any]], S],
    config: Path | None,
    settings: dict[str, Any],
    no_progress: bool,
) -> S:
    """A trainer command's settings ``cls``: ``load(config, options)`` (the file under the options, ``--no-progress``
    included); when they are wrong, an option's bad value is the error, naming the option, before the merged one."""
    try:
        return load(config, settings | ({"progress": False} if no_progress else {}))
    except InputError:
        from_options(cls, settings)  # a bad option value is an error naming the option
        raise


def command_main(name: str, command: Callable[..., Any]) -> None:
    """``python -m cheems.cli.<module>`` (e.g. under ``accelerate launch``): the command ``name`` alone, with the
    CLI's one-line errors and clean interrupts."""
    from cheems.cli.console import run

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(name)(command)
    run(app)
