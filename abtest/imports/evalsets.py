"""Eval sets made for other tools, read as abtest questions.

- **RAGAS** rows (`question` or `user_input`; `ground_truth`, `ground_truths` or `reference`;
  `contexts` / `retrieved_contexts`), from JSONL, a JSON array or `to_csv` (list columns as
  JSON or Python literals): the reference becomes `reference_answer` and its sentences the
  `key_points`; a row without an `id` gets one from its question's text, so the same
  question keeps the same id across exports. The same file is also capture input
  (`--retriever jsonl:FILE` takes each row's contexts as the retrieved chunks).
- **Gold answers under other names** (GOLD_NAMES: `expected`, `expected_answer`,
  `true_answer`, `gold`, …), in abtest's and RAGAS's rows, are the reference too
  (`take_gold`): a gold answer under a name abtest ignored was a reference lost with exit 0.
- **promptfoo** tests: a config's `tests:` (a list, or `file://` references to CSV, YAML,
  JSON or JSONL test files and globs, relative to the config's folder, as promptfoo resolves
  them), a test file itself, or a `tests.csv` (vars as columns; `__expected…` columns as
  promptfoo's `assertionFromString` reads them; `__description`, `__metadata:…`). The
  question comes from the first of QUESTION_VARS; asserts map where a per-case field means
  the same thing (ASSERT_MAP); `vars.context` holds the test's passages (CONTEXT_VARS), the
  frozen context when the file is its own capture input. Everything else (an assert type
  with no per-case meaning, a var, a test without a question) is listed in the result as a
  notice, never dropped silently, and said once per kind with its count.
- **Groups** (`fill_groups`, for any questions file but promptfoo's, which has no grouping):
  a row's own `group`; else the dataset's grouping column (GROUP_COLUMNS: `doc_id`,
  `document_id`, `document`) becomes `group`; else a RAGAS testset's source document (v0.1
  `metadata`: the first context's `source`, `file_path`, `file_name` or `filename`); else
  its `reference_contexts`: questions written from a shared reference context are one group.
  Said in one line; nothing else about the row changes.
"""

from __future__ import annotations

import glob
import hashlib
import re
from pathlib import Path
from typing import Any

from abtest.errors import UserError
from abtest.core.config import read_yaml
from abtest.core.records import read_records
from abtest.core.records import read_text

RAGAS_QUESTION = ("user_input", "question")
RAGAS_REFERENCE = ("reference", "ground_truth", "ground_truths")
# The names eval sets give their gold (expected) answer, in the order one is taken when a row
# has several: each becomes `reference_answer` (its sentences the key points) in the rows that
# name their columns freely (abtest's and RAGAS's rows, Braintrust/Langfuse items). A gold
# answer under a name abtest ignored was a reference lost with exit 0. `answer` is not here:
# it may be the app's output (`capture._answer_rule` decides, and says which); `target` is
# Inspect's (datasets.from_inspect).
GOLD_NAMES = ("reference_answer", "reference", "ground_truth", "ground_truths",
              "expected_answer", "expected_output", "expected", "expectedOutput", "gold_answer",
              "gold", "true_answer", "correct_answer", "answers")
# a list under these names holds alternatives: the first is the reference (said); RAGAS's
# `ground_truths` is one answer in parts, joined as RAGAS 0.1 wrote it
GOLD_JOINED = ("ground_truths",)
RAGAS_CONTEXTS = ("retrieved_contexts", "contexts")
RAGAS_ONLY = ("user_input", "retrieved_contexts", "contexts", "ground_truth", "ground_truths",
              "reference", "response", "answer", "reference_contexts")
RAGAS_LISTS = ("retrieved_contexts", "contexts", "ground_truths", "reference_contexts",
               "multi_responses")
# what RAGAS rows hold that a fixture has no field for, and why (said once per file)
RAGAS_NOT_IMPORTED = {"response": "the answer the app gave; abtest generates A's and B's",
                      "answer": "the answer the app gave; abtest generates A's and B's",
                      "multi_responses": "answers the app gave",
                      "reference_contexts": "the contexts the reference was written from",
                      "rubrics": "RAGAS rubrics"}
