"""What the import tests share: a project to capture into, the CLI, and the fixture a capture
wrote, read back as plain JSON (never with abtest's own readers)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import make_project


@pytest.fixture
def proj(tmp_path, monkeypatch):
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    return p


def run(*args):
    return CliRunner().invoke(cli, list(args))


def cases_of(p: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (p / "fixtures" / name / "cases.jsonl").read_text(
        encoding="utf-8").splitlines()]


def manifest_of(p: Path, name: str) -> dict:
    return json.loads((p / "fixtures" / name / "manifest.json").read_text())


def sha_id(prefix: str, q: str) -> str:
    """An id made from a question's text, as the import documents it (whitespace collapsed)."""
    return f"{prefix}-{hashlib.sha256(' '.join(q.split()).encode()).hexdigest()[:12]}"


def refused(r, proj: Path, name: str) -> str:
    """The one error line (after what the import said, if it got that far); nothing
    written."""
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [x for x in r.stderr.splitlines() if x.startswith("abtest: error:")]
    assert len(errors) == 1 and r.stderr.strip().endswith(errors[0]), r.stderr
    assert not (proj / "fixtures" / name).exists()
    return errors[0]


def chunk_id(text: str) -> str:
    """A chunk's id from its text, as an import documents it."""
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def contexts_for(p: Path, questions: list[str]) -> str:
    """A capture file giving each question one passage (for files that hold no contexts)."""
    (p / "ctx.jsonl").write_text("".join(json.dumps({"question": q, "contexts": [f"about {i}"]})
                                         + "\n" for i, q in enumerate(questions)))
    return "jsonl:ctx.jsonl"
