"""The failures a user can act on, under one base `AbtestError`; everything else is a bug.

`UserError` maps to exit 2 (bad input, nothing written), `IncompleteRunError` to exit 3 (a
provider or endpoint failed; finished work is kept, nothing estimated); `DriftError` (the
model changed under a run) and `ProviderError` (a provider could not do the work) are
incomplete runs too. A message that tells the user to set an option names it through
`{placeholder}`s and `opts=`, so each surface spells it its own way: `force=True` when the
error reaches Python code, `--force` when the command line prints it (`line("cli")`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping
import warnings

Surface = Literal["python", "cli"]

# options whose command-line flag is not the argument's name with dashes
PLACEHOLDER = re.compile(r"\{(\w+)\}")
CLI_FLAGS = {"max_cost_usd": "--max-cost", "question_var": "--question-var"}


@dataclass(frozen=True)
class Spelled:
    """A phrase each surface spells its own way: the command that continues a run on the
    command line, the call that does it in Python."""

    cli: str
    python: str


def resume_call(run_id: str, **more: Any) -> str:
    """The Python call that continues run `run_id` (`more`: further arguments it needs)."""
    args = ", ".join(flag(k, v) for k, v in {"run_id": run_id, "resume": True, **more}.items())
    return f"run(..., {args})"


def flag(name: str, value: Any = True, surface: Surface = "python") -> str:
    """An option as a surface spells it: True → `force=True` / `--force`; None → the bare
    name (`shard` / `--shard`); any other value → `run_id='r1'` / `--run-id r1`; a `Spelled`
    phrase → its own spelling."""
    if isinstance(value, Spelled):
        return value.cli if surface == "cli" else value.python
    if surface == "cli":
        f = CLI_FLAGS.get(name, "--" + name.replace("_", "-"))
        return f if value is True or value is None else f"{f} {'…' if value is Ellipsis else value}"
    if value is None:
        return name
    return f"{name}=…" if value is Ellipsis else f"{name}={value!r}"


class AbtestError(Exception):
    """Every error abtest raises on purpose: one line naming the file, the place in it and
    what is wrong or what to do. `opts` are the options the message names by placeholder."""

    def __init__(self, message: str, *, file: str | None = None, where: str | None = None,
                 field: str | None = None, opts: Mapping[str, Any] | None = None):
        self.message = message
        self.file = file
        self.where = where
        self.field = field
        self.opts = dict(opts or {})
        super().__init__(self.line())

    def line(self, surface: Surface = "python") -> str:
        """The one line, its options spelled as `surface` spells them."""
        def render(text: str) -> str:
            # only `{name}` of a named option is replaced: other braces are the message's own
            return PLACEHOLDER.sub(lambda m: flag(m.group(1), self.opts[m.group(1)], surface)
                                   if m.group(1) in self.opts else m.group(0), text)

        parts = []
        if self.file:
            parts.append(str(self.file))
        if self.where:
            parts.append(str(self.where))
        if self.field:
            parts.append(f"field '{render(self.field)}'")
        prefix = ": ".join(parts)
        msg = render(self.message)
        return f"{prefix}: {msg}" if prefix else msg


class UserError(AbtestError):
    """Bad input: one line naming the file, the place in it and what is wrong (exit 2)."""


class IncompleteRunError(AbtestError):
    """Some work could not be done; what finished is saved and the result is 'incomplete'
    (exit 3)."""



class DriftError(IncompleteRunError):
    """The resolved model changed under a run: its answers would not compare like for like."""


class ProviderError(IncompleteRunError):
    """A model provider could not do the work (unreachable, failing past its retries)."""


class AbtestWarning(UserWarning):
    """Something a user should know that does not stop the work (the CLI prints it as one
    `abtest: warning:` line on stderr)."""


class DemoJudgeWarning(AbtestWarning):
    """The judge is the embedded model only because none was configured."""


class RunStopped(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM: its state "stopped" is stored before this reaches
    the caller, with the exact command that continues it. A KeyboardInterrupt, so code that
    stops on Ctrl-C stops on it too."""

    def __init__(self, run_id: str, signal_name: str, hint: str, counts: str = ""):
        self.run_id = run_id
        self.signal_name = signal_name
        self.hint = hint
        self.counts = counts   # the store's count (runstate.RunProgress.counts)
        super().__init__(self.line())

    def line(self, surface: Surface = "python") -> str:
        then = f"`{self.hint}`" if surface == "cli" else f"`{resume_call(self.run_id)}`"
        kept = f" ({self.counts})" if self.counts else ""
        return (f"run {self.run_id} stopped ({self.signal_name}); finished work is saved"
                f"{kept}: {then} continues it")


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


# pydantic warns once per ReadOnly item of litellm's TypedDicts as litellm loads (~144
# lines): noise that would bury abtest's one-line error when litellm loads (in the background
# while a run checks its inputs) on a path that then fails.
LITELLM_IMPORT_NOISE = r"Items? .* on TypedDict class .* (is|are) using the .ReadOnly. qualifier"


def quiet_import_warnings() -> None:
    """Filter litellm's import noise (and only it) for the rest of the process."""

    warnings.filterwarnings("ignore", message=LITELLM_IMPORT_NOISE, category=UserWarning)
