"""Eval datasets of LlamaIndex, DeepEval, Inspect and Phoenix, read as abtest questions, and
the one rule that says which format a file is.

Each tool's documentation says which of its fields holds the *expected* answer and which
the app's own output; an import follows it, because a gold answer read as an app's answer
is a reference thrown away, and an app's answer read as gold grades B against A's rival:

| source | question | expected answer → `reference_answer` | the app's output (not imported) | contexts (`--retriever jsonl:`) |
|---|---|---|---|---|
| LlamaIndex `LabelledRagDataset` | `query` | `reference_answer` | — | `reference_contexts` |
| LlamaIndex `QueryResponseDataset` | `queries[id]` | `responses[id]` | — | — |
| DeepEval goldens | `input` | `expected_output` | `actual_output` | `retrieval_context`, else `context` |
| Inspect `Sample` | `input` (text, or a chat's last user message) | `target` (the first, when a list) | — | — |
| Phoenix dataset examples | `input` object's question field | `output` object's answer field | — | — |
| Braintrust / Langfuse / Opik dataset items | `input` (text, an object's question field, or a chat) | `expected` (Langfuse: `expectedOutput`; Opik, beside an `input` object: `expected_output`) | — | — |

Detection never guesses: a row is read as a format only when its keys are that format's
(`row_format`); a file whose rows match none is refused with the formats tried and the
keys it has.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from abtest.errors import UserError
from abtest.core.records import is_csv, read_text
from abtest.imports.evalsets import is_promptfoo_test, is_ragas_row

# what the refusal lists, in the order tried
FORMATS_TRIED = (
    "abtest questions (id, question)",
    "RAGAS rows (question or user_input)",
    "promptfoo tests (vars, assert; a CSV with __expected columns)",
    "DeepEval goldens (input, expected_output, context, retrieval_context)",
    "Inspect samples (input, target)",
    "Phoenix dataset examples (input {…}, output {…})",
    "Braintrust/Langfuse/Opik dataset items (input, expected, expectedOutput or "
    "expected_output)",
    "LlamaIndex datasets ({\"examples\": [{query, reference_answer, …}]} or "
    "{\"queries\": {…}, \"responses\": {…}})")
DEEPEVAL_KEYS = ("expected_output", "actual_output", "retrieval_context", "context",
                 "additional_metadata", "comments", "tools_called", "expected_tools",
                 "source_file", "name")
DEEPEVAL_LISTS = ("context", "retrieval_context")
DEEPEVAL_NOT_IMPORTED = {
    "actual_output": "the answer the app gave; abtest generates A's and B's",
    "additional_metadata": "DeepEval metadata", "comments": "DeepEval comments",
    "tools_called": "tool calls", "expected_tools": "tool calls", "source_file": "DeepEval's "
    "source document", "name": "DeepEval's name"}
INSPECT_KEYS = ("target", "choices", "files", "setup", "sandbox")
INSPECT_NOT_IMPORTED = {"choices": "multiple-choice options",
                        "files": "files copied into a sandbox", "setup": "a sandbox setup",
                        "sandbox": "a sandbox", "metadata": "the sample's metadata"}
# a Phoenix example's input/output objects: the field holding the question / the answer
PHOENIX_QUESTION = ("question", "query", "input", "user_input", "query_str", "prompt",
                    "message", "text")
PHOENIX_ANSWER = ("output", "answer", "expected", "expected_output", "reference",
                  "reference_answer", "ground_truth", "response", "label")
# Braintrust's and Langfuse's dataset items: the gold answer's names
EXPECTED_KEYS = ("expected", "expectedOutput")
# Opik's dataset items: an `input` object beside an `expected_output` object (DeepEval's
# goldens have `expected_output` too, beside a text `input`)
OPIK_EXPECTED = "expected_output"
INPUT_EXPECTED_NOT_IMPORTED = {"metadata": "the item's metadata",
                               "sourceTraceId": "Langfuse bookkeeping",
                               "sourceObservationId": "Langfuse bookkeeping",
                               "datasetId": "Langfuse bookkeeping", "status": "Langfuse's "
                               "item status", "createdAt": "Langfuse bookkeeping",
                               "updatedAt": "Langfuse bookkeeping",
                               "created": "Braintrust bookkeeping",
                               "_xact_id": "Braintrust bookkeeping"}
# what each format is called in the line that says how a file was read
FORMAT_LABELS = {"ragas": "RAGAS rows", "promptfoo": "promptfoo tests",
                 "deepeval": "DeepEval goldens", "inspect": "Inspect samples",
                 "phoenix": "Phoenix dataset examples",
                 "input-expected": "Braintrust/Langfuse/Opik dataset items (input, expected)",
                 "llamaindex": "a LlamaIndex LabelledRagDataset",
                 "llamaindex-qr": "a LlamaIndex QueryResponseDataset",
                 "abtest": "abtest questions"}
LLAMAINDEX_NOT_IMPORTED = {"query_by": "who wrote the query",
                           "reference_answer_by": "who wrote the reference answer"}
# ground truths that say the answer is absent: RAGAS testsets write these for questions the
# corpus cannot answer (its "not present in context" family)
_ABSENT = re.compile(
    r"\b(?:is\s+)?not\s+(?:present|found|available|mentioned|given|provided|contained)\s+in\s+"
    r"(?:the\s+)?(?:given\s+|provided\s+)?(?:context|contexts|documents?|passages?)\b"
    r"|\bcannot\s+be\s+(?:answered|found|determined)\s+(?:from|with|based\s+on|using)\s+"
    r"(?:the\s+)?(?:given\s+|provided\s+)?(?:context|information|documents?)\b"
    r"|\bthe\s+(?:given\s+|provided\s+)?context\s+does\s+not\s+(?:contain|provide|mention)\s+"
    r"(?:the\s+)?(?:answer|information)\b", re.IGNORECASE)
ABSENT_MAX_CHARS = 200   # a longer reference that says so in passing still answers something


def says_absent(reference: str) -> bool:
    """A ground truth that says the context holds no answer (RAGAS' family of them)."""
    return len(reference) <= ABSENT_MAX_CHARS and bool(_ABSENT.search(reference))


# --------------------------------------------------------------------------- detection

def document_rows(path: Path) -> tuple[str, list[tuple[str, dict]]] | None:
    """(format, rows) of a file that is one LlamaIndex dataset document, else None (the
    caller reads it as rows). Rows are the examples, each with its own `where`."""

    if is_csv(path) or path.suffix.lower() in (".parquet", ".jsonl", ".yaml", ".yml"):
        return None
    text = read_text(path, "a questions file")
    if not text.lstrip().startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None   # JSON Lines, or broken: the record reader says which line
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("examples"), list) and doc["examples"] and all(
            isinstance(e, dict) and "query" in e for e in doc["examples"]):
        return "llamaindex", [(f"examples[{i}]", e) for i, e in enumerate(doc["examples"])]
    if set(doc) >= {"queries", "responses"} and isinstance(doc["queries"], dict) \
            and isinstance(doc["responses"], dict):
        rows = []
        for qid, q in doc["queries"].items():
            row = {"id": str(qid), "question": q}
            if qid in doc["responses"]:
                row["reference_answer"] = doc["responses"][qid]
            rows.append((f"queries[{qid!r}]", row))
        return "llamaindex-qr", rows
    return None