# a dataset's own column naming the document a question is about: it becomes `group`
# (a bare `source` is not among them: it often says where a row came from, "synthetic")
GROUP_COLUMNS = ("doc_id", "document_id", "document")
RAGAS_SOURCE_KEYS = ("source", "file_path", "file_name", "filename")
GROUP_MAX_CHARS = 200   # a longer grouping value (a whole document's text) is named by its hash
QUESTION_VARS = ("question", "query", "user_input", "input", "prompt")
# promptfoo assert type -> the case field it becomes (how its value is added)
ASSERT_MAP = {"contains": "key_points", "icontains": "key_points",
              "contains-all": "key_points", "icontains-all": "key_points",
              "not-contains": "must_not_say", "not-icontains": "must_not_say",
              "not-contains-any": "must_not_say", "not-icontains-any": "must_not_say",
              "equals": "reference_answer", "similar": "reference_answer",
              "factuality": "reference_answer"}
# promptfoo's assertion types (BaseAssertionTypes), for `__expected` cells
PF_TYPES = ("answer-relevance", "bleu", "classifier", "contains", "contains-all", "contains-any",
            "contains-html", "contains-json", "contains-sql", "contains-xml",
            "context-faithfulness", "context-recall", "context-relevance",
            "conversation-relevance", "cost", "equals", "factuality", "finish-reason", "g-eval",
            "gleu", "guardrails", "icontains", "icontains-all", "icontains-any", "is-html",
            "is-json", "is-refusal", "is-sql", "is-valid-function-call",
            "is-valid-openai-function-call", "is-valid-openai-tools-call", "is-xml",
            "javascript", "latency", "levenshtein", "llm-rubric", "meteor",
            "model-graded-closedqa", "model-graded-factuality", "moderation", "perplexity",
            "perplexity-score", "pi", "python", "regex", "rouge-n", "ruby", "select-best",
            "similar", "starts-with", "webhook", "word-count")
_PF_ASSERT = re.compile(r"^(not-)?(" + "|".join(re.escape(t) for t in
                                                sorted(PF_TYPES, key=len, reverse=True))
                        + r")(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$")
_PF_SPECIAL = ("__expected", "__prefix", "__suffix", "__description", "__providerOutput",
               "__metric", "__threshold", "__metadata", "__config")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def key_points_of(reference: str, most: int = 6) -> list[str]:
    """The reference's sentences, each a point the answer should state."""
    parts = [p.strip() for p in _SENTENCE.split(" ".join(reference.split())) if p.strip()]
    return parts[:most]


# --------------------------------------------------------------------------- RAGAS

def is_ragas_row(obj: dict) -> bool:
    """A row with RAGAS's columns (or a question without an id, as RAGAS's own CSV datasets
    have). Other columns beside them (an id, tags, a metric's name) do not make it another
    format: detection looks at the columns that say what a row is."""
    if "id" in obj:   # {id, question} is abtest's; {id, contexts} a capture file's row
        return "user_input" in obj
    return any(k in obj for k in RAGAS_ONLY) or "question" in obj


def take_gold(obj: dict, *, file: str, where: str) -> tuple[dict, str | None, int]:
    """The row with its gold answer (the first of GOLD_NAMES that holds one) as
    `reference_answer`, the column it came from (None when none does) and how many
    alternatives a list held (the first is the reference). Other gold columns stay in the
    row, for the caller to report as not imported. A gold answer that is not text is an
    error naming its column: abtest would have to change it to use it."""
    col = next((k for k in GOLD_NAMES if obj.get(k) not in (None, "", [])), None)
    if col is None:
        return obj, None, 0
    value, n = obj[col], 0
    if isinstance(value, list):
        texts = [x for x in value if isinstance(x, str) and x.strip()]
        if len(texts) != len(value):
            raise UserError("a list of gold answers holds text only", file=file, where=where,
                            field=col)
        n = len(texts)
        value = " ".join(texts) if col in GOLD_JOINED else texts[0]
    if not isinstance(value, str) or not value.strip():
        got = "empty" if isinstance(value, str) else _kind(value)
        raise UserError(f"the expected answer is {got}, not text", file=file, where=where,
                        field=col)
    out = {k: v for k, v in obj.items() if k != col}
    out["reference_answer"] = value if col == "reference_answer" else value.strip()
    return out, col, (n if col not in GOLD_JOINED else 0)


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", bool: "true/false", int: "a number",
            float: "a number"}.get(type(v), type(v).__name__)


