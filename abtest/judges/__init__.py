"""The judges, each through the one LLM gateway, each with a versioned prompt file.

Every function returns plain judgment rows (dicts for the `judgments` table, plus
claims for faithfulness); an error is stored as an error, never as 0 or 1.

A prompt that changes gets a new version (`claims_extract_v3.txt`); the superseded file stays
in prompts/ so the `prompt_sha256` a stored run recorded can still be matched to its text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, field_validator

from abtest.core.models import Case
from abtest.judges.common import (JudgeCall, ask_json, context_block, load_prompt,  # noqa: F401
                     neutralise, numbered_schema, to_json)  # context_block, neutralise: API
from abtest.llm.batch import Deferred
import math

if TYPE_CHECKING:
    from abtest.llm.gateway import Gateway
    from abtest.core.models import ModelSpec


class PairwiseVerdict(BaseModel):
    winner: Literal["1", "2", "tie"]
    margin: float = Field(default=0.5, ge=0, le=1)
    rationale: str = Field(default="", json_schema_extra={"maxLength": 80})


CLAIMS_PROMPT = "claims_extract_v3"    # claims, and whether the answer answers the question
ABSTENTION_PROMPT = "abstention_v3"     # the same question alone, when the extraction lacks it
RATIONALE_CHARS = 120  # the judge's one-sentence reason for its abstention verdict


def _no_reason(v):
    return "" if v is None else v   # a judge that sends null for the reason has given none


class Claims(BaseModel):
    claims: list[str] = Field(json_schema_extra={"items": {"type": "string", "maxLength": 160}})
    # asked in the same call (None when a judge left it out: the abstention prompt is asked)
    rationale: str = Field(default="", json_schema_extra={"maxLength": RATIONALE_CHARS})
    answers_question: bool | None = None

    _reason = field_validator("rationale", mode="before")(_no_reason)


def claims_schema(max_claims: int) -> dict:
    """claims, then the reason, then the verdict: a judge states why before it decides."""
    schema = Claims.model_json_schema()
    props = schema["properties"]
    props["claims"]["maxItems"] = max_claims
    schema["properties"] = {"claims": props["claims"], "rationale": props["rationale"],
                            "answers_question": {"type": "boolean"}}
    schema["required"] = ["claims", "rationale", "answers_question"]
    return schema


class Verdict(BaseModel):
    verdict: Literal["supported", "contradicted", "not_in_context"]
    chunk_id: str | None = None


class ClaimVerdict(Verdict):
    claim: int


class ClaimVerdicts(BaseModel):
    """{"verdicts": {"1": {...}, "2": {...}}}; a list with claim numbers is accepted too."""

    verdicts: dict[str, Verdict] | list[ClaimVerdict]

    def by_number(self) -> dict[int, Verdict]:
        if isinstance(self.verdicts, dict):
            return {int(k): v for k, v in self.verdicts.items() if k.strip().isdigit()}
        return {v.claim: v for v in self.verdicts}


def verdict_item(chunk_ids: list[str]) -> dict:
    """One claim's verdict; chunk_id limited to the case's real chunk ids (or null)."""
    return {"type": "object", "additionalProperties": False, "required": ["verdict", "chunk_id"],
            "properties": {"verdict": {"enum": ["supported", "contradicted", "not_in_context"]},
                           "chunk_id": {"enum": [*chunk_ids, None]}}}


class PointVerdict(BaseModel):
    point: int
    covered: bool


class Coverage(BaseModel):
    """{"points": {"1": true, "2": false}}; a list with point numbers is accepted too."""

    points: dict[str, bool] | list[PointVerdict]

    def by_number(self) -> dict[int, bool]:
        if isinstance(self.points, dict):
            return {int(k): v for k, v in self.points.items() if k.strip().isdigit()}
        return {p.point: p.covered for p in self.points}


class KeyPoints(BaseModel):
    key_points: list[str] = Field(json_schema_extra={"maxItems": 5, "items": {"type": "string",
                                                                              "maxLength": 200}})


class Abstention(BaseModel):  # does the answer answer the question asked? (reason first)
    rationale: str = Field(default="", json_schema_extra={"maxLength": RATIONALE_CHARS})
    answers_question: bool

    _reason = field_validator("rationale", mode="before")(_no_reason)


def abstention_schema() -> dict:
    schema = Abstention.model_json_schema()
    schema["required"] = ["rationale", "answers_question"]
    return schema


class Score(BaseModel):
    score: float = Field(ge=0, le=1)
    explanation: str = Field(default="", json_schema_extra={"maxLength": 160})


def _row(case: Case, judge: str, subject: str, call, *, verdict=None, score=None, margin=None,
         rationale=None, result=None, prompt_sha=None, sample: int = 0, error: str | None = None):
    err = error if error is not None else (call.error if call is not None else None)
    return {"case_id": case.id, "judge": judge, "subject": subject, "sample": sample,
            "verdict": verdict, "score": score, "margin": margin, "rationale": rationale,
            "result_json": to_json(result) if result is not None else None, "error": err,
            "prompt_sha256": prompt_sha,
            "call_hashes": ",".join(call.call_hashes) if call is not None else None,
            "model_resolved": call.model_resolved if call is not None else None}


def pairwise(gateway: Gateway, spec: ModelSpec, case: Case, answer_a: str, answer_b: str, *,
             sample: int = 0, orders: tuple[str, ...] = ("AB", "BA")) -> list[dict]:
    """Blind, both orders: run 'AB' shows A first, run 'BA' shows B first; verdicts mapped back."""
    p = load_prompt("pairwise_v1")
    ctx = context_block(case.context)

    rows = []
    deferred = None
    for subject, first, second, first_is in (("AB", answer_a, answer_b, "A"),
                                             ("BA", answer_b, answer_a, "B")):
        if subject not in orders:
            continue
        try:
            call = ask_json(gateway, spec, p, {"question": case.question, "context": ctx,
                                              "response_1": first, "response_2": second},
                            PairwiseVerdict, purpose="judge:pairwise", case_id=case.id,
                            sample=sample)
        except Deferred as exc:   # both orders go into the same batch
            deferred = exc
            continue
        v = call.value
        mapped = None
        if v is not None:
            other = "B" if first_is == "A" else "A"
            mapped = {"1": first_is, "2": other, "tie": "tie"}[v.winner]
        rows.append(_row(case, "pairwise", subject, call, verdict=mapped,
                         margin=v.margin if v else None, rationale=v.rationale if v else None,
                         result=v, prompt_sha=p.sha256, sample=sample))
    if deferred is not None:
        raise deferred
    return rows


def faithfulness(gateway: Gateway, spec: ModelSpec, case: Case, answer: str, variant: str, *,
                 max_claims: int = 8) -> tuple[dict, list[dict]]:
    """Claim-level: extract atomic claims, then verify them all in one call.

    Every answer goes through extraction, refusal-sounding or not: "I do not know for
    certain. The depot opens at 9am." makes a claim that must be checked, and so does a soft
    refusal's side fact ("The documents do not say when it opens. It has 40 bays [c2]."); only
    an answer with no claim at all has no score."""
    row, claims, _ext = _faithfulness(gateway, spec, case, answer, variant, max_claims=max_claims)
    return row, claims


def _faithfulness(gateway: Gateway, spec: ModelSpec, case: Case, answer: str, variant: str, *,
                  max_claims: int) -> tuple[dict, list[dict], JudgeCall[Claims]]:
    """faithfulness(), and the extraction call (it also carries the abstention verdict)."""
    pe, pv = load_prompt(CLAIMS_PROMPT), load_prompt("claims_verify_v1")
    sha = f"{pe.sha256[:16]}+{pv.sha256[:16]}"
    ext = ask_json(gateway, spec, pe, {"question": case.question, "answer": answer,
                                       "max_claims": str(max_claims)}, Claims,
                   purpose="judge:claims", case_id=case.id, schema=claims_schema(max_claims))
    if ext.value is None:
        return _row(case, "faithfulness", variant, ext, prompt_sha=sha), [], ext
    claims = [c.strip() for c in ext.value.claims if c and c.strip()][:max_claims]
    said = ext.value.answers_question
    if not claims:
        return _row(case, "faithfulness", variant, ext, verdict="no_claims", prompt_sha=sha,
                    rationale="no factual claims extracted",
                    result={"answers_question": said}), [], ext
    numbered = "\n".join(f"{i + 1}. {c}" for i, c in enumerate(claims))
    ver = ask_json(gateway, spec, pv, {"context": context_block(case.context), "claims": numbered},
                   ClaimVerdicts, purpose="judge:verify", case_id=case.id,
                   schema=numbered_schema("verdicts", len(claims),
                                          verdict_item([c.id for c in case.context])))
    ver.call_hashes = ext.call_hashes + ver.call_hashes
    if ver.value is None:
        return _row(case, "faithfulness", variant, ver, prompt_sha=sha), [], ext
    by_num = ver.value.by_number()
    ids = {c.id for c in case.context}
    rows = []
    for i, c in enumerate(claims):
        v = by_num.get(i + 1)
        if v is None:
            return _row(case, "faithfulness", variant, ver, prompt_sha=sha,
                        error=f"judge gave no verdict for claim {i + 1}"), [], ext
        chunk = v.chunk_id if v.chunk_id in ids else None
        verdict = v.verdict
        if verdict == "supported" and chunk is None:
            verdict = "not_in_context"  # support must point at a real chunk
        rows.append({"claim": c, "verdict": verdict, "chunk_id": chunk})
    supported = sum(1 for r in rows if r["verdict"] == "supported")
    score = supported / len(rows)
    return _row(case, "faithfulness", variant, ver, verdict="scored", score=score, prompt_sha=sha,
                result={"n_claims": len(rows), "supported": supported, "answers_question": said,
                        "contradicted": sum(1 for r in rows if r["verdict"] == "contradicted")}
                ), rows, ext


def key_points_for(gateway: Gateway, spec: ModelSpec, case: Case
                   ) -> tuple[list[str] | None, str | None]:
    """The case's key points, or points extracted once (cached) from the reference answer."""
    if case.key_points:
        return list(case.key_points), None
    ref = (case.reference_answer or "").strip()
    if not ref:
        return None, None
    if len(ref.split()) <= 12:
        return [ref], None
    call = ask_json(gateway, spec, load_prompt("key_points_v1"),
                    {"question": case.question, "reference_answer": ref}, KeyPoints,
                    purpose="judge:key_points", case_id=case.id)
    if call.value is None:
        return None, call.error
    pts = [p.strip() for p in call.value.key_points if p.strip()]
    return (pts or None), (None if pts else "no key points extracted from reference_answer")


