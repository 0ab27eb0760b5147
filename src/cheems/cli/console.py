"""What the CLI writes to the terminal and how a command ends: the two consoles (data printed literally,
:mod:`cheems.terminal`), skipped lines and warnings as located lines, user errors as one ``error:`` line,
interrupts as one line and exit code.

Every command module imports from here (never from :mod:`cheems.cli.main`, which imports them).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text

try:  # typer 0.2x carries its own copy of click; older ones use click itself
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as click_errors  # type: ignore[no-redef]  # the same module, elsewhere

from cheems.errors import InputError
from cheems.runtime import is_main_process, leave_process_group
from cheems.terminal import SafeConsole, printable

if TYPE_CHECKING:
    from cheems.evaluate.checks import Check

# Every command prints through these two: data shows as written, control characters escaped, no markup
# read (cheems.terminal); styles are given as Text or style=, never as "[yellow]...[/]" in a string.
console = SafeConsole()
err = SafeConsole(stderr=True)


def labelled(label: str, style: str, message: str) -> Text:
    """``label`` in ``style`` then ``message`` as written: a one-line message made here, the message escaped
    (:func:`~cheems.terminal.printable`) before rich's Text would silently drop some controls (BEL)."""
    return Text.assemble((label, style), printable(message))


def show_warning(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """A warning as one ``warning:`` line on stderr (no file name, no source line)."""
    err.print(labelled("warning: ", "yellow", str(message)), soft_wrap=True)


def report_skipped(skipped: list[InputError]) -> None:
    """List every skipped line on stderr, so nothing is dropped silently."""
    for e in skipped:
        err.print(labelled("skipped ", "yellow", str(e)), soft_wrap=True)
    if skipped:
        err.print(f"{len(skipped)} line(s) skipped", style="yellow")


def report_warnings(warnings: list[InputError]) -> None:
    """List located warnings on stderr: input that was read but not all of which is used."""
    for w in warnings:
        err.print(labelled("warning ", "yellow", str(w)), soft_wrap=True)


def report_checks(checks: Sequence[Check]) -> None:
    """One ``check warning`` line on stderr per check of an evaluation that warns (docs/checks.md)."""
    for c in checks:
        if c.level == "warning":
            err.print(labelled("check warning ", "yellow", c.line()), soft_wrap=True)


def spread_values(params: Sequence[Any], args: list[str]) -> list[str]:
    """``--bench a.jsonl b.jsonl`` as ``--bench a.jsonl --bench b.jsonl``: the words after a repeatable option's
    value are more values of it (as ``--bench F...`` in the README says), for a command that takes no arguments of
    its own (where a word could also be an argument, it stays one: click then names it).

    ``params`` are the command's click parameters; the words of ``args`` are otherwise left as they are.
    """
    if any(p.param_type_name == "argument" for p in params):
        return args
    options = {name: p for p in params if p.param_type_name == "option" for name in (*p.opts, *p.secondary_opts)}
    out: list[str] = []
    repeat: str | None = None  # the repeatable option whose value came last
    words = iter(args)
    for word in words:
        if word == "--":
            out += [word, *words]
            break
        name = word.partition("=")[0] if word.startswith("--") else word
        option = options.get(name) if word.startswith("-") else None
        if option is not None:
            out.append(word)
            takes_value = not option.is_flag and not option.count and "=" not in word
            if takes_value and (value := next(words, None)) is not None:  # none: click says it is missing
                out.append(value)
            repeat = name if option.multiple and (takes_value or "=" in word) else None
        elif repeat is not None and not word.startswith("-"):
            out += [repeat, word]
        else:
            out.append(word)
            repeat = None
    return out


def several_values(command: Any) -> None:
    """Let every command below ``command`` (a click group or command) take several values after one repeatable
    option (:func:`spread_values`)."""
    for sub in getattr(command, "commands", {}).values():
        several_values(sub)
    if not hasattr(command, "commands"):
        parse = command.parse_args
        command.parse_args = lambda ctx, args: parse(ctx, spread_values(command.params, list(args)))


def run(application: Callable[..., object]) -> None:
    """Run a typer app as a command: user errors become one line on stderr and exit code 2, never a traceback.

    Usage errors (an unknown option, ``--seed abc``) are one line too, not click's boxed help.

    SIGINT and SIGTERM stop the run cleanly (temporary files removed, outputs left unchanged) with
    one line saying so, and exit 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM).
    """
    import typer

    from cheems.outputs import Interrupted, interrupted_line, signals_interrupt

    warnings.showwarning = show_warning
    console.quiet = err.quiet = not is_main_process()  # under a launcher rank 0 alone speaks
    command = typer.main.get_command(application)  # type: ignore[arg-type]
    several_values(command)
    with signals_interrupt():
        try:
            code = command.main(standalone_mode=False)  # click's own errors come to us, to print as one line
        except click_errors.NoArgsIsHelpError as e:
            e.show()
            sys.exit(e.exit_code)
        except click_errors.UsageError as e:
            where = e.ctx.command_path if e.ctx else "cheems"
            fix = f"see '{where} --help'"
            if "unexpected extra argument" in e.format_message():  # `--bench a b` where b could be an argument
                fix = f"give an option several files by repeating it (--bench a.jsonl --bench b.jsonl); {fix}"
            err.print(labelled("error: ", "red", f"{where}: {e.format_message()} — {fix}"), soft_wrap=True)
            sys.exit(2)
        except Interrupted as e:
            line = interrupted_line(e.note)  # first: from here on a second Ctrl-C cannot cut the cleanup short
            err.print(Text(line, style="yellow"), soft_wrap=True)
            sys.exit(128 + e.signum)
        except InputError as e:
            err.print(labelled("error: ", "red", str(e)), soft_wrap=True)
            sys.exit(2)
        except OSError as e:
            where = f": {e.filename}" if e.filename else ""
            err.print(labelled("error: ", "red", f"{e.strerror or e}{where}"), soft_wrap=True)
            sys.exit(2)
    if isinstance(code, int) and code:
        sys.exit(code)
    leave_process_group()
