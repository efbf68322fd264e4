"""The two kinds of failure a user can act on; everything else is a bug.

`UserError` maps to exit 2 (bad input, nothing written), `IncompleteError` to
exit 3 (a provider or endpoint failed; finished work is kept, nothing estimated).
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input: one line naming the file, the place in it and what is wrong."""

    def __init__(self, message: str, *, file: str | None = None, where: str | None = None,
                 field: str | None = None):
        self.message = message
        self.file = file
        self.where = where
        self.field = field
        super().__init__(self.line())

    def line(self) -> str:
        parts = []
        if self.file:
            parts.append(str(self.file))
        if self.where:
            parts.append(str(self.where))
        if self.field:
            parts.append(f"field '{self.field}'")
        prefix = ": ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message


class IncompleteError(Exception):
    """Some work could not be done; what finished is saved and the result is 'incomplete'."""


class RunStopped(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM: its state "stopped" is stored before this reaches
    the caller, with the exact command that continues it. A KeyboardInterrupt, so code that
    stops on Ctrl-C stops on it too."""

    def __init__(self, run_id: str, signal_name: str, hint: str):
        self.run_id = run_id
        self.signal_name = signal_name
        self.hint = hint
        super().__init__(f"run {run_id} stopped ({signal_name}); finished work is saved: "
                         f"`{hint}` continues it")


def pydantic_error_line(exc, *, file: str, where: str | None = None) -> UserError:
    """Turn the first pydantic validation error into one readable UserError."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
    msg = err.get("msg", "invalid value")
    if err.get("type") == "extra_forbidden":
        msg = "unknown key (check the spelling; see docs/DESIGN.md for the allowed keys)"
    elif err.get("type") == "missing":
        msg = "required field is missing"
    return UserError(msg, file=file, where=where, field=loc or None)
