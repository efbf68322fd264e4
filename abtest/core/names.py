"""Ids and names that end up in file names: one check, used wherever one is taken.

A run id becomes a folder (`results/review/RUN_ID`) and part of report file names, so an id
like `../../etc` must never be accepted, neither when a run is started nor when one is
named on the command line. Free-text names (a variant's `name`) are not refused but made
safe when they become a file name.
"""

from __future__ import annotations

import re

from abtest.errors import UserError

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_id(value: str, *, what: str = "run id", field: str | None = None,
             file: str | None = None) -> str:
    """`value` when it is a safe id: letters, digits, '.', '_' and '-', starting with a letter
    or a digit, at most 128 characters and no '..'; otherwise exit 2 naming it."""
    if not isinstance(value, str) or not _ID.fullmatch(value) or ".." in value:
        raise UserError(f"{value!r} is not a valid {what}: use letters, digits, '.', '_' and '-' "
                        "(at most 128, starting with a letter or digit, no '..')",
                        field=field, file=file)
    return value


def file_stem(name: str) -> str:
    """A free-text name as a file name stem: unsafe characters become '_', never a path."""
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name).strip(".")
    stem = stem.replace("..", "_")
    return stem[:128] or "_"
