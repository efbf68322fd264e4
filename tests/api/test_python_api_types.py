"""The typed public API (issue 45, item 1): the package ships `py.typed`, and `mypy --strict`
on a user's script sees `abtest.run`, `Report`, `RunHandle`, `Fixture` and the errors as
their real types (not `Any`) while `import abtest` still imports nothing: the page's code
blocks check clean, and a script that misuses the API is reported."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import abtest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"

MISUSE = '''\
import abtest

reveal_type(abtest.run)
reveal_type(abtest.report)
reveal_type(abtest.RunHandle.report)
reveal_type(abtest.load_fixture)
h = abtest.run("fixtures/f", "a.yaml", "b.yaml", max_cost_usd="ten dollars")
try:
    pass
except abtest.AbtestError as e:
    reveal_type(e)
reveal_type(h.result)
reveal_type(abtest.get_run().result)
reveal_type(abtest.list_runs()[0]["n_used"])
'''


def _mypy(tmp_path: Path, *files: str) -> str:
    """mypy --strict as a user runs it on a script in a folder of their own, after the README's
    set-up: no MYPYPATH, abtest found where the installer put it (scripts/setup installs it
    editable in compat mode, which type checkers follow)."""
    env = {k: v for k, v in os.environ.items() if k != "MYPYPATH"}
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                          "--no-error-summary", "--cache-dir", str(tmp_path / "cache"),
                          *files], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=500)
    assert out.returncode in (0, 1), out.stderr
    return out.stdout


def test_mypy_strict_sees_the_real_types_checks_the_docs_and_catches_a_misuse(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    # the page's examples are untyped notebook code; everything else is --strict
    (tmp_path / "docs_blocks.py").write_text(
        "# mypy: allow-untyped-defs, allow-untyped-calls\n" + "\n".join(blocks))
    (tmp_path / "misuse.py").write_text(MISUSE)
    out = _mypy(tmp_path, "docs_blocks.py", "misuse.py")
    assert not [ln for ln in out.splitlines() if ln.startswith("docs_blocks.py")], out
    lines = {int(m.group(1)): m.group(2) for m in re.finditer(r"^misuse\.py:(\d+): (.*)$", out,
                                                              re.M)}
    assert 'Revealed type is "def (fixture:' in lines[3] and "-> abtest.api.RunHandle[abtest.running.execute.RunResult]" in lines[3]
    assert "-> abtest.reporting.model.Report" in lines[4]
    assert "-> abtest.reporting.model.Report" in lines[5]
    assert "-> abtest.core.fixture_set.Fixture" in lines[6]
    assert lines[7] == ('error: Argument "max_cost_usd" to "run" has incompatible type "str"; '
                        'expected "float | None"  [arg-type]'), out
    assert lines[11] == 'note: Revealed type is "abtest.errors.AbtestError"'
    assert lines[12] == 'note: Revealed type is "abtest.running.execute.RunResult"'
    assert lines[13] == 'note: Revealed type is "abtest.store.state.RunProgress"'
    assert lines[14] == 'note: Revealed type is "int | None"'


def test_every_public_name_is_declared_for_type_checkers_and_the_package_is_typed():
    tree = ast.parse((ROOT / "abtest" / "__init__.py").read_text())
    declared: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                for a in imp.names:
                    assert a.asname == a.name     # `import x as x`: an explicit re-export
                    declared.add(a.name)
    assert declared == set(abtest.__all__)
    for name in abtest.__all__:
        assert getattr(abtest, name) is not None
    assert (ROOT / "abtest" / "py.typed").exists()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()
