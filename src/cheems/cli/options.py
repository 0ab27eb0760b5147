"""The one rule for number options: every float option of every command is checked by :func:`finite`.

``float()`` takes ``nan``, ``inf`` and ``1e400`` (= inf), so ``--margin nan`` or ``--lr inf`` used to
run with a number that means nothing (a NaN margin keeps or drops nothing consistently, a NaN
learning rate trains NaN weights). The check runs when the command line is parsed, before any
file is read, and fails as one ``InputError`` line naming the option.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import typer

from cheems.errors import InputError


def finite(low: float | None = None, high: float | None = None) -> Callable[..., float | None]:
    """An option callback: the value must be a finite number within ``[low, high]`` (each bound optional).

    Use as ``typer.Option(callback=finite())`` on every float option. ``None`` (an optional option
    left out) passes.
    """

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
