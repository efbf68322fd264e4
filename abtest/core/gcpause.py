"""Pausing Python's cyclic garbage collector around bursts of long-lived or acyclic objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(*, freeze: bool = False) -> Iterator[None]:
    """No cyclic collection inside the block; the collector's prior state comes back after.

    Bursts of allocation (importing litellm, building a 10,000-case report) otherwise trigger
    full collections that re-scan every object made so far. Reference counting still frees
    what it can; cycles wait for the block to end. freeze=True moves everything alive at the
    end to the permanent generation, for objects that live as long as the process."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was:
            gc.enable()