def row_format(row: dict) -> str | None:
    """The format one row's keys say it is, or None: "promptfoo", "phoenix", "deepeval",
    "input-expected", "inspect", "abtest" (an id and a question), "ragas" (a question or
    RAGAS columns). Only the keys that say what a row is count: others beside them (ids,
    tags, metrics) never stop a known format being recognised."""

    if is_promptfoo_test(row):
        return "promptfoo"
    if any(isinstance(k, str) and k.startswith("input_") for k in row) and (
            "example_id" in row or any(isinstance(k, str) and k.startswith("output_")
                                       for k in row)):
        return "phoenix"   # the dataset as Phoenix's UI downloads it: input_KEY, output_KEY
    if "input" in row and "question" not in row and "user_input" not in row:
        if any(k in row for k in EXPECTED_KEYS) and "output" not in row:
            return "input-expected"
        if isinstance(row["input"], dict):
            # an input object with an expected_output and no output is Opik's item, whose
            # gold answer a Phoenix reading (which looks in `output`) would have dropped
            return "input-expected" if OPIK_EXPECTED in row and "output" not in row \
                else "phoenix"
        if any(k in row for k in DEEPEVAL_KEYS):
            return "deepeval"
        return "inspect"
    if "id" in row and "question" in row:
        return "abtest"
    if is_ragas_row(row):
        return "ragas"
    return None


