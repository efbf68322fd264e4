"""Deterministic checks: each kind with passing and failing answers, plus the paired table."""

from __future__ import annotations

import pytest

from abtest.prompts.checks import (
    CHECK_NAMES,
    CheckResult,
    extract_citations,
    looks_like_refusal,
    paired_check_table,
    run_checks,
    strip_json_fence,
    validate_case_patterns,
    validate_json_schema,
    validate_patterns,
)
from abtest.errors import UserError
from abtest.core.models import Case, ChecksSpec, Chunk, OutputSpec, Variant


def make_case(**kw) -> Case:
    base = dict(
        id="q1", question="how long do I have to return a damaged item",
        context=[Chunk(id="policy#1", text="Damaged goods may be returned within 30 days."),
                 Chunk(id="policy#2", text="Refunds are issued to the original card."),
                 Chunk(id="faq#7", text="Shipping is free over $50.")],
        corpus_version="2026-06-30", retriever="hybrid@k=3", answerable=True)
    base.update(kw)
    return Case(**base)


def make_variant(output: dict | None = None, **checks) -> Variant:
    return Variant(name="v", user="{{ question }}",
                   output=OutputSpec(**(output or {})), checks=ChecksSpec(**checks))


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


def check(answer: str, case: Case | None = None, variant: Variant | None = None,
          name: str = "json") -> CheckResult:
    return by_name(run_checks(answer, case or make_case(), variant or make_variant()))[name]


# --------------------------------------------------------------------------- shape

def test_every_check_reported_in_stable_order():
    results = run_checks("Thirty days [policy#1].", make_case(), make_variant())
    assert [r.name for r in results] == list(CHECK_NAMES)
    # nothing configured: json, present, accuracy, must_not_say, length not applicable
    d = by_name(results)
    assert d["json"].passed is None
    assert d["citations_present"].passed is None
    assert d["citation_accuracy"].passed is None
    assert d["must_not_say"].passed is None
    assert d["length"].passed is None
    assert d["citations_resolve"].passed is True


# --------------------------------------------------------------------------- json

JSON_V = dict(format="json", required_keys=["answer", "citations"])


def test_json_ok():
    r = check('{"answer": "30 days", "citations": ["policy#1"]}', variant=make_variant(JSON_V))
    assert r.passed is True
    assert r.data["fenced"] is False


def test_json_missing_key_named():
    r = check('{"answer": "30 days"}', variant=make_variant(JSON_V))
    assert r.passed is False
    assert "'citations'" in r.detail
    assert r.data["missing_keys"] == ["citations"]


def test_json_not_parseable():
    r = check("The answer is 30 days.", variant=make_variant(JSON_V))
    assert r.passed is False
    assert "not parseable" in r.detail


def test_json_nan_is_not_json():
    r = check('{"answer": NaN, "citations": []}', variant=make_variant(JSON_V))
    assert r.passed is False


def test_json_fenced_ok():
    ans = '```json\n{"answer": "30 days", "citations": ["policy#1"]}\n```\n'
    r = check(ans, variant=make_variant(JSON_V))
    assert r.passed is True and r.data["fenced"] is True
    assert strip_json_fence('```\n[1, 2]\n```') == ("[1, 2]", True)
    # a fence in another language is not stripped
    assert strip_json_fence('```python\n{}\n```')[1] is False


def test_json_top_level_not_object():
    r = check('["answer", "citations"]', variant=make_variant(JSON_V))
    assert r.passed is False and "not an object" in r.detail


SCHEMA = {
    "type": "object",
    "required": ["answer", "confidence"],
    "additionalProperties": False,
    "properties": {
        "answer": {"type": "string"},
        "confidence": {"type": "string", "enum": ["low", "medium", "high"]},
        "citations": {"type": "array", "items": {"type": "string"}},
        "score": {"type": "integer"},
    },
}


def test_schema_ok():
    r = check('{"answer": "x", "confidence": "high", "citations": ["a"], "score": 3.0}',
              variant=make_variant(dict(format="json", json_schema=SCHEMA)))
    assert r.passed is True, r.detail


def test_schema_type_mismatch():
    r = check('{"answer": 30, "confidence": "high"}',
              variant=make_variant(dict(format="json", json_schema=SCHEMA)))
    assert r.passed is False
    assert "$.answer" in r.detail and "expected string" in r.detail


