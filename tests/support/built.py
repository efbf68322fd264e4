"""Projects built once per test process and copied per test.

A run of the small fixture takes 0.7 s in-process and a copy of its project 2 ms, so tests
that only read a run (or start from one) share one build instead of each running it again.
A copy must behave as if the test had run it in its own folder: the store records absolute
paths (a run resumes from anywhere, and a report re-verifies its fixture there), so the
copy's run rows are rebased onto the copy. A test that edits its copy's fixture or variants
then sees its own edit, never the shared build's, and the build itself is never touched.
"""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Built:
    """One per test process (the `built` session fixture in tests/conftest.py)."""

    def __init__(self, mktemp: Callable[[str], Path]):
        self._mktemp = mktemp
        self._done: dict[str, tuple[Path, Any]] = {}

    def copy(self, name: str, build: Callable[[Path], Any], dest: Path) -> tuple[Path, Any]:
        """Copy of the project `build(root)` made in an empty folder (its working directory
        while it builds), at `dest`; and a deep copy of what `build` returned."""
        if name not in self._done:
            root = self._mktemp(f"built-{name}")
            cwd = os.getcwd()
            os.chdir(root)
            try:
                value = build(root)
            finally:
                os.chdir(cwd)
            self._done[name] = (root, value)
        root, value = self._done[name]
        shutil.copytree(root, dest)
        store = dest / "results" / "abtest.duckdb"
        if store.exists():
            rebase_store(store, str(root.resolve()), str(dest.resolve()))
        return dest, copy.deepcopy(value)


def rebase_store(store: Path, old: str, new: str) -> None:
    """Every text column of the store's `runs` rows that names a path under `old` names the
    same path under `new` (fixture, variants, config, working directory)."""
    import duckdb

    con = duckdb.connect(str(store))
    try:
        cols = [c for c, t in con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = 'runs'").fetchall() if t == "VARCHAR"]
        sets = ", ".join(f'"{c}" = replace("{c}", ?, ?)' for c in cols)
        con.execute(f"UPDATE runs SET {sets}", [x for _ in cols for x in (old, new)])
        con.execute("CHECKPOINT")
    finally:
        con.close()