def from_ragas(obj: dict, *, file: str, where: str) -> dict:
    """A RAGAS row as a question row (fields abtest does not use are kept, and listed by the
    caller like any other field a fixture has no place for). A row whose question is missing
    or not text is an error naming its own field."""
    qkey = next((k for k in RAGAS_QUESTION if k in obj), "user_input")
    q = obj.get(qkey)
    if not isinstance(q, str) or not q.strip():
        got = "missing" if qkey not in obj else ("null" if q is None else
                                                   "empty" if isinstance(q, str) else
                                                   f"{type(q).__name__}, not text")
        raise UserError(f"the question is {got}", file=file, where=where, field=qkey)
    out: dict[str, Any] = {"question": q}   # without an id, from the text (repeats.keep_once)
    for k, v in obj.items():
        if k not in RAGAS_QUESTION:
            out[k] = v   # id, answerable, category, … pass through; the rest is reported
    return out


# --------------------------------------------------------------------------- groups

def fill_groups(rows: list[tuple[str, dict]], *, file: str, made: set[int] | None = None
                ) -> tuple[list[tuple[str, dict]], str | None]:
    """The rows with `group` filled where the source says which questions belong together
    (the module docstring's order), and one line saying from what (None when no row has a
    group). A grouping column that is not text or a whole number is an error naming the row
    and the column."""
    out: list[tuple[str, dict]] = []
    by_source: dict[str, int] = {}
    refs: dict[int, list[str]] = {}
    for i, (where, row) in enumerate(rows):
        if not isinstance(row, dict) or "group" in row:
            if isinstance(row, dict) and row["group"] is not None:
                said = "the same question text" if made and i in made else "group"
                by_source[said] = by_source.get(said, 0) + 1
            out.append((where, row))
            continue
        col = next((c for c in GROUP_COLUMNS if row.get(c) is not None), None)
        if col is not None:
            row = {k: v for k, v in row.items() if k != col}
            row["group"] = _group_value(rows[i][1][col], file, where, col)
            by_source[col] = by_source.get(col, 0) + 1
        elif (src := _ragas_source(row.get("metadata"))) is not None:
            row = {**row, "group": _group_value(src[1], file, where, f"metadata[0].{src[0]}")}
            by_source[f"metadata {src[0]}"] = by_source.get(f"metadata {src[0]}", 0) + 1
        elif isinstance(rc := row.get("reference_contexts"), list) and rc and all(
                isinstance(t, str) for t in rc):
            refs[i] = rc
        out.append((where, row))
    if refs:
        for i, key in _shared_reference_groups(refs).items():
            out[i] = (out[i][0], {**out[i][1], "group": key})
        by_source["reference_contexts"] = len(refs)
    if not by_source:
        return out, None
    n_grouped = sum(by_source.values())
    groups = {r.get("group") for _, r in out if isinstance(r, dict) and r.get("group") is not None}
    said = ", ".join(f"{col} for {n}" for col, n in by_source.items())
    line = (f"{file}: group (which questions are not independent): from {said} of {len(out)} "
            f"question(s), {len(groups)} group(s)")
    if n_grouped < len(out):
        line += f"; {len(out) - n_grouped} without one (each its own group)"
    return out, line


