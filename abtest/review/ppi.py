"""Prediction-powered inference (PPI) for the headline B − A differences.

PPI (Angelopoulos et al. 2023, "Prediction-powered inference", mean estimation):
``theta_pp = mean(judge on all N) - mean(judge - human on the labelled n)`` with a
normal-approximation CI from the variances of the two terms. Because a review pack is
stratified (all flagged cases, a random sample of the rest), the headline estimates
use the stratified form of the rectifier (see `ppi_stratified_ci`).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Sequence

import numpy as np

from abtest.review.items import CLAIM_LABELS, SCORE, claim_label, outcome, pairwise_stratum
from abtest.store.runs import finished_cases, load_run, pairwise_verdicts, run_config
from scipy import stats as st

if TYPE_CHECKING:
    from abtest.store import Store


class PPIResult(NamedTuple):
    estimate: float | None
    ci_low: float | None
    ci_high: float | None


def _z(alpha: float) -> float:

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return float(st.norm.ppf(1.0 - alpha / 2.0))


def _vec(name: str, x: Iterable[float]) -> np.ndarray:
    a = np.asarray(list(x) if not isinstance(x, np.ndarray) else x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-d")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    return a


def _interval(est: float, var: float | None, alpha: float) -> PPIResult:
    if var is None or not math.isfinite(var):
        return PPIResult(float(est), None, None)
    half = _z(alpha) * math.sqrt(max(var, 0.0))
    return PPIResult(float(est), float(est - half), float(est + half))


def mean_ci(x: Sequence[float], alpha: float = 0.05) -> PPIResult:
    """Judge-only (classical) mean with a normal-approximation CI, the comparator of PPI."""
    a = _vec("x", x)
    if a.size == 0:
        raise ValueError("x is empty")
    var = float(a.var(ddof=1)) / a.size if a.size >= 2 else None
    return _interval(float(a.mean()), var, alpha)


def ppi_mean_ci(judge_all: Sequence[float], judge_labelled: Sequence[float],
                human_labelled: Sequence[float], alpha: float = 0.05) -> PPIResult:
    """Prediction-powered mean (Angelopoulos et al. 2023):

        theta_pp = mean(judge_all) − mean(judge_labelled − human_labelled)
        se^2     = var(judge_all) / N + var(judge_labelled − human_labelled) / n

    (sample variances, ddof = 1), CI = theta_pp ± z_{1−alpha/2}·se. ``judge_all`` is the
    judge's score on every case (N, labelled ones included); the labelled subset must be
    a uniform random sample. alpha is abtest's 0.05 (ppi_py's default is 0.1). The CI is
    None when N < 2 or n < 2."""
    f = _vec("judge_all", judge_all)
    fl = _vec("judge_labelled", judge_labelled)
    y = _vec("human_labelled", human_labelled)
    if fl.shape != y.shape:
        raise ValueError("judge_labelled and human_labelled must be paired (same length)")
    if f.size == 0 or y.size == 0:
        raise ValueError("need at least one case and one human label")
    rect = fl - y
    est = float(f.mean() - rect.mean())
    if f.size < 2 or rect.size < 2:
        return PPIResult(est, None, None)
    var = float(f.var(ddof=1)) / f.size + float(rect.var(ddof=1)) / rect.size
    return _interval(est, var, alpha)


def ppi_difference(judge_a_all: Sequence[float], judge_b_all: Sequence[float],
                   judge_a_labelled: Sequence[float], judge_b_labelled: Sequence[float],
                   human_a_labelled: Sequence[float], human_b_labelled: Sequence[float],
                   alpha: float = 0.05) -> PPIResult:
    """Paired B − A difference by PPI: the per-case difference is the score, i.e.
    ``ppi_mean_ci(b_all − a_all, b_lab − a_lab (judge), b_lab − a_lab (human))``."""
    ja, jb = _vec("judge_a_all", judge_a_all), _vec("judge_b_all", judge_b_all)
    la, lb = _vec("judge_a_labelled", judge_a_labelled), _vec("judge_b_labelled", judge_b_labelled)
    ha, hb = _vec("human_a_labelled", human_a_labelled), _vec("human_b_labelled", human_b_labelled)
    if ja.shape != jb.shape or la.shape != lb.shape or ha.shape != hb.shape:
        raise ValueError("A and B scores must be paired (same length)")
    return ppi_mean_ci(jb - ja, lb - la, hb - ha, alpha=alpha)


def _ppi_core(judge_est: float, judge_var: float | None,
              strata: dict[Any, tuple[int, Sequence[float]]], alpha: float
              ) -> tuple[PPIResult, str | None]:
    """judge_est − Σ_h N_h·mean(r_h), with r already on the estimand's scale (so that the
    judge's total bias is Σ over all units of r). Var: judge_var + Σ_h N_h²·(1 − n_h/N_h)·
    s²_h/n_h (stratified sampling of the rectifier; a fully labelled stratum adds 0)."""
    corr, var, note = 0.0, judge_var, None
    for h, (big_n, given) in sorted(strata.items(), key=lambda kv: str(kv[0])):
        r = np.asarray(given, dtype=float)
        if big_n == 0:
            continue
        if r.size == 0:
            return PPIResult(None, None, None), f"no human label in stratum {h!r}"
        if r.size > big_n:
            raise ValueError(f"stratum {h!r}: more labelled units ({r.size}) than units ({big_n})")
        corr += big_n * float(r.mean())
        if r.size == big_n:
            continue
        if r.size < 2:
            var, note = None, f"one human label in stratum {h!r}: CI undefined"
            continue
        if var is not None:
            var += big_n ** 2 * (1.0 - r.size / big_n) * float(r.var(ddof=1)) / r.size
    return _interval(judge_est - corr, var, alpha), note


def ppi_stratified_ci(judge_all: Sequence[float], strata_all: Sequence[Any],
                      labelled_index: Sequence[int], human_labelled: Sequence[float],
                      alpha: float = 0.05) -> PPIResult:
    """PPI mean when the labelled cases were drawn per stratum (a review pack takes every
    flagged case and a random sample of the rest): within each stratum h the labelled
    cases must be a uniform random sample.

        theta = mean(judge_all) − Σ_h (N_h/N)·mean_{labelled in h}(judge − human)
        se^2  = var(judge_all)/N + Σ_h (N_h/N)²·(1 − n_h/N_h)·var_h(judge − human)/n_h

    With one stratum and n ≪ N this is `ppi_mean_ci`. Estimate None when a stratum has
    no label; CI None when a partly labelled stratum has a single label."""
    f = _vec("judge_all", judge_all)
    strata_all = list(strata_all)
    if len(strata_all) != f.size:
        raise ValueError("strata_all must give one stratum per case")
    y = _vec("human_labelled", human_labelled)
    idx = [int(i) for i in labelled_index]
    if len(idx) != y.size or len(set(idx)) != len(idx):
        raise ValueError("labelled_index must be distinct and paired with human_labelled")
    if f.size == 0:
        raise ValueError("judge_all is empty")
    big = f.size
    r_by: dict[Any, list[float]] = defaultdict(list)
    for i, yi in zip(idx, y):
        r_by[strata_all[i]].append((f[i] - yi) / big)
    sizes = Counter(strata_all)
    judge_var = float(f.var(ddof=1)) / big if big >= 2 else None
    res, _ = _ppi_core(float(f.mean()), judge_var,
                       {h: (sizes[h], r_by.get(h, [])) for h in sizes}, alpha)
    return res


def _ppi_block(estimand: str, judge: PPIResult, ppi: PPIResult, big_n: int, n_lab: int,
               note: str | None, limits: tuple[float, float], shift: float = 0.0) -> dict:
    """Shifted onto the estimand's scale and clipped to the range it can take: a normal
    interval (or a rectified estimate) may otherwise leave it."""
    lo, hi = limits

    def d(r: PPIResult) -> dict:
        def sh(v: float | None) -> float | None:
            return None if v is None else min(hi, max(lo, v - shift))

        return {"estimate": sh(r.estimate), "ci_low": sh(r.ci_low), "ci_high": sh(r.ci_high)}

    return {"estimand": estimand, "N": big_n, "n_labelled": n_lab, "judge_only": d(judge),
            "ppi": d(ppi), "ci_method": "normal approximation for both CIs", "note": note}


def _judge_and_ppi(judge_values, sizes: Counter, rectifiers: dict[str, list[float]],
                   n_labelled: int, alpha: float) -> tuple[PPIResult, PPIResult, str | None]:
    """The judge-only interval of a mean over all N, and its prediction-powered correction by
    the labelled items' rectifiers per stratum (none until something is labelled)."""
    big = len(judge_values)
    mean = float(judge_values.mean())
    jvar = float(judge_values.var(ddof=1)) / big if big >= 2 else None
    judge = _interval(mean, jvar, alpha)
    if not n_labelled:
        return judge, PPIResult(None, None, None), "no human labels"
    ppi, note = _ppi_core(mean, jvar, {h: (sizes[h], rectifiers.get(h, [])) for h in sizes},
                          alpha)
    return judge, ppi, note


