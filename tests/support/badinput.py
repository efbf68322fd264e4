"""What every bad-input test asserts (exit 2, one line, no traceback, nothing written), in one
place: the CLI's contract for bad input, checked the same way wherever a test feeds it some."""

from __future__ import annotations

import hashlib
from pathlib import Path

from click.testing import CliRunner

from abtest.cli import cli


def snapshot_tree(root: Path) -> dict[str, str]:
    """Every file below `root` by its sha256: a bad input must leave all of them as they were."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def expect_bad(args: list[str], *needles: str, root: Path | None = None) -> str:
    """`abtest ARGS` (in this process) exits 2 with one line holding every needle, and changes
    no file below `root` (the working directory): the line it printed."""
    root = root or Path.cwd()
    before = snapshot_tree(root)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    err = r.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, (n, err)
    assert snapshot_tree(root) == before, "bad input changed files"
    return err
