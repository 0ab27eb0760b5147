"""The one error type users see: where the bad input is, what is wrong, how to fix it."""

from __future__ import annotations

from collections.abc import Callable


class InputError(Exception):
    """Bad user input, reported as one line: ``file:line: field: what is wrong — how to fix``.

    The place (``path``) is a file, or the option the bad value came from (``path="--gold"``).
    Without one the line starts with what is wrong: a made-up place would send the user looking.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.field = field
        self.hint = hint

    def located(self, path: str | None = None, line: int | None = None) -> "InputError":
        """Return a copy that knows its file and line (kept when already set)."""
        return InputError(
            self.message,
            path=self.path or path,
            line=self.line or line,
            field=self.field,
            hint=self.hint,
        )

    def __str__(self) -> str:
        where = self.path or ""
        if self.line is not None:
            where += f":{self.line}" if where else f"line {self.line}"
        text = f"{where}: " if where else ""
        if self.field:
            text += f"field '{self.field}': "
        text += self.message
        if self.hint:
            text += f" — {self.hint}"
        return text


class CheemsWarning(UserWarning):
    """Something the user should know that does not stop the run; the CLI prints it as one ``warning:`` line."""


Notify = Callable[[list[InputError]], None]
"""Where a library call hands the lines it skipped or its located warnings (the CLI lists each as one line)."""


def unlisted(notices: list[InputError]) -> None:
    """The default :data:`Notify` of a library call: the notices are not listed (a script asked for the skipping)."""