def refuse_unknown(path: Path, where: str, row: dict) -> UserError:
    keys = ", ".join(map(str, list(row)[:12])) or "nothing"
    return UserError(f"not a questions file abtest knows (tried: {'; '.join(FORMATS_TRIED)}); "
                     f"this row has: {keys}", file=str(path), where=where)


# --------------------------------------------------------------------------- mapping

def from_deepeval(row: dict, *, file: str, where: str) -> dict:
    """A DeepEval golden as a question row: `expected_output` the reference, the retrieval
    context (else the ideal `context`) the capture input."""
    out: dict[str, Any] = {"question": _text(row.get("input"), file, where, "input")}
    _copy_id(row, out, file, where)
    ref = row.get("expected_output")
    if ref is not None:
        out["reference_answer"] = _text(ref, file, where, "expected_output")
    for key in ("retrieval_context", "context"):
        if row.get(key) is not None:
            out["contexts"] = _text_list(row[key], file, where, key)
            break
    for k, v in row.items():
        if k not in ("input", "expected_output", "retrieval_context", "context", "id") \
                and v is not None:
            out[k] = v
    return out


def from_inspect(row: dict, *, file: str, where: str) -> tuple[dict, int]:
    """An Inspect sample as a question row, and how many targets it had (a list of targets
    are alternatives: the first is the reference)."""
    out: dict[str, Any] = {"question": _inspect_input(row.get("input"), file, where)}
    _copy_id(row, out, file, where)
    target, n = row.get("target"), 0
    if isinstance(target, list):
        texts = [t for t in target if isinstance(t, str) and t.strip()]
        if len(texts) != len(target):
            raise UserError("a target list holds text only", file=file, where=where,
                            field="target")
        n = len(texts)
        target = texts[0] if texts else None
    if target is not None:
        out["reference_answer"] = _text(target, file, where, "target")
        n = max(n, 1)
    for k, v in row.items():
        if k not in ("input", "target", "id") and v is not None:
            out[k] = v
    return out, n


def from_phoenix(row: dict, *, file: str, where: str) -> dict:
    """A Phoenix dataset example: the question from its `input` object, the expected
    answer from its `output` object (each a named field, or the object's only one). The UI's
    CSV download flattens them (`example_id`, `input_KEY`, `output_KEY`, `metadata_KEY`)."""
    if not isinstance(row.get("input"), dict):
        nested: dict[str, Any] = {"input": {}, "output": {}, "metadata": {}}
        for k, v in row.items():
            part, _, key = str(k).partition("_")
            if part in nested and key and v is not None:
                nested[part][key] = v
        if "example_id" in row:
            nested["id"] = row["example_id"]
        row = {k: v for k, v in nested.items() if v != {}}
        row.setdefault("input", {})
    inp = row["input"]
    out: dict[str, Any] = {"question": _object_question(inp, file, where, "input")}
    _copy_id(row, out, file, where)
    output = row.get("output")
    if isinstance(output, dict):
        akey = next((k for k in PHOENIX_ANSWER if output.get(k) is not None), None)
        if akey is None and len(output) == 1:
            akey = next(iter(output))
        if akey is not None:
            out["reference_answer"] = _text(output[akey], file, where, f"output.{akey}")
    elif isinstance(output, str):
        out["reference_answer"] = _text(output, file, where, "output")
    elif output is not None:
        raise UserError(f"expected an object or text, got {type(output).__name__}", file=file,
                        where=where, field="output")
    ctx = next((inp[k] for k in ("contexts", "context", "retrieved_contexts") if k in inp), None)
    if ctx is not None:
        out["contexts"] = _text_list(ctx, file, where, "input.context")
    meta = row.get("metadata")
    if isinstance(meta, dict) and meta:
        out["metadata"] = meta
    return out


