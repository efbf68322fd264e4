"""Every message abtest can print reads as written: no word twice in a row ("at at"), in the
templates in the code or in what a JSON error becomes at run time."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from abtest.errors import UserError
from abtest.core.records import json_error

ROOT = Path(__file__).resolve().parent.parent / "abtest"
DOUBLED = re.compile(r"\b([A-Za-z]+)\s+\1\b", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def templates() -> list[tuple[str, int, str]]:
    """(file, line, text) of every string literal and f-string in the package (its
    placeholders as `{}`), docstrings aside."""
    found = []
    for f in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}"
                               for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in skip:
                text = node.value
            else:
                continue
            found.append((str(f.relative_to(ROOT.parent)), node.lineno, text))
    return found


def test_no_message_template_has_a_word_twice():
    found = templates()
    assert len(found) > 1000   # the scan saw the package
    doubled = [(f, n, m.group(0)) for f, n, t in found for m in DOUBLED.finditer(t)]
    assert doubled == []


def test_the_scan_catches_a_doubled_word():
    assert DOUBLED.search("invalid JSON (Invalid control character at at column 4)")


@pytest.mark.parametrize("text", ['{"a": "bc', '[1, 2', '{"a": 1', '{"a": "bc\n'])
def test_json_errors_read_once(text):
    with pytest.raises(json.JSONDecodeError) as info:
        json.loads(text)
    for last in (True, False):
        err = json_error(Path("f.json"), info.value, text, 1, last)
        assert isinstance(err, UserError)
        assert not DOUBLED.search(err.line()), err.line()
        assert ("ends mid-record (line 1)" in err.line()) is last, err.line()
