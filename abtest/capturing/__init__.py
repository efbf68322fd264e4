"""The capture stage: `freeze` runs retrieval once for a question set and seals what it
returned into a fixture set (abtest.core.fixture_set writes and verifies it), `status`
reports staleness, coverage, groups and churn, `golden` drafts a golden set."""

from abtest.capturing.freeze import add_unanswerable, capture
from abtest.imports.questions import load_questions, validate_question_rows
from abtest.core.fixture_set import (Fixture, canonical_json, case_line, load_fixture, parse_cases, read_manifest,
                   seal_fixture, sha256_bytes, sha256_text, write_fixture)
from abtest.capturing.status import GOLDEN_SHARES, fixture_diff, fixture_groups, fixture_status

__all__ = ["GOLDEN_SHARES", "Fixture", "add_unanswerable", "canonical_json", "capture",
           "case_line", "fixture_diff", "fixture_groups", "fixture_status", "load_fixture",
           "load_questions", "parse_cases", "read_manifest", "seal_fixture", "sha256_bytes", "sha256_text",
           "validate_question_rows", "write_fixture"]