@pytest.mark.parametrize("answer,fragment", [
    ('{"answer": "x", "confidence": "very"}', "not one of"),
    ('{"answer": "x"}', "missing required key 'confidence'"),
    ('{"answer": "x", "confidence": "low", "extra": 1}', "unexpected key 'extra'"),
    ('{"answer": "x", "confidence": "low", "citations": ["a", 2]}', "$.citations[1]"),
    ('{"answer": "x", "confidence": "low", "score": true}', "expected integer, got boolean"),
])
def test_schema_violations(answer, fragment):
    r = check(answer, variant=make_variant(dict(format="json", json_schema=SCHEMA)))
    assert r.passed is False
    assert fragment in r.detail
    assert r.data["schema_errors"]


def test_schema_enum_json_equality():
    assert validate_json_schema(True, {"enum": [1]})  # true is not 1 in JSON
    assert not validate_json_schema(1.0, {"enum": [1]})


def test_unsupported_schema_keyword_rejected_at_load():
    v = make_variant(dict(format="json", json_schema={"type": "object", "oneOf": []}))
    with pytest.raises(UserError) as e:
        validate_patterns(v)
    assert e.value.field == "output.json_schema" and "oneOf" in str(e.value)


def test_required_keys_on_text_format_rejected():
    with pytest.raises(UserError) as e:
        validate_patterns(make_variant(dict(format="text", required_keys=["answer"])))
    assert e.value.field == "output.format"


# --------------------------------------------------------------------------- citations

def test_citation_resolves():
    r = check("Within 30 days [policy#1].", name="citations_resolve")
    assert r.passed is True
    assert r.data == {"cited": ["policy#1"], "dangling": []}


def test_dangling_citation():
    r = check("Within 30 days [policy#1] [policy#9].", name="citations_resolve")
    assert r.passed is False
    assert r.data["dangling"] == ["policy#9"]
    assert "policy#9" in r.detail


def test_multiple_ids_in_one_marker():
    ids = [c.id for c in make_case().context]
    assert extract_citations("See [policy#1, policy#2; faq#7].", r"\[([^\[\]]+)\]", ids) == \
        ["policy#1", "policy#2", "faq#7"]
    assert extract_citations("See [policy#1][policy#2] and [policy#1].", r"\[([^\[\]]+)\]", ids) == \
        ["policy#1", "policy#2"]
    r = check("See [policy#1, policy#2].", name="citations_resolve")
    assert r.passed is True and r.data["cited"] == ["policy#1", "policy#2"]


def test_whole_match_when_pattern_has_no_group_and_known_id_with_comma():
    assert extract_citations("per doc:12 and doc:3", r"doc:\d+") == ["doc:12", "doc:3"]
    assert extract_citations("[a,b]", r"\[([^\[\]]+)\]", ["a,b"]) == ["a,b"]
    # JSON list of ids is read with the default pattern
    assert extract_citations('{"citations": ["policy#1", "faq#7"]}', r"\[([^\[\]]+)\]") == \
        ["policy#1", "faq#7"]


def test_no_citations_not_required_is_not_applicable():
    d = by_name(run_checks("Within 30 days.", make_case(), make_variant()))
    assert d["citations_resolve"].passed is None
    assert d["citations_present"].passed is None


def test_no_citations_when_required():
    d = by_name(run_checks("Within 30 days.", make_case(), make_variant(require_citations=True)))
    assert d["citations_present"].passed is False
    assert d["citations_present"].data["missing"] is True
    assert d["citations_resolve"].passed is None  # nothing to resolve; present reports it


def test_citations_present_when_required():
    r = check("Within 30 days [policy#1].", variant=make_variant(require_citations=True),
              name="citations_present")
    assert r.passed is True and r.data["missing"] is False


def test_refusal_does_not_require_citations():
    v = make_variant(require_citations=True)
    r = check("I don\u2019t know based on the provided documents.", variant=v,
              name="citations_present")
    assert r.passed is None
    assert r.data["refusal"] is True


@pytest.mark.parametrize("text,expected", [
    ("I don't know.", True),
    ("I DO NOT KNOW based on these documents", True),
    ("That is not in the provided context.", True),
    ("I cannot answer that from the documents.", True),
    ("There is no information about warranties.", True),
    ("I'm unable to answer this question.", True),
    ("I don't have enough information to say.", True),
    ("Damaged goods may be returned within 30 days [policy#1].", False),
    ("You know the drill: 30 days.", False),
    ("", False),
])
def test_looks_like_refusal(text, expected):
    assert looks_like_refusal(text) is expected


