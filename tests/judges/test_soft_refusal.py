"""Issue 43: abstention is about the question asked.

An answer that declines the question is an abstention even when it adds true, cited side
facts (a soft refusal); a hedged answer that states an answer to the question is not. The
judge is asked exactly that (claims_extract_v3 / abstention_v3: `answers_question`) and its
verdict stands: the claims an answer makes no longer overrule it, and they are still checked
for faithfulness either way. Each through the real judge path with a scripted fake provider.
"""

from __future__ import annotations

import json

import pytest

from support.fakes import Brain

BOTH = ["faithfulness", "abstention"]
PLAIN = "I don't know based on the provided documents."
SOFT = "The documents do not say where Normandy is. Rollo was a Viking leader [c2]."
HEDGED = "I do not know for certain. Normandy is a region in France [c1]."
OFF_TOPIC = "Rollo was a Viking leader [c2]."          # true and cited, but not where Normandy is


def gateway(tmp_path):
    from abtest.llm import Gateway
    from abtest.store import Store

    return Gateway(Store(tmp_path / "s.duckdb"), concurrency=2, timeout_s=5, max_retries=1,
                   backoff_base_s=0.0)


def case():
    from support.fakes import small_cases

    return small_cases()[0]          # "Where is Normandy?" over c1 (Normandy) and c2 (Rollo)


def spec():
    from abtest.core.models import ModelSpec

    return ModelSpec(model="fake/judge")


def schema_names(brain) -> list[str]:
    return [c["req"]["response_format"]["json_schema"]["name"] for c in brain.calls]


def test_a_soft_refusal_is_an_abstention_and_its_side_fact_is_still_checked(tmp_path, brain):
    """The claim extraction finds the side fact ("Rollo was a Viking leader."), and until
    issue 43 that claim overruled the judge: the soft refusal counted as an answer."""
    from abtest import judges as J

    (faith, claims), (ab, _) = J.claims_and_abstention(gateway(tmp_path), spec(), case(), SOFT,
                                                      "B", BOTH)
    assert ab["verdict"] == "abstained" and ab["score"] == 1.0 and ab["error"] is None
    assert json.loads(ab["result_json"]) == {
        "method": "asked with the claim extraction", "judge_said": "abstained",
        "answers_question": False, "rationale": "it says the documents do not give the answer",
        "n_claims": 1}
    assert ab["rationale"] == "it says the documents do not give the answer"
    assert ab["prompt_sha256"] == J.load_prompt("claims_extract_v3").sha256
    # faithfulness as before: the side fact is a claim, checked against the context
    assert faith["verdict"] == "scored" and faith["score"] == 1.0
    assert claims == [{"claim": "Rollo was a Viking leader.", "verdict": "supported",
                       "chunk_id": "c2"}]
    assert json.loads(faith["result_json"])["answers_question"] is False
    assert schema_names(brain) == ["claims", "claimverdicts"]   # no call of its own


def test_a_hedged_answer_answers_the_question(tmp_path, brain):
    from abtest import judges as J

    (faith, claims), (ab, _) = J.claims_and_abstention(gateway(tmp_path), spec(), case(), HEDGED,
                                                      "B", BOTH)
    assert ab["verdict"] == "answered" and ab["score"] == 0.0
    assert json.loads(ab["result_json"])["answers_question"] is True
    assert faith["score"] == 1.0 and [c["claim"] for c in claims] == [
        "Normandy is a region in France."]


def _honest(verdicts: dict[str, tuple[bool, str]]):
    """A judge that answers `answers_question` as the prompt defines it, for each answer."""
    from support.fakes import _tag

    def override(messages, req):
        name = (req.get("response_format") or {}).get("json_schema", {}).get("name")
        prompt = messages[-1]["content"]
        if name in ("claims", "abstention"):
            answers, why = verdicts[_tag(prompt, "answer")]
            out = {"rationale": why, "answers_question": answers}
            return {**Brain().j_claims(prompt), **out} if name == "claims" else out
        return None
    return override


HONEST = {PLAIN: (False, "a plain refusal"),
          SOFT: (False, "declines where Normandy is; Rollo is a side fact"),
          HEDGED: (True, "a hedge, then where Normandy is"),
          OFF_TOPIC: (False, "says who Rollo was, not where Normandy is")}
EXPECTED = {PLAIN: ("abstained", "no_claims", None), SOFT: ("abstained", "scored", 1.0),
            HEDGED: ("answered", "scored", 1.0), OFF_TOPIC: ("abstained", "scored", 1.0)}