def coverage(gateway: Gateway, spec: ModelSpec, case: Case, answer: str, variant: str,
             points: list[str]) -> dict:
    p = load_prompt("coverage_v1")
    numbered = "\n".join(f"{i + 1}. {k}" for i, k in enumerate(points))
    call = ask_json(gateway, spec, p, {"question": case.question, "key_points": numbered,
                                      "answer": answer}, Coverage,
                    purpose="judge:coverage", case_id=case.id,
                    schema=numbered_schema("points", len(points), {"type": "boolean"}))
    if call.value is None:
        return _row(case, "coverage", variant, call, prompt_sha=p.sha256)
    by_num = call.value.by_number()
    if any(i + 1 not in by_num for i in range(len(points))):
        return _row(case, "coverage", variant, call, prompt_sha=p.sha256,
                    error="judge did not rate every key point")
    covered = [points[i] for i in range(len(points)) if by_num[i + 1]]
    return _row(case, "coverage", variant, call, verdict="scored",
                score=len(covered) / len(points), prompt_sha=p.sha256,
                result={"points": points, "covered": covered})


def abstention(gateway: Gateway, spec: ModelSpec, case: Case, answer: str, variant: str, *,
               n_claims: int | None = None) -> dict:
    """Did the answer abstain, that is, not answer the question asked? The judge decides
    (abstention_v3), not a phrase list and not the claim count: a soft refusal that declines
    the question and adds true, cited side facts has abstained; "I'm not sure, but it opens at
    9am." has answered. `n_claims` (from the faithfulness extraction, when known) is recorded
    beside the verdict for a reader, never used to change it."""
    p = load_prompt(ABSTENTION_PROMPT)
    call = ask_json(gateway, spec, p, {"question": case.question, "answer": answer}, Abstention,
                    purpose="judge:abstention", case_id=case.id, schema=abstention_schema())
    if call.value is None:
        return _row(case, "abstention", variant, call, prompt_sha=p.sha256)
    return _abstention_row(case, variant, call, call.value.answers_question,
                           call.value.rationale, n_claims, p.sha256, "llm")


