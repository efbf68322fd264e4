"""Validate a judge model against human-labelled public sets before trusting it.

pairwise: LLMBar-format rows {id, input, output_1, output_2, label: 1|2}, judged in
both orders with the same prompt the runs use. faithfulness: FaithBench-format rows
{id, source, claim_or_summary, label: consistent|hallucinated}, judged claim by claim
against the source as the only context chunk.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from abtest.core.config import LoadedConfig
from abtest.errors import IncompleteRunError, UserError
from abtest.core.records import read_records
from abtest.core.models import Case, Chunk
from abtest.llm import Gateway, check_credentials
from abtest.store import Store
from concurrent.futures import ThreadPoolExecutor
from abtest import judges as J
from abtest import stats

if TYPE_CHECKING:
    from abtest.llm.gateway import Gateway
    from abtest.store import Store


def _rows(path: Path, required: tuple[str, ...], limit: int | None) -> list[tuple[str, dict]]:
    rows = []
    for n, obj in read_records(path):
        for f in required:
            if f not in obj or obj[f] in (None, ""):
                raise UserError("required field is missing", file=str(path), where=n, field=f)
        rows.append((n, obj))
        if limit and len(rows) >= limit:
            break
    if not rows:
        raise UserError("no rows", file=str(path))
    return rows


def _gateway(lc: LoadedConfig) -> tuple[Store, Gateway]:

    check_credentials(lc.config.judge, where="judge")
    store = Store(lc.store_path)
    c = lc.config
    return store, Gateway(store, concurrency=c.concurrency, timeout_s=c.timeout_s,
                          max_retries=c.max_retries, backoff_base_s=c.retry_backoff_s)


def _parallel(fn, items, workers: int, progress: Callable[[str], None] | None):

    out = [None] * len(items)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futs = {pool.submit(fn, it): i for i, it in enumerate(items)}
        for k, f in enumerate(futs):
            out[futs[f]] = f.result()
            if progress and (k + 1) % 10 == 0:
                progress(f"judged {k + 1}/{len(items)}")
    return out


def check_pairwise(lc: LoadedConfig, data: str | Path, *, limit: int | None = None,
                   progress=None) -> dict:

    path = Path(data)
    rows = _rows(path, ("id", "input", "output_1", "output_2", "label"), limit)
    for where, r in rows:
        if str(r["label"]) not in ("1", "2"):
            raise UserError("label must be 1 or 2", file=str(path), where=where, field="label")
    store, gw = _gateway(lc)
    try:
        def one(item):
            _, r = item
            case = Case(id=str(r["id"]), question=r["input"], context=[], corpus_version="-",
                        retriever="-", answerable=True)
            # A = output_1, B = output_2: verdicts come back mapped to A / B / tie
            rows_ = J.pairwise(gw, lc.config.judge, case, r["output_1"], r["output_2"])
            return rows_[0], rows_[1]
        results = _parallel(one, rows, lc.config.concurrency, progress)
    finally:
        store.close()
    errors = [r["id"] for (_, r), (ab, ba) in zip(rows, results) if ab["error"] or ba["error"]]
    if errors:
        raise IncompleteRunError(f"judge failed on {len(errors)} item(s): {', '.join(errors[:5])}")
    ab = [x[0]["verdict"] for x in results]
    ba = [x[1]["verdict"] for x in results]
    gold = ["A" if str(r["label"]) == "1" else "B" for _, r in rows]
    outcome = [stats.pairwise_outcome(x, y) for x, y in zip(ab, ba)]
    n = len(gold)
    acc = sum(o == g for o, g in zip(outcome, gold)) / n
    cons = stats.position_consistency(ab, ba)
    kappa = stats.cohen_kappa(outcome, gold)
    return {"judge": "pairwise", "data": str(path), "n": n, "model": lc.config.judge.model,
            "accuracy": acc, "accuracy_first_order": sum(a == g for a, g in zip(ab, gold)) / n,
            "accuracy_second_order": sum(b == g for b, g in zip(ba, gold)) / n,
            "no_preference": sum(o == "tie" for o in outcome),
            "position_consistency": cons.estimate, "position_consistency_ci": [cons.ci_low, cons.ci_high],
            "kappa": kappa.kappa, "kappa_ci": [kappa.ci_low, kappa.ci_high],
            "note": "accuracy counts a no-preference outcome as wrong; kappa compares the "
                    "both-orders outcome (A / B / tie) with the human label"}


def check_faithfulness(lc: LoadedConfig, data: str | Path, *, limit: int | None = None,
                       progress=None) -> dict:

    path = Path(data)
    rows = _rows(path, ("id", "source", "claim_or_summary", "label"), limit)
    for where, r in rows:
        if r["label"] not in ("consistent", "hallucinated"):
            raise UserError("label must be 'consistent' or 'hallucinated'", file=str(path),
                            where=where, field="label")
    store, gw = _gateway(lc)
    try:
        def one(item):
            _, r = item
            case = Case(id=str(r["id"]), question="Summarise the source.", answerable=True,
                        context=[Chunk(id="source", text=r["source"])], corpus_version="-",
                        retriever="-")
            row, _claims = J.faithfulness(gw, lc.config.judge, case, r["claim_or_summary"], "A",
                                          max_claims=lc.config.max_claims)
            return row
        results = _parallel(one, rows, lc.config.concurrency, progress)
    finally:
        store.close()
    errors = [r["id"] for (_, r), j in zip(rows, results) if j["error"]]
    if errors:
        raise IncompleteRunError(f"judge failed on {len(errors)} item(s): {', '.join(errors[:5])}")
    pred = ["consistent" if (j["verdict"] == "no_claims" or (j["score"] is not None and j["score"] >= 1.0))
            else "hallucinated" for j in results]
    gold = [r["label"] for _, r in rows]
    n = len(gold)
    tp = sum(p == g == "hallucinated" for p, g in zip(pred, gold))
    tn = sum(p == g == "consistent" for p, g in zip(pred, gold))
    pos = sum(g == "hallucinated" for g in gold)
    neg = n - pos
    kappa = stats.cohen_kappa(pred, gold)
    return {"judge": "faithfulness", "data": str(path), "n": n, "model": lc.config.judge.model,
            "accuracy": (tp + tn) / n,
            "balanced_accuracy": ((tp / pos if pos else 0) + (tn / neg if neg else 0)) / (2 if pos and neg else 1),
            "hallucination_recall": tp / pos if pos else None,
            "kappa": kappa.kappa, "kappa_ci": [kappa.ci_low, kappa.ci_high],
            "note": "a summary is predicted 'hallucinated' when any extracted claim is not "
                    "supported by the source"}