def ppi_headlines(store: Store, run_id: str, alpha: float | None = None) -> dict:
    """Judge-only and prediction-powered estimates of the headline B − A differences.

    pairwise: win rate of B (B wins 1, tie ½, A wins 0) − 0.5 over the report's finished
      cases; the human label of an item is its score (mean over reviewers); strata =
      flagged (the orders disagree) and the agreed outcomes A, B and tie.
    faithfulness: mean over cases of (supported share of B's claims − A's); claim-level
      human labels correct the judge's claim verdicts, each weighted ±1/(N·m) for its
      answer's m claims; strata = judged supported / unsupported.
    A judge is absent from the result when the run has no such judgment; `ppi` values are
    None (with a note) until every stratum has a human label."""
    run = load_run(store, run_id)
    alpha = run_config(run).alpha if alpha is None else float(alpha)
    finished = finished_cases(store, run_id)
    items = {r["item_id"]: r for r in store.review_items(run_id)}
    human: dict[str, list[str]] = defaultdict(list)
    for lab in store.human_labels(run_id):
        if lab["item_id"] in items:
            human[lab["item_id"]].append(lab["label"])
    out: dict[str, Any] = {"alpha": alpha}

    # pairwise
    verdicts = {cid: v for cid, v in pairwise_verdicts(store, run_id).items() if cid in finished}
    if verdicts:
        ids = sorted(verdicts)
        f = np.array([SCORE[outcome(*verdicts[c])] for c in ids])
        strata = [pairwise_stratum(*verdicts[c]) for c in ids]
        pos = {c: i for i, c in enumerate(ids)}
        y_by: dict[int, float] = {}
        for item_id, labs in human.items():
            it = items[item_id]
            if it["judge"] == "pairwise" and it["case_id"] in pos:
                sc = [SCORE[lab] for lab in labs if lab in SCORE]
                if sc:
                    y_by[pos[it["case_id"]]] = sum(sc) / len(sc)
        big = len(ids)
        r_by: dict[str, list[float]] = defaultdict(list)
        for i, y in y_by.items():
            r_by[strata[i]].append((f[i] - y) / big)
        judge, ppi, note = _judge_and_ppi(f, Counter(strata), r_by, len(y_by), alpha)
        out["pairwise"] = _ppi_block("B win rate (ties ½) − 0.5", judge, ppi, big, len(y_by),
                                     note, (-0.5, 0.5), shift=0.5)

    # faithfulness
    score: dict[tuple[str, str], float] = {}
    for j in store.judgments(run_id, judge="faithfulness"):
        if j["sample"] == 0 and j["score"] is not None and j["subject"] in ("A", "B"):
            score[(j["case_id"], j["subject"])] = float(j["score"])
    fids = sorted(c for c in finished if (c, "A") in score and (c, "B") in score)
    if fids:
        big = len(fids)
        dj = np.array([score[(c, "B")] - score[(c, "A")] for c in fids])
        fset = set(fids)
        claims = [c for c in store.claims(run_id) if c["case_id"] in fset and c["verdict"]]
        m = Counter((c["case_id"], c["variant"]) for c in claims)
        sizes = Counter(claim_label(c["verdict"]) for c in claims)
        by_key = {(c["case_id"], c["variant"], c["idx"]): c for c in claims}
        r_by = defaultdict(list)
        n_lab = 0
        for item_id, labs in human.items():
            it = items[item_id]
            if it["judge"] != "faithfulness":
                continue
            mp = json.loads(it["mapping_json"] or "{}")
            c = by_key.get((it["case_id"], mp.get("variant"), mp.get("idx")))
            if c is None:
                continue
            ys = [1.0 if lab == "supported" else 0.0 for lab in labs if lab in CLAIM_LABELS]
            if not ys:
                continue
            fi = 1.0 if c["verdict"] == "supported" else 0.0
            sign = 1.0 if c["variant"] == "B" else -1.0
            label = claim_label(c["verdict"])
            assert label is not None  # only claims with a verdict are kept
            r_by[label].append(
                sign * (fi - sum(ys) / len(ys)) / (big * m[(c["case_id"], c["variant"])]))
            n_lab += 1
        judge, ppi, note = _judge_and_ppi(dj, sizes, r_by, n_lab, alpha)
        out["faithfulness"] = _ppi_block("mean per-case supported-claim share, B − A", judge,
                                         ppi, big, n_lab, note, (-1.0, 1.0))
    return out