def _abstention_row(case: Case, variant: str, call, answers: bool, rationale: str,
                    n_claims: int | None, prompt_sha: str, method: str) -> dict:
    """The judge's verdict is the verdict. Extracted claims no longer overrule it (until
    issue 43 any claim made an abstention "answered"): a soft refusal's side facts are claims
    too, and counting it as an answer let a variant decline the questions it would get wrong
    without its refusal rate showing. The claims are still checked for faithfulness; the
    judge's rationale is kept (one line, at most RATIONALE_CHARS) for the reader."""
    why = " ".join((rationale or "").split())[:RATIONALE_CHARS] or None
    ab = not answers
    result: dict = {"method": method, "judge_said": "abstained" if ab else "answered",
                    "answers_question": answers, "rationale": why}
    if n_claims is not None:
        result["n_claims"] = n_claims
    return _row(case, "abstention", variant, call, verdict="abstained" if ab else "answered",
                score=1.0 if ab else 0.0, prompt_sha=prompt_sha, result=result, rationale=why)


def claims_and_abstention(gateway: Gateway, spec: ModelSpec, case: Case, answer: str,
                          variant: str, judges, *, max_claims: int = 8
                          ) -> list[tuple[dict, list | None]]:
    """Faithfulness, then abstention: the one order frozen and live runs both use.

    The claim extraction asks whether the answer answers the question in the same call, so
    abstention costs no call of its own when both judges run; a judge that leaves the field
    out (or an extraction that failed) gets the separate abstention prompt."""
    if "faithfulness" not in judges:
        return [(abstention(gateway, spec, case, answer, variant), None)]
    row, claims, ext = _faithfulness(gateway, spec, case, answer, variant, max_claims=max_claims)
    rows: list[tuple[dict, list | None]] = [(row, claims)]
    if "abstention" not in judges:
        return rows
    n = len(claims) if row.get("error") is None else None
    if ext.value is not None and ext.value.answers_question is not None:
        shared: JudgeCall[Claims] = JudgeCall(None, None, ext.call_hashes, ext.model_resolved)
        rows.append((_abstention_row(case, variant, shared, ext.value.answers_question,
                                     ext.value.rationale, n, load_prompt(CLAIMS_PROMPT).sha256,
                                     "asked with the claim extraction"), None))
    else:
        rows.append((abstention(gateway, spec, case, answer, variant, n_claims=n), None))
    return rows