def test_invalid_citation_pattern_rejected():
    with pytest.raises(UserError) as e:
        validate_patterns(make_variant(citation_pattern="[unclosed("))
    assert e.value.field == "checks.citation_pattern"
    assert e.value.file is None
    assert "[unclosed(" in str(e.value)


# --------------------------------------------------------------------------- citation accuracy

def test_citation_accuracy_full_recall_partial_precision():
    case = make_case(expected_citations=["policy#1"])
    r = check("30 days [policy#1][faq#7].", case=case, name="citation_accuracy")
    assert r.passed is True
    assert r.data["recall"] == 1.0 and r.data["precision"] == 0.5
    assert r.data["extra"] == ["faq#7"] and r.data["missing"] == []


def test_citation_accuracy_missing_and_dangling_reported_separately():
    case = make_case(expected_citations=["policy#1", "policy#2"])
    r = check("30 days [policy#1] [ghost#1].", case=case, name="citation_accuracy")
    assert r.passed is False
    assert r.data["recall"] == 0.5 and r.data["precision"] == 0.5
    assert r.data["missing"] == ["policy#2"]
    assert r.data["dangling"] == ["ghost#1"]
    assert r.data["expected"] == ["policy#1", "policy#2"]
    assert r.data["cited"] == ["policy#1", "ghost#1"]


def test_citation_accuracy_nothing_cited():
    r = check("30 days.", case=make_case(expected_citations=["policy#1"]), name="citation_accuracy")
    assert r.passed is False
    assert r.data["recall"] == 0.0 and r.data["precision"] is None


def test_citation_accuracy_not_applicable_without_expected():
    assert check("x [policy#1]", case=make_case(expected_citations=[]),
                 name="citation_accuracy").passed is None


# --------------------------------------------------------------------------- must_not_say

def test_banned_phrase_hit_case_insensitive():
    r = check("SURE, within 30 days.", variant=make_variant(must_not_say=["sure"]),
              name="must_not_say")
    assert r.passed is False
    assert r.data["hits"][0]["phrase"] == "sure"
    assert r.data["hits"][0]["match"] == "SURE"


def test_banned_phrase_word_boundary_no_false_hit():
    r = check("Rest assured, within 30 days.", variant=make_variant(must_not_say=["sure"]),
              name="must_not_say")
    assert r.passed is True and r.data["hits"] == []


def test_banned_phrase_non_word_edges_and_whitespace():
    v = make_variant(must_not_say=["$50", "as an AI"])
    assert check("Free over US$50.", variant=v, name="must_not_say").passed is False
    assert check("As  an\nAI model I think", variant=v, name="must_not_say").passed is False
    assert check("as an AIM member", variant=v, name="must_not_say").passed is True


def test_banned_phrase_apostrophes():
    v = make_variant(must_not_say=["we don't refund"])
    assert check("Sorry, we don\u2019t refund that.", variant=v, name="must_not_say").passed is False


def test_case_must_not_say_merged():
    case = make_case(must_not_say=["60 days"])
    r = check("You have 60 days.", case=case, variant=make_variant(must_not_say=["sure"]),
              name="must_not_say")
    assert r.passed is False and [h["phrase"] for h in r.data["hits"]] == ["60 days"]


def test_regex_prefix():
    v = make_variant(must_not_say=[r"re:\b\d{2,}\s*days?\b"])
    assert check("within 14 Days", variant=v, name="must_not_say").passed is False
    assert check("within a week", variant=v, name="must_not_say").passed is True


def test_invalid_regex_raises_user_error():
    v = make_variant(must_not_say=["re:(unclosed"])
    with pytest.raises(UserError) as e:
        validate_patterns(v)
    assert "re:(unclosed" in str(e.value) and e.value.field == "checks.must_not_say"
    with pytest.raises(UserError):
        run_checks("anything", make_case(), v)


def test_invalid_regex_in_case_names_case():
    case = make_case(must_not_say=["re:[bad"])
    with pytest.raises(UserError) as e:
        validate_case_patterns(case)
    assert "q1" in str(e.value) and "re:[bad" in str(e.value)


# --------------------------------------------------------------------------- length

