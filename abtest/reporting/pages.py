"""The report's pages: the one Jinja environment (abtest.core.pages) with the report's own
helpers in its globals, `figures` (numbers and plot geometry) and `notes` (the shared text)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING
from abtest.core.pages import environment as base
from abtest.reporting import figures, notes

if TYPE_CHECKING:
    import jinja2


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:

    env = base()
    env.globals.update(figures=figures, notes=notes)
    return env