def rubric(gateway: Gateway, spec: ModelSpec, case: Case, judge: str, subject: str,
           values: dict[str, str], *, sample: int = 0) -> dict:
    """The single-score 0-1 rubrics: quality, keywords, conformance, relevance."""
    p = load_prompt(f"{judge}_v1")
    call = ask_json(gateway, spec, p, values, Score, purpose=f"judge:{judge}", case_id=case.id,
                    sample=sample)
    v = call.value
    return _row(case, judge, subject, call, verdict="scored" if v else None,
                score=v.score if v else None, rationale=v.explanation if v else None,
                prompt_sha=p.sha256, sample=sample)


class GeneratedQuestions(BaseModel):
    questions: list[str] = Field(json_schema_extra={"maxItems": 3, "items": {"type": "string",
                                                                             "maxLength": 160}})


def relevance_by_embedding(gateway: Gateway, spec: ModelSpec, case: Case, answer: str,
                           variant: str, embed_fn) -> dict:
    """Answer relevance: questions generated from the answer vs the real one (mean cosine)."""

    p = load_prompt("relevance_questions_v1")
    call = ask_json(gateway, spec, p, {"answer": answer}, GeneratedQuestions,
                    purpose="judge:relevance", case_id=case.id)
    if call.value is None:
        return _row(case, "relevance", variant, call, prompt_sha=p.sha256)
    qs = [q.strip() for q in call.value.questions if q.strip()]
    if not qs:
        return _row(case, "relevance", variant, call, prompt_sha=p.sha256,
                    error="judge generated no question")
    try:
        vecs = embed_fn([case.question, *qs])
    except Exception as exc:  # the embedding endpoint failed: an error, never a score
        return _row(case, "relevance", variant, call, prompt_sha=p.sha256,
                    error=f"embedding failed: {type(exc).__name__}: {str(exc)[:120]}")

    def cos(x, y):
        nx, ny = math.sqrt(sum(a * a for a in x)), math.sqrt(sum(b * b for b in y))
        return sum(a * b for a, b in zip(x, y)) / (nx * ny) if nx and ny else 0.0

    sims = [cos(vecs[0], v) for v in vecs[1:]]
    score = max(0.0, min(1.0, sum(sims) / len(sims)))
    return _row(case, "relevance", variant, call, verdict="scored", score=score, prompt_sha=p.sha256,
                result={"method": "embedding", "questions": qs, "similarities": sims})