def test_length_chars():
    v = make_variant(length=(10, 40))
    assert check("Within thirty days of delivery.", variant=v, name="length").passed is True
    too_long = check("x" * 41, variant=v, name="length")
    assert too_long.passed is False and "41 chars > max 40" in too_long.detail
    too_short = check("ok", variant=v, name="length")
    assert too_short.passed is False and "2 chars < min 10" in too_short.detail
    # inclusive bounds; surrounding whitespace not counted
    assert check("  " + "y" * 40 + "\n", variant=v, name="length").passed is True


def test_length_words():
    v = make_variant(length_words=(2, 4))
    assert check("thirty days", variant=v, name="length").passed is True
    r = check("you have thirty days to return", variant=v, name="length")
    assert r.passed is False and "6 words > max 4" in r.detail and r.data["words"] == 6


def test_bad_length_bounds_rejected():
    with pytest.raises(UserError) as e:
        validate_patterns(make_variant(length=(10, 5)))
    assert e.value.field == "checks.length"


def test_valid_variant_passes_validation():
    validate_patterns(make_variant(dict(format="json", required_keys=["answer"],
                                        json_schema=SCHEMA),
                                   must_not_say=["sure", r"re:as an (ai|llm)"],
                                   length=(1, 1200)))


# --------------------------------------------------------------------------- paired table

def R(name: str, passed: bool | None) -> CheckResult:
    return CheckResult(name=name, passed=passed)


def test_paired_table_counts_and_newly_failing():
    a = {
        "q1": [R("length", True), R("citations_resolve", True)],
        "q2": [R("length", True), R("citations_resolve", None)],
        "q3": [R("length", False), R("citations_resolve", False)],
        "q4": [R("length", False), R("citations_resolve", True)],
        "q5": [R("length", True), R("citations_resolve", True)],
        "q_only_a": [R("length", True)],
    }
    b = {
        "q1": [R("length", True), R("citations_resolve", False)],
        "q2": [R("length", False), R("citations_resolve", True)],
        "q3": [R("length", True), R("citations_resolve", False)],
        "q4": [R("length", False), R("citations_resolve", True)],
        "q5": [R("length", False), R("citations_resolve", True)],
        "q_only_b": [R("length", False)],
    }
    t = paired_check_table(a, b)
    ln = t["length"]
    assert (ln.n, ln.n11, ln.n10, ln.n01, ln.n00) == (5, 1, 2, 1, 1)
    assert ln.pass_rate_a == pytest.approx(3 / 5) and ln.pass_rate_b == pytest.approx(2 / 5)
    assert ln.newly_failing == ["q2", "q5"]
    assert ln.newly_passing == ["q3"]

    cr = t["citations_resolve"]  # q2 not applicable on A -> excluded from the pairs
    assert (cr.n, cr.n11, cr.n10, cr.n01, cr.n00) == (4, 2, 1, 0, 1)
    assert cr.n_a_applicable == 4 and cr.n_b_applicable == 5
    assert cr.newly_failing == ["q1"]
    assert "json" not in t  # never reported -> no row


def test_paired_table_from_run_checks_and_dicts():
    case = make_case(expected_citations=["policy#1"])
    v = make_variant(require_citations=True)
    a = {"q1": run_checks("30 days [policy#1].", case, v)}
    b = {"q1": [r.model_dump() for r in run_checks("30 days.", case, v)]}
    t = paired_check_table(a, b)
    assert t["citations_present"].newly_failing == ["q1"]
    assert t["citation_accuracy"].n10 == 1
    assert t["json"].n == 0 and t["json"].pass_rate_a is None
    assert t["citations_resolve"].n == 0  # B cites nothing -> not applicable on B


def test_refusal_detector_ignores_ordinary_instructions():
    assert not looks_like_refusal("If you cannot find your receipt, contact support [faq#7].")


def test_paired_check_stats_when_stats_available():
    stats = pytest.importorskip("abtest.stats")
    assert hasattr(stats, "mcnemar")
    from abtest.prompts.checks import paired_check_stats
    a = {f"q{i}": [R("length", True)] for i in range(10)}
    b = {f"q{i}": [R("length", i >= 6)] for i in range(10)}
    out = paired_check_stats(paired_check_table(a, b))
    assert 0.0 <= out["length"].p_value <= 1.0
    assert "json" not in out
