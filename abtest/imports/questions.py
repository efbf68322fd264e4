"""Reading a questions file in any format abtest knows (abtest's own rows, RAGAS,
promptfoo, DeepEval, Inspect, Phoenix, Braintrust/Langfuse/Opik, LlamaIndex): the rows as
their authors meant them, each with an id, repeats kept once, and what the import assumed
or left out said once. Capture (abtest.capturing) freezes retrieval for these questions;
`--retriever jsonl:` reads the contexts some of these files hold.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, get_args

from abtest.errors import UserError, pydantic_error_line
from abtest.core.models import Question
from abtest.imports.repeats import keep_once
from abtest.core.records import csv_header, is_csv, read_records
from abtest.imports.datasets import DEEPEVAL_LISTS, document_rows, refuse_unknown, row_format
from abtest.imports.evalsets import RAGAS_LISTS, csv_row_test, map_tests, read_promptfoo
from abtest.imports.datasets import (DEEPEVAL_NOT_IMPORTED, INPUT_EXPECTED_NOT_IMPORTED,
                           INSPECT_NOT_IMPORTED, LLAMAINDEX_NOT_IMPORTED, from_deepeval,
                           from_input_expected, from_inspect, from_llamaindex, from_phoenix,
                           says_absent)
from abtest.imports.evalsets import GOLD_NAMES, RAGAS_NOT_IMPORTED, from_ragas, key_points_of, take_gold
from abtest.imports.datasets import FORMAT_LABELS
from abtest.imports.evalsets import RAGAS_CONTEXTS, fill_groups
from pydantic import ValidationError


QUESTION_LISTS = ("key_points", "relevant_chunk_ids", "expected_citations", "must_not_say",
                  "tags")
CAPTURE_LISTS = ("context", "keywords", "retrieval_scores")
ROW_BOOLS = ("answerable", "draft")
# what a capture file's row holds for `--retriever jsonl:` (not question fields)
CAPTURE_FIELDS = ("context", "contexts", "retrieved_contexts", "corpus_version", "keywords",
                  "search_terms", "retrieval_scores")


class QuestionList(list):
    """Questions, with what the import recorded about them for the manifest's notes
    (repeats kept once, same-text questions told apart, the answer column assumed)."""

    notes: dict | None = None


class QuestionRows(NamedTuple):
    rows: list[tuple[str, dict]]
    unmapped: list[tuple[str, str]]           # (where, what): promptfoo asserts and vars
    said: list[str]                           # what the import assumed or changed
    notes: dict                               # the same, for manifest.json
    fmt: str
    reasons: dict[str, str]                   # field → why it is not imported
    grouped: set[int]                         # rows whose group is their repeated text


ANSWER_IS = ("reference", "response")
_ANSWER_IS = {"answer_is": None}   # named `answer_is` in Python, `--answer-is` on the command line
_PREFIX = {"ragas": "r", "promptfoo": "pf", "deepeval": "de", "inspect": "in", "phoenix": "px",
           "input-expected": "ie", "llamaindex": "li", "llamaindex-qr": "li", "abtest": "q"}
# each format's own name for its gold answer: importing it needs no word (the format line
# names the format); any other name from the gold table is said
_OWN_GOLD = {"ragas": ("reference", "ground_truth", "ground_truths"),
             "abtest": ("reference_answer",)}


def question_rows(path: Path, question_var: str | None = None, answer_is: str | None = None
                  ) -> QuestionRows:
    """The question rows of a file in any format abtest reads (one format per file, by its
    shape: `datasets.row_format`), each with an id, repeats kept once."""

    path = Path(path)
    if answer_is is not None and answer_is not in ANSWER_IS:
        raise UserError(f"expected one of {', '.join(ANSWER_IS)}, got {answer_is!r}",
                        field="{answer_is}", opts=_ANSWER_IS)
    fmt, rows = _rows_of(path, question_var)
    unmapped: list[tuple[str, str]] = []
    if fmt == "promptfoo":
        rows, unmapped = rows
    mapped, said, reasons = _map_rows(fmt, rows, path, answer_is)
    kept = keep_once(mapped, prefix=_PREFIX.get(fmt, "q"), file=str(path))
    notes = dict(kept.notes)
    if said:
        notes["import_assumed"] = said
    return QuestionRows(kept.rows, unmapped, said + kept.lines, notes, fmt, reasons,
                        kept.grouped)


def _rows_of(path: Path, question_var: str | None) -> tuple[str, Any]:
    """(format, rows) as read: promptfoo's are already questions (with what was not
    mapped), the others raw rows of one format."""

    if path.suffix.lower() in (".yaml", ".yml"):
        return "promptfoo", read_promptfoo(path, question_var)
    header = csv_header(path) if is_csv(path) else None
    if header is not None and (question_var is not None or any(h.startswith("__")
                                                               for h in header)):
        return "promptfoo", read_promptfoo(path, question_var)
    doc = document_rows(path)
    if doc is not None:
        return doc
    lists: tuple[str, ...] = QUESTION_LISTS + RAGAS_LISTS + CAPTURE_LISTS
    if header is not None and row_format(dict.fromkeys(header, "")) == "deepeval":
        lists = tuple(f for f in lists if f not in DEEPEVAL_LISTS)   # "a|b", as DeepEval writes
    rows = list(read_records(path, "a questions file (JSONL, JSON or CSV)", name="questions file",
                             list_fields=lists, bool_fields=ROW_BOOLS,
                             known_fields=("id", "question", "user_input", "input")))
    if not rows:
        return "abtest", rows
    if all(row_format(o) == "promptfoo" for _, o in rows):
        return "promptfoo", map_tests(rows, {}, path, question_var)
    if question_var is not None:
        raise UserError("--question-var names a promptfoo test's var; this is not a promptfoo "
                        "test file", file=str(path), field="--question-var")
    fmts: list[tuple[str, str]] = []
    for w, o in rows:
        f = row_format(o)
        if f is None:
            if header is not None and not fmts and any(h in header for h in PROMPTFOO_VARS):
                # a CSV of promptfoo vars only: its question var is a promptfoo name
                return "promptfoo", map_tests([(w2, csv_row_test(o2)) for w2, o2 in rows], {},
                                              path, None)
            raise refuse_unknown(path, w, o)
        fmts.append((w, f))
    seen = {f for _, f in fmts}
    kinds = seen - {"abtest"} or {"abtest"}   # abtest rows and RAGAS rows mix (ids or not)
    if len(kinds) > 1 or (len(seen) > 1 and kinds != {"ragas"}):
        first = fmts[0][1]
        w, f = next((w, f) for w, f in fmts if f != first)
        raise UserError(f"this row is a {f} row, but the file's first row is a {first} row: "
                        "one format per file", file=str(path), where=w)
    return kinds.pop(), rows


PROMPTFOO_VARS = ("query", "prompt")   # a CSV of vars with one of these is promptfoo's


def _map_rows(fmt: str, rows: list[tuple[str, dict]], path: Path, answer_is: str | None
              ) -> tuple[list[tuple[str, dict]], list[str], dict[str, str]]:
    """Rows of one format as question rows, what was assumed (one line each), and why each
    field left behind is not imported."""

    file = str(path)
    said: list[str] = []
    reasons: dict[str, str] = dict(RAGAS_NOT_IMPORTED)
    out: list[tuple[str, dict]] = []
    n_alternatives = 0
    gold_from: dict[str, int] = {}      # a gold column under another name → rows
    derived: set[int] = set()           # rows whose reference the import mapped
    ideal = {"fallback": 0, "beside": 0}   # DeepEval rows: context used / context left
    for w, o in rows:
        if not isinstance(o, dict):
            out.append((w, o))
            continue
        if fmt == "deepeval":
            if path.suffix.lower() in (".csv", ".tsv"):
                o = {k: (v.split("|") if k in DEEPEVAL_LISTS and isinstance(v, str) else v)
                     for k, v in o.items()}
            r = from_deepeval(o, file=file, where=w)
            if o.get("retrieval_context") is None and o.get("context") is not None:
                ideal["fallback"] += 1
            elif o.get("retrieval_context") is not None and o.get("context") is not None:
                ideal["beside"] += 1
        elif fmt == "input-expected":
            r = from_input_expected(o, file=file, where=w)
        elif fmt == "inspect":
            r, n = from_inspect(o, file=file, where=w)
            n_alternatives += n > 1
        elif fmt == "phoenix":
            r = from_phoenix(o, file=file, where=w)
        elif fmt == "llamaindex":
            r = from_llamaindex(o, file=file, where=w)
        elif fmt == "ragas":
            r = from_ragas(o, file=file, where=w)
        else:
            r = dict(o)
        if fmt in ("abtest", "ragas"):
            r, col, n = take_gold(r, file=file, where=w)
            n_alternatives += n > 1
            if col is not None and col not in _OWN_GOLD[fmt]:
                gold_from[col] = gold_from.get(col, 0) + 1
            if col is not None and col != "reference_answer":
                derived.add(len(out))
        out.append((w, r))
    reasons.update({"deepeval": DEEPEVAL_NOT_IMPORTED, "inspect": INSPECT_NOT_IMPORTED,
                    "llamaindex": LLAMAINDEX_NOT_IMPORTED,
                    "input-expected": INPUT_EXPECTED_NOT_IMPORTED}.get(fmt, {}))
    for k in GOLD_NAMES:
        reasons.setdefault(k, "a second gold answer: the reference comes from the first "
                           f"of {', '.join(GOLD_NAMES)} the row has")
    if gold_from:
        said.append(f"{file}: read " + ", ".join(f"`{c}` ({n} row{'s' * (n != 1)})"
                                                 for c, n in gold_from.items())
                    + " as the expected answer (reference_answer, its sentences the key "
                    "points)")
    if ideal["fallback"]:
        said.append(f"{file}: {ideal['fallback']} golden(s) have no retrieval_context: their "
                    "`context` (DeepEval's ideal context) is their contexts")
    if ideal["beside"]:
        said.append(f"{file}: not imported: context in {ideal['beside']} golden(s) (DeepEval's "
                    "ideal context; retrieval_context is what the app retrieved, and is "
                    "their contexts)")
    if fmt == "llamaindex":
        reasons["reference_contexts"] = ("the passages each question was written from: "
                                         f"capture with --retriever jsonl:{path} to make "
                                         "them the context")
    if n_alternatives:
        what = "sample(s) list several targets" if fmt == "inspect" else \
            "row(s) list several gold answers"
        said.append(f"{file}: {n_alternatives} {what} (alternatives): the first is the "
                    "reference answer")
    if fmt in ("abtest", "ragas"):
        had = {i for i, (_, r) in enumerate(out) if isinstance(r, dict)
               and r.get("reference_answer")}
        out, line = _answer_rule(out, answer_is, file)
        derived |= {i for i, (_, r) in enumerate(out) if i not in had and isinstance(r, dict)
                    and r.get("reference_answer")}
        if line:
            said.append(line)
    elif answer_is is not None:
        raise UserError(f"{{answer_is}} applies to files whose answer column could be either "
                        f"(RAGAS or abtest rows with `answer`/`response`); this {fmt} file says "
                        "which field is the expected answer", file=file, field="{answer_is}",
                        opts=_ANSWER_IS)
    n_absent = 0
    for i, (w, r) in enumerate(out):
        if not isinstance(r, dict):
            continue
        ref = r.get("reference_answer")
        if fmt != "abtest" and isinstance(ref, str) and "answerable" not in r \
                and says_absent(ref):
            r = {k: v for k, v in r.items() if k not in ("reference_answer", "key_points")}
            r["answerable"] = False
            n_absent += 1
        elif (fmt != "abtest" or i in derived) and isinstance(ref, str) \
                and r.get("key_points") is None:
            r = {**r, "key_points": key_points_of(ref)}
        out[i] = (w, r)
    out, line = _foreign_values(out, file)
    if line:
        said.append(line)
    if n_absent:
        said.append(f"{file}: {n_absent} question(s) whose ground truth says the context holds "
                    "no answer (\"not present in context\"): answerable: false, no reference")
    return out, said, reasons


CATEGORIES: tuple[str, ...] = get_args(get_args(Question.model_fields["category"].annotation)[0])


def _foreign_values(rows: list[tuple[str, dict]], file: str
                    ) -> tuple[list[tuple[str, dict]], str | None]:
    """A row's own labels under a name abtest uses for something else (a `category` that is
    not one of abtest's, `tags` that are not a list of text: DeepEval users add their own)
    are the author's, not abtest's: kept as the case's `meta.category` / `meta.tags`, with
    one line, never a refusal (abtest would have to change them to use them as its own)."""
    moved: dict[str, list[str]] = {}
    firsts: dict[str, Any] = {}
    out = []
    for w, r in rows:
        if isinstance(r, dict):
            clash = {}
            if r.get("category") is not None and r["category"] not in CATEGORIES:
                clash["category"] = r["category"]
            tags = r.get("tags")
            if tags is not None and not (isinstance(tags, list)
                                         and all(isinstance(t, str) for t in tags)):
                clash["tags"] = tags
            if clash:
                meta = r["meta"] if isinstance(r.get("meta"), dict) else {}
                r = {k: v for k, v in r.items() if k not in clash}
                r["meta"] = {**meta, **clash}
                for k, v in clash.items():
                    moved.setdefault(k, []).append(w)
                    firsts.setdefault(k, v)
        out.append((w, r))
    if not moved:
        return out, None
    parts = []
    for k, wheres in moved.items():
        what = (f"not one of abtest's categories ({', '.join(CATEGORIES)})" if k == "category"
                else "not a list of text")
        parts.append(f"{k} in {len(wheres)} row(s) ({_firsts(wheres)}; e.g. {firsts[k]!r}) is "
                     f"{what}: kept as the case's meta.{k} (--group-by meta.{k} groups by it)")
    return out, f"{file}: " + "; ".join(parts)


def _firsts(wheres: list[str], most: int = 3) -> str:
    return ", ".join(wheres[:most]) + (f", … {len(wheres) - most} more"
                                       if len(wheres) > most else "")


def _answer_rule(rows: list[tuple[str, dict]], answer_is: str | None, file: str
                 ) -> tuple[list[tuple[str, dict]], str | None]:
    """`answer`/`response` beside a reference are the app's answers (not imported); alone,
    `answer` is the expected answer (RAGAS' and Phoenix's `question,answer` datasets,
    Inspect's examples) and `response` the app's, unless `--answer-is` says otherwise.
    The line says which was assumed."""
    keys = [k for k in ("answer", "response")
            if any(isinstance(r, dict) and r.get(k) is not None for _, r in rows)]
    if not keys:
        if answer_is is not None:
            raise UserError("the file has no `answer` or `response` column", file=file,
                            field="{answer_is}", opts=_ANSWER_IS)
        return rows, None
    has_ref = any(isinstance(r, dict) and r.get("reference_answer") for _, r in rows)
    col = keys[0]
    as_reference = (answer_is == "reference") if answer_is else (col == "answer" and not has_ref)
    if as_reference and has_ref:
        raise UserError(f"{{answer_is}} 'reference': the file already has a reference column; "
                        f"its `{col}` cannot be a second one", file=file, field="{answer_is}",
                        opts=_ANSWER_IS)
    if not as_reference:
        how = ("beside the reference column" if has_ref and not answer_is else
               "--answer-is response" if answer_is else "RAGAS' name for the app's answer")
        line = (f"{file}: not imported: {', '.join(keys)} (read as the answers the app gave, "
                f"{how}; abtest generates A's and B's)"
                + ("" if answer_is or has_ref else "; pass --answer-is reference if it is the "
                   "expected answer"))
        return [(w, {k: v for k, v in r.items() if k not in keys} if isinstance(r, dict) else r)
                for w, r in rows], line
    out = []
    for w, r in rows:
        if isinstance(r, dict) and r.get(col) is not None:
            value = r[col]
            if not isinstance(value, str) or not value.strip():
                got = "empty" if isinstance(value, str) else f"{type(value).__name__}, not text"
                raise UserError(f"the expected answer is {got}", file=file, where=w, field=col)
            r = {k: v for k, v in r.items() if k not in keys}
            r["reference_answer"] = value.strip()
        out.append((w, r))
    line = (f"{file}: read `{col}` as the expected answer (reference_answer, and its sentences "
            "as key points)" + (" (--answer-is reference)" if answer_is else
                                "; no reference column beside it; pass --answer-is response "
                                "if it holds the app's answers"))
    return out, line


def capture_input_rows(path: Path, question_var: str | None = None
                       ) -> list[tuple[str, dict]] | None:
    """An eval dataset's rows as `--retriever jsonl:` reads them (ids as its questions get,
    repeats kept once, each format's contexts under `contexts`; a promptfoo config's
    `vars.context`), or None for a file of abtest's own rows (ids given), which the
    retriever reads as they are."""

    path = Path(path)
    promptfoo = path.suffix.lower() in (".yaml", ".yml") or question_var is not None or (
        is_csv(path) and any(h.startswith("__") for h in csv_header(path)))
    doc = None if promptfoo else document_rows(path)
    if doc is None and not promptfoo:
        first = next(iter(read_records(path, "a capture file (JSONL, JSON or CSV)",
                                       name="capture file",
                                       known_fields=("id", "question", "user_input", "input"))),
                     None)
        fmt = None if first is None else row_format(first[1])
        if fmt is None and first is not None and is_csv(path) and any(
                h in PROMPTFOO_VARS for h in csv_header(path)):
            fmt = "promptfoo"   # a CSV of promptfoo vars, as `_rows_of` reads it
        if fmt in (None, "abtest"):
            return None
    got = question_rows(path, question_var)
    for where, row in got.rows:
        if not any(k in row for k in ("context", "contexts", "retrieved_contexts")):
            raise UserError(f"this {got.fmt} row has no contexts to import as the retrieval "
                            f"({CONTEXTS_OF.get(got.fmt, 'contexts')}); capture these questions "
                            "with a retriever (local:, http(s)://, python:)", file=str(path),
                            where=where)
    return got.rows


# where each format keeps the passages `--retriever jsonl:` imports
CONTEXTS_OF = {"deepeval": "retrieval_context or context", "llamaindex": "reference_contexts",
               "inspect": "Inspect samples hold none", "phoenix": "input.context",
               "ragas": "retrieved_contexts or contexts", "promptfoo": "vars.context",
               "input-expected": "Braintrust/Langfuse/Opik items hold none"}


def load_questions(path: Path, *, contexts_used: bool = False, question_var: str | None = None,
                   answer_is: str | None = None,
                   warn: Callable[[str], None] | None = None) -> list[Question]:
    """Questions for capture from a file in any format abtest reads (`question_rows`).
    What the import assumed or changed is said, one line each, and kept for the manifest
    (`QuestionList.notes`); fields a fixture has no place for are said, never dropped
    silently. `contexts_used` says this file is also the capture input (`--retriever jsonl:`
    the same file), whose contexts are then imported, not ignored."""

    path = Path(path)
    say = warn or (lambda line: print(f"abtest: {line}", file=sys.stderr))
    got = question_rows(path, question_var, answer_is)
    rows, grouped = fill_groups(got.rows, file=str(path), made=got.grouped)
    out = QuestionList(q for _, q in validate_question_rows(rows, path))
    if not out:
        why = (f" ({len(got.unmapped)} not imported; the first: {got.unmapped[0][0]}: "
               f"{got.unmapped[0][1]})" if got.unmapped else "")
        raise UserError(f"no questions found{why}", file=str(path))
    out.notes = got.notes or None
    if got.fmt != "abtest" or got.said:   # which format the file was read as, first
        say(f"{path}: read as {FORMAT_LABELS.get(got.fmt, got.fmt)}: {len(out)} question(s)")
    for line in got.said:
        say(line)
    if grouped:
        say(grouped)
    for line in group_notices(got.unmapped, "test"):   # listed, never dropped silently
        say(f"{path}: not imported: {line}")
    if contexts_used and got.fmt == "promptfoo":
        n = sum(1 for _, r in got.rows if "contexts" in r)
        say(f"{path}: vars.context of {n} test(s) is their frozen context, one chunk per "
            "passage, each chunk's id sha1(text)[:12]")
    extra = sorted({k for q in out for k in (q.model_extra or {})})
    if got.fmt == "llamaindex":   # its `contexts` are its reference_contexts, said once
        extra = [k for k in extra if k != "contexts"]
    if contexts_used:
        extra = [k for k in extra if k not in CAPTURE_FIELDS and not (
            got.fmt == "llamaindex" and k == "reference_contexts")]
    if extra:
        groups: dict[str, list[str]] = {}
        for k in extra:
            if k in got.reasons:
                reason = got.reasons[k]
            elif k in RAGAS_CONTEXTS or k in CAPTURE_FIELDS:
                reason = (f"the file's own {'vars.context' if got.fmt == 'promptfoo' else 'retrieval'}"
                          f": capture with --retriever jsonl:{path} to freeze it")
            else:
                reason = "no case field of that name"
            groups.setdefault(reason, []).append(k)
        named = {"contexts": "vars.context"} if got.fmt == "promptfoo" else {}
        say(f"{path}: not imported (a fixture has no place for them): "
            + "; ".join(f"{', '.join(named.get(k, k) for k in ks)} ({reason})"
                        for reason, ks in groups.items()))
    return out


def group_notices(notices: list[tuple[str, str]], unit: str) -> list[str]:
    """One line per thing not imported, with how many `unit`s it concerns and the first of
    them: a config of 40 tests says "vars.context" once, not 40 times."""
    by_what: dict[str, list[str]] = {}
    for where, what in notices:
        by_what.setdefault(what, []).append(where)
    return [f"{what} ({wheres[0]})" if len(wheres) == 1 else
            f"{what}: {len(wheres)} {unit}s ({_firsts(wheres)})"
            for what, wheres in by_what.items()]


def validate_question_rows(rows: Iterable[tuple[str, object]], path: Path) -> list[tuple[dict, "Question"]]:
    """Each (where, object) as a Question; one-line errors, duplicate ids refused."""

    out = []
    seen: set[str] = set()
    for where, obj in rows:
        if not isinstance(obj, dict):
            raise UserError("expected a JSON object", file=str(path), where=where)
        if isinstance(obj.get("id"), str) and obj["id"] not in where:
            where += f" (question {obj['id']})"
        try:
            q = Question.model_validate(obj)
        except ValidationError as exc:
            raise pydantic_error_line(exc, file=str(path), where=where) from None
        if q.id in seen:
            raise UserError(f"duplicate question id {q.id!r}", file=str(path), where=where, field="id")
        seen.add(q.id)
        out.append((obj, q))
    return out
