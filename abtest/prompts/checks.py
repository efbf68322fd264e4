"""Deterministic checks run on every generation before any judge.

Pure functions, zero LLM calls. `run_checks` always returns one `CheckResult` per
name in `CHECK_NAMES`, in that order; `passed is None` means "not applicable"
(e.g. the JSON check on a text variant), so every generation has the same rows.

Check names (stable; stored and reported):

- ``json``               output.format == "json": parses (a whole-answer ```json fence
                         is stripped), has every required key, matches output.json_schema
- ``citations_resolve``  every id cited with checks.citation_pattern is a context chunk id
- ``citations_present``  checks.require_citations and the answer is not a refusal:
                         at least one citation
- ``citation_accuracy``  case.expected_citations non-empty: all expected ids cited (recall);
                         precision/recall reported
- ``must_not_say``       none of the banned phrases (variant + case) occurs
- ``length``             chars within checks.length, words within checks.length_words

JSON Schema support is a deliberately small subset (no third-party dependency):
``type`` (string or list), ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties`` (bool or schema), ``items`` (schema), ``minItems``,
``maxItems``, ``minLength``, ``maxLength``, ``minimum``, ``maximum``, ``pattern``;
annotations (title, description, $schema, ...) are ignored. Any other keyword is
rejected at load time by `validate_patterns` rather than silently ignored.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field

from abtest.errors import UserError
from abtest.core.models import Case, Variant
from abtest.stats import mcnemar  # noqa: PLC0415 — optional, lazily imported

__all__ = [
    "CHECK_NAMES",
    "CheckResult",
    "CheckSummary",
    "run_checks",
    "validate_patterns",
    "validate_case_patterns",
    "looks_like_refusal",
    "extract_citations",
    "strip_json_fence",
    "validate_json_schema",
    "paired_check_table",
    "paired_check_stats",
]

CHECK_NAMES = ("json", "citations_resolve", "citations_present", "citation_accuracy",
               "must_not_say", "length")

REGEX_PREFIX = "re:"


class CheckResult(BaseModel):
    name: str
    passed: bool | None = Field(description="None = not applicable to this generation")
    detail: str = ""
    data: dict[str, Any] = {}


class CheckSummary(BaseModel):
    """Paired summary of one check over the cases where both sides are applicable."""

    name: str
    n: int = Field(description="cases where the check applied to both A and B")
    n_a_applicable: int
    n_b_applicable: int
    pass_rate_a: float | None = Field(description="A's passes / A's applicable answers")
    pass_rate_b: float | None = Field(description="B's passes / B's applicable answers")
    n_a_pass: int = 0
    n_b_pass: int = 0
    n11: int = Field(description="both pass")
    n10: int = Field(description="A passes, B fails")
    n01: int = Field(description="A fails, B passes")
    n00: int = Field(description="both fail")
    newly_failing: list[str] = Field(description="case ids passing in A and failing in B")
    newly_passing: list[str] = Field(description="case ids failing in A and passing in B")


# --------------------------------------------------------------------------- refusals

_REFUSAL_PHRASES = (
    "i don't know",
    "i do not know",
    "i dont know",
    "not in the provided",
    "not in the context",
    "not contained in the",
    "cannot answer",
    "can't answer",
    "can not answer",
    "unable to answer",
    "not able to answer",
    "no information",
    "not enough information",
    "insufficient information",
    "don't have enough information",
    "do not have enough information",
    "don't have information",
    "do not have information",
    "doesn't contain information",
    "does not contain information",
    "does not provide information",
    "doesn't provide information",
    "do not contain the answer",
    "does not contain the answer",
    "doesn't contain the answer",
    "not mentioned in the",
    "i'm not able to determine",
    "cannot be determined from",
)
_REFUSAL_RE = re.compile(
    "|".join(r"(?<!\w)" + re.escape(p).replace(r"\ ", r"\s+") for p in _REFUSAL_PHRASES),
    re.IGNORECASE,
)


def _normalize_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("\u02bc", "'")


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
_COURTESY_RE = re.compile(r"\b(sorry|apologi[sz]e|please|feel free|let me know|hope this helps)\b",
                          re.IGNORECASE)


def looks_like_refusal(text: str) -> bool:
    """True when the text reads like an abstention and nothing else: a refusal phrase ("I
    don't know", "not in the provided …"), and every other sentence of four words or more
    is a refusal or a courtesy too. "I do not know for certain. The depot opens at 9am."
    is an answer, not a refusal.

    A cheap, case-insensitive detector used only to excuse missing citations; the
    abstention judge decides abstention.
    """
    if not text:
        return False
    t = _normalize_quotes(text).strip()
    if _REFUSAL_RE.search(t) is None:
        return False
    return all(len(sent.split()) < 4 or _REFUSAL_RE.search(sent) or _COURTESY_RE.search(sent)
               for sent in _SENTENCE_SPLIT.split(t))


# --------------------------------------------------------------------------- patterns

@lru_cache(maxsize=512)
def _compile_citation_pattern(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise UserError(f"invalid citation_pattern {pattern!r}: {exc}",
                        field="checks.citation_pattern") from None


@lru_cache(maxsize=2048)
def _compile_phrase(phrase: str, field: str = "must_not_say",
                    where: str | None = None) -> re.Pattern[str]:
    """A banned phrase as a case-insensitive regex.

    ``re:…`` is a raw regex. Otherwise the phrase is literal, whitespace-flexible and
    apostrophe-tolerant, with word boundaries only on edges that are word characters
    ("sure" does not hit "assured"; "$5" or "!!!" match wherever they occur).
    """
    if phrase.startswith(REGEX_PREFIX):
        body = phrase[len(REGEX_PREFIX):]
        if not body.strip():
            raise UserError(f"empty regex in banned phrase {phrase!r}", field=field, where=where)
        try:
            return re.compile(body, re.IGNORECASE)
        except re.error as exc:
            raise UserError(f"invalid regex in banned phrase {phrase!r}: {exc}",
                            field=field, where=where) from None
    text = _normalize_quotes(phrase).strip()
    if not text:
        raise UserError("blank banned phrase", field=field, where=where)
    parts = []
    for token in re.split(r"(\s+)", text):
        if not token:
            continue
        if token.isspace():
            parts.append(r"\s+")
        else:
            parts.append(re.escape(token).replace("'", "['\u2019\u2018\u02bc]"))
    body = "".join(parts)
    left = r"(?<!\w)" if re.match(r"\w", text[0]) else ""
    right = r"(?!\w)" if re.match(r"\w", text[-1]) else ""
    return re.compile(left + body + right, re.IGNORECASE)


def _phrase_list(phrases: Iterable[str] | None) -> list[str]:
    return [p for p in (phrases or []) if p is not None]


def validate_patterns(variant: Variant) -> None:
    """Reject a variant whose deterministic checks could not run. Call at load time.

    Raises `UserError` (file=None; the caller adds the file) naming the field.
    """
    _compile_citation_pattern(variant.checks.citation_pattern)
    for phrase in _phrase_list(variant.checks.must_not_say):
        _compile_phrase(phrase, "checks.must_not_say")
    for fld, bounds in (("checks.length", variant.checks.length),
                        ("checks.length_words", variant.checks.length_words)):
        if bounds is not None:
            lo, hi = bounds
            if lo < 0 or hi < lo:
                raise UserError(f"bounds must satisfy 0 <= min <= max, got [{lo}, {hi}]",
                                field=fld)
    out = variant.output
    if out.format != "json" and (out.required_keys or out.json_schema):
        raise UserError("required_keys / json_schema need output.format: json",
                        field="output.format")
    if out.json_schema is not None:
        _check_schema_supported(out.json_schema, "output.json_schema")


def validate_case_patterns(case: Case) -> None:
    """Reject a case whose own `must_not_say` holds an invalid ``re:`` pattern."""
    for phrase in _phrase_list(case.must_not_say):
        _compile_phrase(phrase, "must_not_say", f"case {case.id}")


# --------------------------------------------------------------------------- citations

_ID_SPLIT = re.compile(r"\s*[,;]\s*")
_EDGE_STRIP = " \t\r\n\"'`"


def extract_citations(answer: str, pattern: str, context_ids: Iterable[str] = ()) -> list[str]:
    """Cited ids in order of first appearance, de-duplicated.

    Group 1 of each match if the pattern has a group, else the whole match. A marker
    may hold several ids separated by commas or semicolons ("[a, b]"); a marker whose
    whole content is a known context id is kept whole even if it contains a comma.
    Surrounding quotes/backticks are stripped (so a JSON list `["a", "b"]` works).
    """
    rx = _compile_citation_pattern(pattern)
    known = set(context_ids)
    out: list[str] = []
    seen: set[str] = set()
    for m in rx.finditer(answer or ""):
        raw = m.group(1) if rx.groups and m.group(1) is not None else m.group(0)
        raw = raw.strip(_EDGE_STRIP)
        pieces = [raw] if raw in known else _ID_SPLIT.split(raw)
        for piece in pieces:
            cid = piece.strip(_EDGE_STRIP)
            if cid and cid not in seen:
                seen.add(cid)
                out.append(cid)
    return out


# --------------------------------------------------------------------------- JSON

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n?(.*?)\r?\n?[ \t]*```", re.S)


def strip_json_fence(answer: str) -> tuple[str, bool]:
    """Strip a fence wrapping the *whole* answer (```json … ``` or bare ``` … ```)."""
    s = (answer or "").strip()
    m = _FENCE_RE.fullmatch(s)
    if m and m.group(1).lower() in ("", "json"):
        return m.group(2).strip(), True
    return s, False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_ANNOTATIONS = {"title", "description", "$schema", "$id", "$comment", "default",
                "examples", "readOnly", "writeOnly", "deprecated"}
_SUPPORTED = {"type", "enum", "const", "properties", "required", "additionalProperties",
              "items", "minItems", "maxItems", "minLength", "maxLength", "minimum",
              "maximum", "pattern"}
_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}


def _check_schema_supported(schema: Any, field: str, path: str = "") -> None:
    where = path or "(root)"
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise UserError(f"schema at {where} must be an object", field=field)
    for key, val in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key not in _SUPPORTED:
            raise UserError(f"unsupported JSON Schema keyword {key!r} at {where} "
                            f"(supported: {', '.join(sorted(_SUPPORTED))})", field=field)
        if key == "type":
            types = [val] if isinstance(val, str) else val
            if not isinstance(types, list) or not types or any(t not in _TYPES for t in types):
                raise UserError(f"bad 'type' {val!r} at {where}", field=field)
        elif key == "properties":
            if not isinstance(val, Mapping):
                raise UserError(f"'properties' at {where} must be an object", field=field)
            for prop, sub in val.items():
                _check_schema_supported(sub, field, f"{path}.{prop}")
        elif key in ("additionalProperties", "items"):
            _check_schema_supported(val, field, f"{path}[]" if key == "items" else path)
        elif key == "required":
            if not isinstance(val, list) or not all(isinstance(k, str) for k in val):
                raise UserError(f"'required' at {where} must be a list of strings", field=field)
        elif key == "enum":
            if not isinstance(val, list):
                raise UserError(f"'enum' at {where} must be a list", field=field)
        elif key == "pattern":
            try:
                re.compile(val)
            except (re.error, TypeError) as exc:
                raise UserError(f"invalid 'pattern' at {where}: {exc}", field=field) from None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_type(value: Any, t: str) -> bool:
    actual = _json_type(value)
    if t == "number":
        return actual in ("integer", "number")
    if t == "integer":
        return actual == "integer" or (actual == "number" and math.isfinite(value)
                                       and float(value).is_integer())
    return actual == t


def _json_equal(a: Any, b: Any) -> bool:
    """Equality with JSON semantics: true != 1, 1 == 1.0, deep for containers."""
    ta, tb = _json_type(a), _json_type(b)
    num = ("integer", "number")
    if ta in num and tb in num:
        return a == b
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if ta == "object":
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return a == b


def validate_json_schema(value: Any, schema: Any, path: str = "$",
                         errors: list[str] | None = None, limit: int = 20) -> list[str]:
    """Validate `value` against the supported subset; returns readable violations."""
    errs = [] if errors is None else errors
    if len(errs) >= limit:
        return errs
    if schema is True or schema is None:
        return errs
    if schema is False:
        errs.append(f"{path}: not allowed")
        return errs
    if "type" in schema:
        types = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
        if not any(_is_type(value, t) for t in types):
            errs.append(f"{path}: expected {' or '.join(types)}, got {_json_type(value)}")
            return errs
    if "const" in schema and not _json_equal(value, schema["const"]):
        errs.append(f"{path}: must equal {schema['const']!r}")
    if "enum" in schema and not any(_json_equal(value, e) for e in schema["enum"]):
        errs.append(f"{path}: {value!r} not one of {schema['enum']!r}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errs.append(f"{path}: shorter than minLength {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errs.append(f"{path}: longer than maxLength {schema['maxLength']}")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            errs.append(f"{path}: does not match pattern {schema['pattern']!r}")
    if _json_type(value) in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errs.append(f"{path}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errs.append(f"{path}: {value} > maximum {schema['maximum']}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errs.append(f"{path}: fewer than minItems {schema['minItems']}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errs.append(f"{path}: more than maxItems {schema['maxItems']}")
        if "items" in schema:
            for i, item in enumerate(value):
                validate_json_schema(item, schema["items"], f"{path}[{i}]", errs, limit)
    if isinstance(value, dict):
        props = schema.get("properties", {}) or {}
        for key in schema.get("required", []) or []:
            if key not in value:
                errs.append(f"{path}: missing required key {key!r}")
        for key, sub in props.items():
            if key in value:
                validate_json_schema(value[key], sub, f"{path}.{key}", errs, limit)
        extra = schema.get("additionalProperties", True)
        if extra is not True:
            for key in value:
                if key in props:
                    continue
                if extra is False:
                    errs.append(f"{path}: unexpected key {key!r}")
                else:
                    validate_json_schema(value[key], extra, f"{path}.{key}", errs, limit)
    return errs[:limit]


def _check_json(answer: str, variant: Variant) -> CheckResult:
    out = variant.output
    if out.format != "json":
        return CheckResult(name="json", passed=None, detail="output format is text")
    body, fenced = strip_json_fence(answer)
    data: dict[str, Any] = {"fenced": fenced}
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        msg = str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"
        data["error"] = msg
        return CheckResult(name="json", passed=False, detail=f"not parseable as JSON: {msg}",
                           data=data)
    if out.required_keys:
        if not isinstance(value, dict):
            data["missing_keys"] = list(out.required_keys)
            return CheckResult(name="json", passed=False,
                               detail=f"top-level JSON is {_json_type(value)}, not an object "
                                      f"with the required keys", data=data)
        missing = [k for k in out.required_keys if k not in value]
        data["missing_keys"] = missing
        if missing:
            return CheckResult(name="json", passed=False,
                               detail="missing required key(s): " + ", ".join(map(repr, missing)),
                               data=data)
    if out.json_schema is not None:
        _check_schema_supported(out.json_schema, "output.json_schema")
        errs = validate_json_schema(value, out.json_schema)
        data["schema_errors"] = errs
        if errs:
            more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
            return CheckResult(name="json", passed=False,
                               detail=f"schema violation: {errs[0]}{more}", data=data)
    return CheckResult(name="json", passed=True,
                       detail="valid JSON" + (" (fenced)" if fenced else ""), data=data)


# --------------------------------------------------------------------------- checks

def _check_citations(answer: str, case: Case, variant: Variant,
                     cited: list[str], refusal: bool) -> list[CheckResult]:
    context_ids = [c.id for c in case.context]
    known = set(context_ids)
    dangling = [c for c in cited if c not in known]
    required = variant.checks.require_citations

    # citations_resolve: only meaningful when something is cited; a missing citation
    # is citations_present's business, so an answer citing nothing is "not applicable".
    if not cited:
        why = "required but none cited (see citations_present)" if required else "nothing cited"
        resolve = CheckResult(name="citations_resolve", passed=None, detail=why,
                              data={"cited": [], "dangling": []})
    elif dangling:
        resolve = CheckResult(name="citations_resolve", passed=False,
                              detail="cited id(s) not in the context: "
                                     + ", ".join(map(repr, dangling)),
                              data={"cited": cited, "dangling": dangling})
    else:
        resolve = CheckResult(name="citations_resolve", passed=True,
                              detail=f"{len(cited)} cited id(s) all in the context",
                              data={"cited": cited, "dangling": []})

    if not required:
        present = CheckResult(name="citations_present", passed=None,
                              detail="citations not required",
                              data={"missing": not cited, "refusal": refusal})
    elif refusal and not cited:
        present = CheckResult(name="citations_present", passed=None,
                              detail="refusal; citations not required",
                              data={"missing": True, "refusal": True})
    elif cited:
        present = CheckResult(name="citations_present", passed=True,
                              detail=f"{len(cited)} citation(s)",
                              data={"missing": False, "refusal": refusal})
    else:
        present = CheckResult(name="citations_present", passed=False,
                              detail="citations required but none found",
                              data={"missing": True, "refusal": refusal})

    expected = list(dict.fromkeys(case.expected_citations or []))
    if not expected:
        accuracy = CheckResult(name="citation_accuracy", passed=None,
                               detail="case has no expected citations")
    else:
        exp_set, cited_set = set(expected), set(cited)
        hit = [c for c in cited if c in exp_set]
        missing = [e for e in expected if e not in cited_set]
        extra = [c for c in cited if c not in exp_set and c in known]
        precision = len(hit) / len(cited) if cited else None
        recall = len(hit) / len(expected)
        data = {"precision": precision, "recall": recall, "expected": expected,
                "cited": cited, "missing": missing, "dangling": dangling, "extra": extra}
        p_txt = "n/a" if precision is None else f"{precision:.2f}"
        detail = f"recall {recall:.2f}, precision {p_txt}"
        if missing:
            detail += "; missing " + ", ".join(map(repr, missing))
        if dangling:
            detail += "; dangling " + ", ".join(map(repr, dangling))
        accuracy = CheckResult(name="citation_accuracy", passed=not missing, detail=detail,
                               data=data)
    return [resolve, present, accuracy]


def _check_must_not_say(answer: str, case: Case, variant: Variant) -> CheckResult:
    sources: list[tuple[str, str, str | None]] = [
        (p, "checks.must_not_say", None) for p in _phrase_list(variant.checks.must_not_say)]
    sources += [(p, "must_not_say", f"case {case.id}") for p in _phrase_list(case.must_not_say)]
    sources = [s for s in sources if s[0].strip()]
    if not sources:
        return CheckResult(name="must_not_say", passed=None, detail="no banned phrases",
                           data={"hits": []})
    text = answer or ""
    norm = _normalize_quotes(text)
    hits: list[dict[str, Any]] = []
    seen: set[str] = set()
    for phrase, field, where in sources:
        if phrase in seen:
            continue
        seen.add(phrase)
        rx = _compile_phrase(phrase, field, where)
        # literal phrases are quote-normalized on both sides; regexes see the raw text
        m = rx.search(text if phrase.startswith(REGEX_PREFIX) else norm)
        if m:
            hits.append({"phrase": phrase, "match": m.group(0), "start": m.start()})
    if hits:
        return CheckResult(name="must_not_say", passed=False,
                           detail="banned phrase(s): " + ", ".join(repr(h["phrase"]) for h in hits),
                           data={"hits": hits})
    return CheckResult(name="must_not_say", passed=True,
                       detail=f"none of {len(seen)} banned phrase(s)", data={"hits": []})


def _check_length(answer: str, variant: Variant) -> CheckResult:
    chars_b, words_b = variant.checks.length, variant.checks.length_words
    text = (answer or "").strip()
    n_chars, n_words = len(text), len(text.split())
    data: dict[str, Any] = {"chars": n_chars, "words": n_words,
                            "length": list(chars_b) if chars_b else None,
                            "length_words": list(words_b) if words_b else None}
    actual = f"{n_chars} chars, {n_words} words"
    if chars_b is None and words_b is None:
        return CheckResult(name="length", passed=None, detail=f"no bounds ({actual})", data=data)
    problems = []
    if chars_b is not None:
        lo, hi = chars_b
        if n_chars < lo:
            problems.append(f"{n_chars} chars < min {lo}")
        elif n_chars > hi:
            problems.append(f"{n_chars} chars > max {hi}")
    if words_b is not None:
        lo, hi = words_b
        if n_words < lo:
            problems.append(f"{n_words} words < min {lo}")
        elif n_words > hi:
            problems.append(f"{n_words} words > max {hi}")
    if problems:
        return CheckResult(name="length", passed=False, detail="; ".join(problems), data=data)
    return CheckResult(name="length", passed=True, detail=f"{actual} within bounds", data=data)


def run_checks(answer: str, case: Case, variant: Variant) -> list[CheckResult]:
    """All deterministic checks for one generation, one result per `CHECK_NAMES` entry.

    Raises `UserError` only for a bad pattern (invalid citation_pattern / ``re:``
    phrase / unsupported schema keyword) — `validate_patterns` catches those earlier.
    """
    answer = answer or ""
    cited = extract_citations(answer, variant.checks.citation_pattern,
                              [c.id for c in case.context])
    refusal = looks_like_refusal(answer)
    return [
        _check_json(answer, variant),
        *_check_citations(answer, case, variant, cited, refusal),
        _check_must_not_say(answer, case, variant),
        _check_length(answer, variant),
    ]


# --------------------------------------------------------------------------- paired table

def _name_passed(r: Any) -> tuple[str, bool | None]:
    if type(r) is tuple:  # (name, passed): the report's form, the cheapest to build
        return r
    if isinstance(r, CheckResult):
        return r.name, r.passed
    if isinstance(r, Mapping):
        return r["name"], r.get("passed")
    return r.name, r.passed


def _by_name(results: Iterable[Any]) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    for r in results or []:
        name, passed = _name_passed(r)
        out[name] = passed
    return out


def paired_check_table(results_a: Mapping[str, Iterable[Any]],
                       results_b: Mapping[str, Iterable[Any]]) -> dict[str, CheckSummary]:
    """Per check, each variant's pass rate over the answers it applies to, and the paired 2×2
    over cases present on both sides and applicable to both (a check only one variant
    defines keeps its pass rate and an empty table).

    Accepts `CheckResult`s, mappings with ``name`` / ``passed``, or (name, passed) pairs. Case ids present on
    one side only are ignored (they cannot be paired). No p-values here.
    """
    shared = sorted(set(results_a) & set(results_b))
    a_map = {cid: _by_name(results_a[cid]) for cid in shared}
    b_map = {cid: _by_name(results_b[cid]) for cid in shared}
    names: list[str] = list(CHECK_NAMES)
    for m in (a_map, b_map):
        for per_case in m.values():
            for check in per_case:
                if check not in names:
                    names.append(check)
    table: dict[str, CheckSummary] = {}
    for name in names:
        n11 = n10 = n01 = n00 = 0
        a_app = b_app = a_pass = b_pass = 0
        newly_failing: list[str] = []
        newly_passing: list[str] = []
        seen_any = False
        for cid in shared:
            pa, pb = a_map[cid].get(name), b_map[cid].get(name)
            if name in a_map[cid] or name in b_map[cid]:
                seen_any = True
            a_app += pa is not None
            b_app += pb is not None
            a_pass += pa is True
            b_pass += pb is True
            if pa is None or pb is None:
                continue
            if pa and pb:
                n11 += 1
            elif pa and not pb:
                n10 += 1
                newly_failing.append(cid)
            elif pb:
                n01 += 1
                newly_passing.append(cid)
            else:
                n00 += 1
        if not seen_any:
            continue
        n = n11 + n10 + n01 + n00
        table[name] = CheckSummary(
            name=name, n=n, n_a_applicable=a_app, n_b_applicable=b_app,
            pass_rate_a=a_pass / a_app if a_app else None,
            pass_rate_b=b_pass / b_app if b_app else None,
            n_a_pass=a_pass, n_b_pass=b_pass,
            n11=n11, n10=n10, n01=n01, n00=n00,
            newly_failing=newly_failing, newly_passing=newly_passing,
        )
    return table


def paired_check_stats(table: Mapping[str, CheckSummary], method: str = "midp") -> dict[str, Any]:
    """McNemar per check on the discordant pairs (n10 = A-only pass, n01 = B-only pass).

    Imports `abtest.stats` lazily so this module has no hard dependency on it. Checks
    with no applicable pairs are skipped. Holm adjustment is left to the caller.
    """

    return {name: mcnemar(s.n10, s.n01, method=method)
            for name, s in table.items() if s.n > 0}