def _group_value(value: Any, file: str, where: str, col: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        got = "empty" if isinstance(value, str) else f"{type(value).__name__}, not text"
        raise UserError(f"a question's group must be text or a whole number; this is {got}",
                        file=file, where=where, field=col)
    if len(value) > GROUP_MAX_CHARS or "\n" in value:
        return f"sha256:{hashlib.sha256(value.encode('utf-8')).hexdigest()[:16]}"
    return value


def _ragas_source(metadata: Any) -> tuple[str, Any] | None:
    """(key, value) of the source document in a RAGAS v0.1 testset's `metadata` (one object
    per context, as LangChain's document loaders fill it), or None."""
    first = metadata[0] if isinstance(metadata, list) and metadata else metadata
    if not isinstance(first, dict):
        return None
    key = next((k for k in RAGAS_SOURCE_KEYS if first.get(k) not in (None, "")), None)
    return (key, first[key]) if key else None


def _shared_reference_groups(refs: dict[int, list[str]]) -> dict[int, str]:
    """Row index → group key: rows sharing a reference context text are one group (union-find
    over the texts), named `rc-` + 12 hex digits of sha256 of the group's smallest text."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for texts in refs.values():
        for t in texts:
            parent.setdefault(t, t)
        for t in texts[1:]:
            a, b = find(texts[0]), find(t)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {i: "rc-" + hashlib.sha256(find(texts[0]).encode("utf-8")).hexdigest()[:12]
            for i, texts in refs.items()}


# --------------------------------------------------------------------------- promptfoo

def is_promptfoo_test(obj: dict) -> bool:
    return isinstance(obj.get("vars"), dict) or (
        "id" not in obj and "question" not in obj and isinstance(obj.get("assert"), list))


def is_promptfoo_csv(header: list[str]) -> bool:
    """A CSV is promptfoo's when it has its `__` columns, or is neither abtest's (an `id`
    column) nor RAGAS's: its columns are then a test's vars."""
    if any(h.startswith("__") for h in header):
        return True
    return "id" not in header and "question" not in header and not any(
        h in RAGAS_ONLY for h in header)


def assertion_from_string(expected: str) -> dict:
    """A `__expected` cell as promptfoo reads it (`src/csv.ts`, assertionFromString)."""
    for prefix, kind in (("javascript:", "javascript"), ("fn:", "javascript"),
                         ("eval:", "javascript"), ("grade:", "llm-rubric"),
                         ("llm-rubric:", "llm-rubric"), ("python:", "python")):
        if expected.startswith(prefix):
            return {"type": kind, "value": expected[len(prefix):].strip()
                    if kind != "llm-rubric" else expected[len(prefix):]}
    if expected.startswith("file://"):
        return {"type": "file", "value": expected}
    m = _PF_ASSERT.match(expected)
    if m:
        neg, kind, threshold, value = m.groups()
        value = value or ""
        full = f"not-{kind}" if neg else kind
        if kind in ("contains-all", "contains-any", "icontains-all", "icontains-any"):
            return {"type": full, "value": [s.strip() for s in value.split(",")]}
        out: dict[str, Any] = {"type": full, "value": value}
        if threshold:
            out["threshold"] = float(threshold)
        return out
    return {"type": "equals", "value": expected}


def csv_row_test(row: dict) -> dict:
    """A promptfoo CSV row as a test (`testCaseFromCsvRow`): `__expected…` columns become
    asserts, `__description` the description, `__metadata:KEY` metadata, the rest vars."""
    test: dict[str, Any] = {"vars": {}, "assert": []}
    for key, value in row.items():
        if key.startswith("__expected"):
            if str(value).strip():
                test["assert"].append(assertion_from_string(str(value)))
        elif key == "__description":
            test["description"] = value
        elif key.startswith("__metadata:"):
            test.setdefault("metadata", {})[key[len("__metadata:"):]] = value
        elif key.startswith("__"):
            continue   # __prefix, __suffix, __metric, __threshold, __config: how promptfoo runs
        else:
            test["vars"][key] = value
    return test


Notice = tuple[str, str]   # (where, what was not imported): grouped by what when said


def read_promptfoo(path: Path, question_var: str | None = None
                   ) -> tuple[list[tuple[str, dict]], list[Notice]]:
    """(where, question row) per usable test of a promptfoo config or test file, and a
    notice for everything not mapped. `file://` references are followed from the config's
    folder. `question_var` names the var that holds the question (else QUESTION_VARS, or the
    one text var)."""

    path = Path(path)
    if path.suffix.lower() in (".csv", ".tsv"):
        return map_tests(_tests_from_file(path, path.name), {}, path, question_var)
    doc = read_yaml(path)
    default: Any = {}
    misplaced: list[Notice] = []
    if isinstance(doc, dict) and "assert" in doc:
        # promptfoo reads asserts from a test or from defaultTest, never from the top level
        misplaced.append(("the config's top level", "`assert:` (promptfoo reads asserts "
                          "under a test or under defaultTest:, not at the top level; move it "
                          "under defaultTest: to apply it to every test)"))
    if isinstance(doc, dict) and ("tests" in doc or "defaultTest" in doc or "prompts" in doc):
        default = doc.get("defaultTest") or {}
        if isinstance(default, str):
            default = _load_ref(path, default, "defaultTest")
        if not isinstance(default, dict):
            raise UserError("defaultTest must be a test object", file=str(path),
                            field="defaultTest")
        tests = doc.get("tests")
    else:
        tests = doc
    tests = _expand_tests(path, tests)
    rows, unmapped = map_tests(tests, default, path, question_var)
    return rows, misplaced + unmapped


def _expand_tests(config: Path, tests: Any) -> list[tuple[str, Any]]:
    """(label, test) from `tests:`: a list whose items may be `file://` references, or one
    reference (a file or a glob), as promptfoo reads them."""
    if tests is None:
        raise UserError("no promptfoo tests (expected `tests:` with a list or file://…, or a "
                        "list)", file=str(config), field="tests")
    items = tests if isinstance(tests, list) else [tests]
    if not isinstance(tests, (list, str)):
        raise UserError(f"tests must be a list or a file:// reference, got "
                        f"{type(tests).__name__}", file=str(config), field="tests")
    out: list[tuple[str, Any]] = []
    for i, t in enumerate(items):
        if isinstance(t, str):
            for f in _resolve(config, t, "tests" if isinstance(tests, str) else f"tests[{i}]"):
                out.extend(_tests_from_file(f, f.relative_to(config.parent).as_posix()
                                            if f.is_relative_to(config.parent) else str(f)))
        else:
            out.append((f"tests[{i}]", t))
    return out


def _resolve(config: Path, ref: str, field: str) -> list[Path]:
    """The files a `file://` reference (or a plain relative path) names, glob expanded,
    relative to the config's folder."""
    raw = ref[len("file://"):] if ref.startswith("file://") else ref
    if re.match(r"^[a-z][a-z0-9+.-]*://", raw) or raw.startswith(("http:", "https:")):
        raise UserError(f"{ref!r}: abtest reads test files on disk (CSV, YAML, JSON, JSONL), "
                        "not URLs or datasets; download it first", file=str(config),
                        field=field)
    target = Path(raw) if Path(raw).is_absolute() else config.parent / raw
    if any(ch in raw for ch in "*?["):
        found = sorted(Path(p) for p in glob.glob(str(target), recursive=True))
        found = [p for p in found if p.is_file()]
        if not found:
            raise UserError(f"{ref!r} matches no file (looked from {config.parent})",
                            file=str(config), field=field)
        return found
    if not target.is_file():
        raise UserError(f"{ref!r}: file not found (looked for {target})", file=str(config),
                        field=field)
    return [target]


def _load_ref(config: Path, ref: str, field: str) -> Any:

    files = _resolve(config, ref, field)
    if len(files) != 1 or files[0].suffix.lower() not in (".yaml", ".yml", ".json"):
        raise UserError(f"{ref!r}: expected one YAML or JSON file", file=str(config), field=field)
    return read_yaml(files[0])


def _tests_from_file(f: Path, label: str) -> list[tuple[str, Any]]:
    """The tests one referenced file holds: CSV rows, or YAML/JSON/JSONL test objects."""

    suffix = f.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return [(f"{label} {w}", csv_row_test(row)) for w, row in read_records(f)]
    if suffix == ".jsonl":
        return [(f"{label} {w}", row) for w, row in read_records(f)]
    if suffix in (".yaml", ".yml", ".json"):
        doc = read_yaml(f)   # JSON is YAML
        if isinstance(doc, dict) and isinstance(doc.get("tests"), list):
            doc = doc["tests"]
        if isinstance(doc, dict):
            doc = [doc]
        if not isinstance(doc, list):
            raise UserError("expected a list of promptfoo tests", file=str(f))
        return [(f"{label} [{i}]", t) for i, t in enumerate(doc)]
    raise UserError(f"tests from {suffix or 'this kind of'} file: abtest reads CSV, YAML, JSON "
                    "and JSONL test files (a generator script is promptfoo's to run)",
                    file=str(f))


# a test's var holding the passages the answer should come from (promptfoo's context-*
# asserts read `context`): they are the case's frozen context when the file is its own
# capture input (`--retriever jsonl:` this file)
CONTEXT_VARS = ("context", "contexts")
# a `file://` var promptfoo reads as text (others it runs or parses: not a passage)
TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".text", ".rst")