def _object_question(inp: dict, file: str, where: str, field: str) -> str:
    """The question an input object holds: its question field (PHOENIX_QUESTION, whatever
    the value, so that a wrong one is blamed by its own name), or its only field."""
    qkey = next((k for k in PHOENIX_QUESTION if k in inp), None)
    if qkey is None and len(inp) == 1:
        qkey = next(iter(inp))
    if qkey is None:
        has = ", ".join(map(str, inp)) or "nothing"
        raise UserError(f"no question in the {field} object (looked for "
                        f"{', '.join(PHOENIX_QUESTION)}; it has {has})", file=file, where=where,
                        field=field)
    return _text(inp[qkey], file, where, f"{field}.{qkey}")


def from_input_expected(row: dict, *, file: str, where: str) -> dict:
    """A Braintrust, Langfuse or Opik dataset item: `input` the question (text, an object's
    question field, or a chat's last user message), `expected` (Langfuse's API:
    `expectedOutput`, Opik's `expected_output`) the gold answer (text, or an object's answer
    field, or its only field)."""
    inp = row.get("input")
    question = (_object_question(inp, file, where, "input") if isinstance(inp, dict)
                else _inspect_input(inp, file, where))
    out: dict[str, Any] = {"question": question}
    _copy_id(row, out, file, where)
    key = next((k for k in (*EXPECTED_KEYS, OPIK_EXPECTED) if row.get(k) is not None), None)
    if key is not None:
        gold = row[key]
        if isinstance(gold, dict):
            akey = next((k for k in PHOENIX_ANSWER if gold.get(k) is not None), None)
            if akey is None and len(gold) == 1:
                akey = next(iter(gold))
            if akey is None:
                has = ", ".join(map(str, gold)) or "nothing"
                raise UserError(f"no answer in the {key} object (looked for "
                                f"{', '.join(PHOENIX_ANSWER)}; it has {has})", file=file,
                                where=where, field=key)
            out["reference_answer"] = _text(gold[akey], file, where, f"{key}.{akey}")
        else:
            out["reference_answer"] = _text(gold, file, where, key)
    for k, v in row.items():
        if k not in ("input", "id", *EXPECTED_KEYS, OPIK_EXPECTED) and v is not None:
            out[k] = v
    return out


def from_llamaindex(row: dict, *, file: str, where: str) -> dict:
    """A LabelledRagDataset example: its reference contexts are the capture input (and say
    which questions were written from one passage: `group`)."""
    out: dict[str, Any] = {"question": _text(row.get("query"), file, where, "query")}
    ref = row.get("reference_answer")
    if ref is not None:
        out["reference_answer"] = _text(ref, file, where, "reference_answer")
    rc = row.get("reference_contexts")
    if rc is not None:
        out["contexts"] = _text_list(rc, file, where, "reference_contexts")
        out["reference_contexts"] = out["contexts"]
    for k, v in row.items():
        if k not in ("query", "reference_answer", "reference_contexts") and v is not None:
            out[k] = v
    return out


def _inspect_input(value: Any, file: str, where: str) -> str:
    """Inspect's `input`: text, or a chat whose last user message is the question."""
    if isinstance(value, list):
        users = [m for m in value if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            raise UserError("the chat has no user message", file=file, where=where,
                            field="input")
        content = users[-1].get("content")
        if isinstance(content, list):   # content parts: the text ones, in order
            content = "\n".join(p["text"] for p in content if isinstance(p, dict)
                                and p.get("type") == "text" and isinstance(p.get("text"), str))
        return _text(content, file, where, "input")
    return _text(value, file, where, "input")


def _copy_id(row: dict, out: dict, file: str, where: str) -> None:
    qid = row.get("id")
    if qid is None:
        return
    if isinstance(qid, bool) or not isinstance(qid, (str, int)):
        raise UserError(f"an id is text or a whole number, got {type(qid).__name__}", file=file,
                        where=where, field="id")
    out["id"] = str(qid)


def _text(value: Any, file: str, where: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        got = ("nothing" if value is None else "empty text" if isinstance(value, str)
               else _a(value))
        raise UserError(f"expected text, got {got}", file=file, where=where, field=field)
    return value


def _a(value: Any) -> str:
    return {dict: "an object", list: "a list", bool: "true/false", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _text_list(value: Any, file: str, where: str, field: str) -> list[str]:
    """A list of passages; one passage given as a string is a list of one."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise UserError("expected a list of text passages (or one passage as text)", file=file,
                        where=where, field=field)
    return value
