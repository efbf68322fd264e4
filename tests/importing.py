"""What the import tests share: a project to capture into, the CLI, and the fixture a capture
wrote, read back as plain JSON (never with abtest's own readers)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from fakes import make_project


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