@pytest.mark.parametrize("answer", list(HONEST), ids=["plain", "soft", "hedged", "off_topic"])
@pytest.mark.parametrize("path", ["with_the_extraction", "separate_call", "abstention_only"])
def test_the_judges_verdict_is_the_verdict_on_every_path(tmp_path, brain, answer, path):
    """Plain refusal, soft refusal and an answer to a different question are abstentions; a
    hedge followed by an answer is not. Whichever call asked it (the extraction, the separate
    prompt when the extraction left the field out, or the abstention judge alone), the
    judge's verdict is stored with its rationale, and faithfulness is what it was."""
    from abtest import judges as J

    brain.override = _honest(HONEST)
    if path == "separate_call":
        honest = brain.override

        def no_field(messages, req):
            out = honest(messages, req)
            name = (req.get("response_format") or {}).get("json_schema", {}).get("name")
            return {"claims": out["claims"]} if name == "claims" else out
        brain.override = no_field
    judges = ["abstention"] if path == "abstention_only" else BOTH
    rows = J.claims_and_abstention(gateway(tmp_path), spec(), case(), answer, "A", judges)
    ab = rows[-1][0]
    verdict, faith_verdict, score = EXPECTED[answer]
    assert ab["verdict"] == verdict and ab["error"] is None
    assert ab["rationale"] == HONEST[answer][1]
    res = json.loads(ab["result_json"])
    assert res["judge_said"] == verdict and res["answers_question"] is HONEST[answer][0]
    assert res["method"] == ("asked with the claim extraction" if path == "with_the_extraction"
                             else "llm")
    names = schema_names(brain)
    if path == "abstention_only":
        assert names == ["abstention"] and len(rows) == 1
        assert ab["prompt_sha256"] == J.load_prompt("abstention_v3").sha256
        return
    faith = rows[0][0]
    assert (faith["verdict"], faith["score"]) == (faith_verdict, score)
    assert names.count("abstention") == (path == "separate_call")


def test_the_prompts_ask_about_the_question_asked(tmp_path, brain):
    """Both prompts define answers_question with the four kinds of answer, and the reply
    schema requires it (after the rationale) so a constrained decoder always gives it."""
    from abtest import judges as J

    for name in ("claims_extract_v3", "abstention_v3"):
        text = J.load_prompt(name).text
        for said in ("a refusal", "it declines the question; the bays are a side fact",
                     "a hedge, then an answer", "it answers a different question",
                     "even a hedged, partial or wrong one", "even when it adds other facts"):
            assert said in text, (name, said)
    gw = gateway(tmp_path)
    J.claims_and_abstention(gw, spec(), case(), SOFT, "A", ["abstention"])
    J.claims_and_abstention(gw, spec(), case(), SOFT, "A", BOTH)
    schemas = {c["req"]["response_format"]["json_schema"]["name"]:
               c["req"]["response_format"]["json_schema"]["schema"] for c in brain.calls}
    assert schemas["abstention"]["required"] == ["rationale", "answers_question"]
    assert schemas["claims"]["required"] == ["claims", "rationale", "answers_question"]
    assert list(schemas["claims"]["properties"]) == ["claims", "rationale", "answers_question"]
    assert schemas["claims"]["properties"]["rationale"]["maxLength"] == J.RATIONALE_CHARS
    sent = [c["messages"][-1]["content"] for c in brain.calls]
    assert all("answers_question" in p and "When does the depot open?" in p for p in sent
               if "<claims>" not in p)


def test_a_long_rationale_is_kept_short_and_on_one_line(tmp_path, brain):
    from abtest import judges as J

    long = "It declines.\n" + "x " * 200
    brain.override = _honest({SOFT: (False, long)})
    (_, _), (ab, _) = J.claims_and_abstention(gateway(tmp_path), spec(), case(), SOFT, "A", BOTH)
    assert ab["verdict"] == "abstained"
    assert ab["rationale"].startswith("It declines. x x") and "\n" not in ab["rationale"]
    assert len(ab["rationale"]) <= J.RATIONALE_CHARS
    assert json.loads(ab["result_json"])["rationale"] == ab["rationale"]


def test_an_extraction_that_fails_verification_still_gives_its_abstention_verdict(tmp_path,
                                                                                   brain):
    """The verdict came back with the claims: a failed verification is the faithfulness
    row's error, not a reason to ask the abstention question again."""
    from abtest import judges as J

    def broken(messages, req):
        if (req.get("response_format") or {}).get("json_schema", {}).get("name") == "claimverdicts":
            return "not json"
        return None
    brain.override = broken
    (faith, _), (ab, _) = J.claims_and_abstention(gateway(tmp_path), spec(), case(), SOFT, "A",
                                                  BOTH)
    assert faith["error"].startswith("judge output invalid after one repair")
    assert ab["verdict"] == "abstained" and ab["error"] is None
    assert "n_claims" not in json.loads(ab["result_json"])
    assert "abstention" not in schema_names(brain)


def test_a_null_rationale_is_no_rationale_not_an_invalid_reply(tmp_path, brain):
    from abtest import judges as J

    brain.override = _honest({SOFT: (False, None)})
    (_, _), (ab, _) = J.claims_and_abstention(gateway(tmp_path), spec(), case(), SOFT, "A", BOTH)
    assert ab["verdict"] == "abstained" and ab["rationale"] is None
    assert len(brain.calls) == 2                      # claims and their verification: no repair