def map_tests(tests: list[tuple[str, Any]], default: dict, path: Path,
              question_var: str | None = None) -> tuple[list[tuple[str, dict]], list[Notice]]:
    """(where, question row) per test with a question, and what was not mapped."""
    rows: list[tuple[str, dict]] = []
    unmapped: list[Notice] = []
    dvars = dv if isinstance(dv := default.get("vars"), dict) else {}
    for where, t in tests:
        if not isinstance(t, dict):
            unmapped.append((where, "not a test object"))
            continue
        label = where + (f" ({t['description']})" if isinstance(t.get("description"), str) else "")
        given = t.get("vars")
        if isinstance(given, str):              # `vars: file://vars.yaml`, as promptfoo reads
            given = _load_ref(path, given, f"{where}: vars")
        tvars = given if isinstance(given, dict) else {}
        vars_ = {**dvars, **tvars}
        if question_var is not None:
            qvar = question_var if isinstance(vars_.get(question_var), str) else None
        else:
            qvar = next((k for k in QUESTION_VARS if isinstance(vars_.get(k), str)), None)
            if qvar is None:
                strs = [k for k, v in vars_.items() if isinstance(v, str)]
                qvar = strs[0] if len(strs) == 1 else None
        if qvar is None:
            looked = (f"vars.{question_var}" if question_var else
                      f"{', '.join(QUESTION_VARS)}, or a single text var")
            has = ", ".join(map(str, vars_)) or "none"
            unmapped.append((label, f"the test (no question var: looked for {looked}; it "
                             f"has {has}; name one with --question-var)"))
            continue
        question = vars_[qvar]
        if question.startswith("file://"):
            unmapped.append((label, f"the test (vars.{qvar} is a file promptfoo reads, "
                             f"{question!r})"))
            continue
        row: dict[str, Any] = {"question": question}   # id: repeats.keep_once
        for k in vars_:
            if k == qvar:
                continue
            if k in CONTEXT_VARS and "contexts" not in row:
                ctx, why = _context_var(path, vars_[k], f"{where}: vars.{k}")
                if ctx is not None:
                    row["contexts"] = ctx
                else:
                    unmapped.append((label, f"vars.{k} ({why})"))
                continue
            unmapped.append((label, f"vars.{k} (a case has no field for it)"))
        asserts = list(default.get("assert") or []) + list(t.get("assert") or [])
        for a in asserts:
            _map_assert(row, a, label, unmapped)
        if isinstance(t.get("metadata"), dict) and isinstance(t["metadata"].get("id"), str):
            row["id"] = t["metadata"]["id"]
        rows.append((where, row))
    return rows, unmapped


