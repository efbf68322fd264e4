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
from functools import partial
from typing import TYPE_CHECKING, Callable

from abtest.core.models import Case
from abtest import judges as J
from abtest.llm import embed

if TYPE_CHECKING:
    from abtest.llm.gateway import Gateway
    from abtest.core.models import Config

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


def relevance_method(cfg: Config) -> str:
    """How answer relevance is measured under this config (the report names it)."""
    return "embedding" if cfg.embedding is not None else "llm_rating"


def judge_tasks(gw: Gateway, cfg: Config, inputs: JudgeInputs) -> list[Task]:
    """Independent calls, each returning rows to store; run them in any order or side by side."""

    spec = cfg.judge
    js = cfg.judges
    tasks: list[Task] = []
    answers = inputs.answers

    def pairwise_rows(order: str) -> Rows:
        return [(r, None) for r in J.pairwise(gw, spec, inputs.pair_case, answers["A"],
                                              answers["B"], orders=(order,))]

    if "pairwise" in js:
        for order in ("AB", "BA"):
            tasks.append(partial(pairwise_rows, order))

    def coverage_rows(case: Case, v: str) -> Rows:
        points, perr = J.key_points_for(gw, spec, case)  # cached: one extraction per question
        if perr:
            return [({"case_id": case.id, "judge": "coverage", "subject": v, "error": perr}, None)]
        return [(J.coverage(gw, spec, case, answers[v], v, points), None)] if points else []

    def claims_rows(case: Case, v: str, ans: str) -> Rows:
        return J.claims_and_abstention(gw, spec, case, ans, v, js, max_claims=cfg.max_claims)

    def quality_rows(case: Case, v: str, ans: str) -> Rows:
        return [(J.rubric(gw, spec, case, "quality", v, {
            "question": case.question, "context": J.context_block(case.context),
            "answer": ans}), None)]

    def rated_relevance_rows(case: Case, v: str, ans: str) -> Rows:
        return [(J.rubric(gw, spec, case, "relevance", v, {
            "question": case.question, "answer": ans}), None)]

    def embedded_relevance_rows(embed_fn: Callable, case: Case, v: str, ans: str) -> Rows:
        return [(J.relevance_by_embedding(gw, spec, case, ans, v, embed_fn), None)]

    embed_fn: Callable | None = None
    embedding = cfg.embedding
    if "relevance" in js and relevance_method(cfg) == "embedding":

        assert embedding is not None  # the method is "embedding" only when one is configured

        def embed_texts(texts: list[str]) -> list[list[float]]:
            return embed(embedding, texts, cfg.timeout_s)

        embed_fn = embed_texts

    for v in VARIANTS:
        case, ans = inputs.cases[v], answers[v]
        if "faithfulness" in js or "abstention" in js:
            tasks.append(partial(claims_rows, case, v, ans))
        if "coverage" in js and case.answerable:
            tasks.append(partial(coverage_rows, case, v))
        if "quality" in js:
            tasks.append(partial(quality_rows, case, v, ans))
        if embed_fn is not None:
            tasks.append(partial(embedded_relevance_rows, embed_fn, case, v, ans))
        elif "relevance" in js:  # no embedding model: an LLM 0-1 rating, labelled as such
            tasks.append(partial(rated_relevance_rows, case, v, ans))
    keywords_case = inputs.pair_case
    keywords = keywords_case.keywords
    if "keywords" in js and keywords:
        def keywords_rows(kws: list[str]) -> Rows:
            return [(J.rubric(gw, spec, keywords_case, "keywords", "case", {
                "question": keywords_case.question, "keywords": ", ".join(kws)}), None)]

        tasks.append(partial(keywords_rows, keywords))
    return tasks
