"""The one judge plan: which judges run on a question, on which inputs.

Frozen runs and live runs both call `judge_tasks`, so a frozen-vs-live comparison compares
the same measures. What differs between them is only the input: a frozen case gives both
answers the same context; a live question gives each answer the context its own system
retrieved, and the pairwise judge sees both (A's chunks, then B's new ones). Conformance
(it needs a variant's rubric) and repeated judge samples are frozen-run extras added by
the runner around this plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..shapes import Case

Rows = list[tuple[dict, list | None]]  # (judgment row, its claims or None)
Task = Callable[[], Rows]
VARIANTS = ("A", "B")


@dataclass
class JudgeInputs:
    cases: dict[str, Case]      # per variant, the case whose context that answer was given
    pair_case: Case             # what the pairwise judge sees
    answers: dict[str, str]

    @classmethod
    def frozen(cls, case: Case, answers: dict[str, str]) -> "JudgeInputs":
        return cls({v: case for v in VARIANTS}, case, answers)


def relevance_method(cfg) -> str:
    """How answer relevance is measured under this config (the report names it)."""
    return "embedding" if cfg.embedding is not None else "llm_rating"


def judge_tasks(gw, cfg, inputs: JudgeInputs) -> list[Task]:
    """Independent calls, each returning rows to store; run them in any order or side by side."""
    from .. import judges as J

    spec = cfg.judge
    js = cfg.judges
    tasks: list[Task] = []
    answers = inputs.answers

    if "pairwise" in js:
        for order in ("AB", "BA"):
            tasks.append(lambda o=order: [(r, None) for r in J.pairwise(
                gw, spec, inputs.pair_case, answers["A"], answers["B"], orders=(o,))])

    def coverage_rows(case: Case, v: str) -> Rows:
        points, perr = J.key_points_for(gw, spec, case)  # cached: one extraction per question
        if perr:
            return [({"case_id": case.id, "judge": "coverage", "subject": v, "error": perr}, None)]
        return [(J.coverage(gw, spec, case, answers[v], v, points), None)] if points else []

    embed_fn: Callable | None = None
    if "relevance" in js and relevance_method(cfg) == "embedding":
        from ..llm import embed

        embed_fn = lambda texts, s=cfg.embedding: embed(s, texts, cfg.timeout_s)  # noqa: E731

    for v in VARIANTS:
        case, ans = inputs.cases[v], answers[v]
        if "faithfulness" in js or "abstention" in js:
            tasks.append(lambda case=case, v=v, ans=ans: J.claims_and_abstention(
                gw, spec, case, ans, v, js, max_claims=cfg.max_claims))
        if "coverage" in js and case.answerable:
            tasks.append(lambda case=case, v=v: coverage_rows(case, v))
        if "quality" in js:
            tasks.append(lambda case=case, v=v, ans=ans: [(J.rubric(gw, spec, case, "quality", v, {
                "question": case.question, "context": J.context_block(case.context),
                "answer": ans}), None)])
        if embed_fn is not None:
            tasks.append(lambda case=case, v=v, ans=ans: [(J.relevance_by_embedding(
                gw, spec, case, ans, v, embed_fn), None)])
        elif "relevance" in js:  # no embedding model: an LLM 0-1 rating, labelled as such
            tasks.append(lambda case=case, v=v, ans=ans: [(J.rubric(gw, spec, case, "relevance", v, {
                "question": case.question, "answer": ans}), None)])
    keywords_case = inputs.pair_case
    if "keywords" in js and keywords_case.keywords:
        tasks.append(lambda: [(J.rubric(gw, spec, keywords_case, "keywords", "case", {
            "question": keywords_case.question,
            "keywords": ", ".join(keywords_case.keywords)}), None)])
    return tasks
