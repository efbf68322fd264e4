"""One case's work: render the context block once (byte-identical for A and B), generate
A and B side by side, run the deterministic checks, then the judge plan; every row stored
as it exists. And the judge-noise re-asks on a seeded sample."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from abtest.core.config import LoadedConfig
from abtest.core.progress import Progress
from abtest.core.models import Case
from abtest.prompts.variants import (LoadedVariant, messages_sha256)

from abtest.running.plan import RunPlan, conformance_rubric
from abtest.judges.plan import JudgeInputs, judge_tasks
from abtest import judges as J
from abtest.prompts.checks import run_checks
import random
from abtest.llm.batch import Deferred

if TYPE_CHECKING:
    from abtest.llm.gateway import Gateway
    from abtest.store import Store


def spent_so_far(store: Store, run_id: str, gw: Gateway) -> dict[str, Any]:
    """What a progress bar shows beside the cases: provider calls, cache hits, tokens and
    cost so far (the stored calls, so a resumed run counts its earlier work too)."""
    rows = store.call_summary(run_id).values()
    tokens = sum((r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0) for r in rows)
    costs = [r["cost"] for r in rows if r["cost"] is not None]
    out: dict[str, Any] = {"calls": gw.stats.provider_calls, "cached": gw.stats.cache_hits,
                           "tokens": tokens}
    if costs:
        out["cost"] = f"${sum(costs):.4f}"
    return out


@dataclass
class CaseOutcome:
    case_id: str
    errors: list[str] = field(default_factory=list)
    calls: int = 0


def _judge_case(gw: Gateway, lc: LoadedConfig, store: Store, run_id: str, case: Case,
                answers: dict[str, str], out: CaseOutcome, fan) -> None:
    """The judge plan of one case (judges.plan), its calls side by side."""

    for results in fan(judge_tasks(gw, lc.config, JudgeInputs.frozen(case, answers))):
        for row, claims in results:
            row = {"run_id": run_id, **row}
            store.put_judgment(row, claims)
            if row.get("error"):
                out.errors.append(f"{row['judge']}[{row['subject']}]: {row['error']}")


def _conformance(gw: Gateway, lc: LoadedConfig, store: Store, run_id: str, case: Case,
                 answers: dict[str, str], variants: dict[str, LoadedVariant],
                 out: CaseOutcome) -> None:

    cr = conformance_rubric(variants["A"].variant, variants["B"].variant)
    if cr is None:
        return
    for v in variants:
        row = J.rubric(gw, lc.config.judge, case, "conformance", v,
                       {"rubric": cr["text"], "answer": answers[v]})
        store.put_judgment({"run_id": run_id, **row})
        if row.get("error"):
            out.errors.append(f"conformance[{v}]: {row['error']}")


def _fanout(pool):
    """Run a case's independent tasks side by side; results in task order."""
    def fan(tasks):
        if pool is None or len(tasks) < 2:
            return [t() for t in tasks]
        return [f.result() for f in [pool.submit(t) for t in tasks]]
    return fan


def process_case(gw: Gateway, lc: LoadedConfig, store: Store, run_id: str, plan: RunPlan,
                 case: Case, inner=None) -> CaseOutcome:

    fan = _fanout(inner)
    out = CaseOutcome(case.id)
    answers: dict[str, str] = {}
    variants = {"A": plan.a, "B": plan.b}
    specs = {"A": plan.gen_a, "B": plan.gen_b}
    contexts, messages = plan.render(case)
    results = fan([lambda i=i, v=v: gw.complete(specs[v], messages[i],
                                                 purpose=f"generate:{v}", case_id=case.id)
                   for i, v in enumerate(("A", "B"))])
    gen_rows, check_rows = [], []
    for i, v in enumerate(("A", "B")):
        msgs = messages[i]
        ctx = contexts[i]
        res = results[i]
        tokens = plan.token_counts.get(case.id)[i]
        gen_rows.append({
            "run_id": run_id, "case_id": case.id, "variant": v,
            "context_sha256": hashlib.sha256(ctx.encode("utf-8")).hexdigest(),
            "prompt_sha256": messages_sha256(msgs), "messages_json": json.dumps(msgs),
            "answer": res.content if res.ok else None, "error": res.error,
            "call_hash": res.call_hash, "model_requested": specs[v].model,
            "model_resolved": res.model_resolved, "latency_ms": res.latency_ms,
            "prompt_tokens": tokens, "overflow": v in plan.overflow.get(case.id, [])})
        if not res.ok:
            out.errors.append(f"generate[{v}]: {res.error}")
            continue
        answers[v] = res.content
        check_rows.append((run_id, case.id, v, [r.model_dump() for r in
                                                run_checks(res.content, case, variants[v].variant)]))
    store.put_generations(gen_rows, check_rows)  # both sides and their checks: one write
    if len(answers) < 2:
        return out  # unfinished case: never judged, never counted
    _judge_case(gw, lc, store, run_id, case, answers, out, fan)
    if "conformance" in lc.config.judges:
        _conformance(gw, lc, store, run_id, case, answers, variants, out)
    return out


def judge_repeats(gw: Gateway, lc: LoadedConfig, store: Store, run_id: str, plan: RunPlan,
                   unfinished: set[str], progress: Progress | None) -> None:
    """Re-ask the pairwise judge on a seeded sample K times (sample index in the cache key)."""


    cfg = lc.config
    answers: dict[str, dict[str, str]] = {}
    for g in store.generations(run_id, exclude=("messages_json",)):
        if g["answer"] is not None:
            answers.setdefault(g["case_id"], {})[g["variant"]] = g["answer"]
    pool = sorted(cid for cid in plan.fixture.ids()
                  if cid not in unfinished and len(answers.get(cid, {})) == 2)
    picked = random.Random(cfg.seed).sample(pool, min(cfg.judge_repeat_cases, len(pool)))
    by_id = plan.fixture.by_id(picked)
    if progress and picked:
        progress(f"judge noise: re-asking the pairwise judge {cfg.judge_repeats}x on {len(picked)} cases")

    for cid in picked:
        for s in range(1, cfg.judge_repeats + 1):
            try:
                rows = J.pairwise(gw, cfg.judge, by_id[cid], answers[cid]["A"],
                                  answers[cid]["B"], sample=s)
            except Deferred:   # in a batch: the next pass stores it
                continue
            for row in rows:
                store.put_judgment({"run_id": run_id, **row})