def _context_var(config: Path, value: Any, where: str) -> tuple[list[str] | None, str]:
    """A context var's passages: text is one passage, a list of text each one, a `file://`
    text file its content (promptfoo reads it so, from the config's folder); else None and
    why not. A context file that cannot be read is said, not an error: the passages matter
    only when the file is its own capture input, which then names the test."""
    if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
        return value, ""
    if not isinstance(value, str) or not value.strip():
        return None, "not text or a list of text"
    if not value.startswith("file://"):
        return [value], ""

    try:
        files = _resolve(config, value, where)
        if len(files) != 1 or files[0].suffix.lower() not in TEXT_SUFFIXES:
            return None, (f"a file promptfoo runs or parses; abtest reads "
                          f"{', '.join(TEXT_SUFFIXES)} files as passages")
        return [read_text(files[0], "a context file")], ""
    except UserError as exc:
        return None, exc.message


def _map_assert(row: dict, a: Any, label: str, unmapped: list[Notice]) -> None:
    if not isinstance(a, dict) or not isinstance(a.get("type"), str):
        unmapped.append((label, "an assert that is not an assert object"))
        return
    kind, value = a["type"], a.get("value")
    field = ASSERT_MAP.get(kind)
    given = value if isinstance(value, list) else [value]
    values = [v for v in given if isinstance(v, str) and v.strip()]
    if field is None:
        unmapped.append((label, f"assert type {kind!r} (no per-case mapping"
                         + ("; a variant's checks cover it)" if kind in ("is-json", "regex")
                            else ")")))
        return
    if not given or len(values) != len(given) or any(
            v.startswith("file://") or "{{" in v for v in values):
        unmapped.append((label, f"a {kind} assert whose value is not plain text (file:// or "
                         "a template)"))
        return
    if field == "reference_answer":
        if row.get("reference_answer"):
            unmapped.append((label, f"a second reference ({kind}); the first is kept"))
            return
        row["reference_answer"] = values[0].strip()
        return
    row.setdefault(field, [])
    for v in values:
        if v.strip() not in row[field]:
            row[field].append(v.strip())

