"""Judge against human: agreement and Cohen's kappa per judge, and the rule that validates
a judge the claim rests on. Labels are never pooled across judges: a judge at chance would
hide behind another."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any, Sequence

from abtest.core.fmt import kappa_text, num, pct
from abtest.store.runs import load_run, run_config
from abtest.review.ppi import ppi_headlines
from abtest.stats import cohen_kappa
from abtest import stats

if TYPE_CHECKING:
    from abtest.store import Store

CLAIM_JUDGES = ("faithfulness", "coverage", "abstention")
VALIDATED_JUDGES = ("pairwise", "faithfulness", "coverage", "abstention")


def _kappa_block(judge: Sequence, human: Sequence, conf_level: float) -> dict:

    n = len(judge)
    conf: dict[str, dict[str, int]] = {}
    for j, h in zip(judge, human):
        conf.setdefault(j, {}).setdefault(h, 0)
        conf[j][h] += 1
    out: dict[str, Any] = {"n": n, "agreement": None, "kappa": None, "ci_low": None,
                           "ci_high": None, "confusion": conf}
    if n:
        k = cohen_kappa(list(judge), list(human), conf_level=conf_level)
        out.update({"agreement": k.p_observed, "kappa": k.kappa, "ci_low": k.ci_low,
                    "ci_high": k.ci_high})
        if k.note:
            out["note"] = k.note
    return out


def _labelled_pairs(store: Store, run_id: str):
    items = {r["item_id"]: r for r in store.review_items(run_id)}
    for lab in store.human_labels(run_id):
        item = items.get(lab["item_id"])
        if item is not None:
            yield item, lab


def agreement(store: Store, run_id: str, alpha: float = 0.05) -> dict:
    """Judge vs human per judge type: raw agreement and Cohen's kappa with a (1 − alpha)
    CI. Pairwise items whose two judge orders disagreed are left out of the pairwise
    kappa and reported under ``position_inconsistent`` (the judge's combined outcome
    for them is "tie"); ``all_items`` is the pairwise kappa with them counted as tie.
    Labels are never pooled across judges: a judge at chance would hide behind another."""
    conf_level = 1.0 - alpha
    by: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    all_j, all_h, incons = [], [], []
    items_by_judge: dict[str, set[str]] = defaultdict(set)
    reviewers = set()
    for item, lab in _labelled_pairs(store, run_id):
        reviewers.add(lab["reviewer"])
        if item["judge_label"] is None:
            continue
        items_by_judge[item["judge"]].add(item["item_id"])
        m = json.loads(item["mapping_json"] or "{}")
        if item["judge"] == "pairwise":
            all_j.append(item["judge_label"])
            all_h.append(lab["label"])
            if m.get("position_inconsistent"):
                incons.append((lab["label"], m.get("verdict_ab"), m.get("verdict_ba")))
                continue
        by[item["judge"]][0].append(item["judge_label"])
        by[item["judge"]][1].append(lab["label"])
    out: dict[str, Any] = {}
    if all_j:
        pw = _kappa_block(*by["pairwise"], conf_level)
        k = len(incons)
        pw["position_inconsistent"] = {
            "n": k,
            "human_labels": dict(Counter(h for h, _, _ in incons)),
            "agree_with_ab_order": (sum(h == ab for h, ab, _ in incons) / k) if k else None,
            "agree_with_ba_order": (sum(h == ba for h, _, ba in incons) / k) if k else None,
            "human_tie_share": (sum(h == "tie" for h, _, _ in incons) / k) if k else None,
            "note": "the two judge orders disagreed; the judge's outcome counts as tie",
        }
        pw["all_items"] = _kappa_block(all_j, all_h, conf_level)
        pw["n_items"] = len(items_by_judge["pairwise"])
        out["pairwise"] = pw
    for judge in ("faithfulness", "coverage", "abstention"):
        if by[judge][0]:
            blk = _kappa_block(*by[judge], conf_level)
            blk["n_items"] = len(items_by_judge[judge])
            out[judge] = blk
    out["reviewers"] = sorted(reviewers)
    out["conf_level"] = conf_level
    return out


# --------------------------------------------------------------------------- status

def status(store: Store, run_id: str, min_labels: int | None = None,
           min_kappa: float | None = None, alpha: float | None = None) -> dict:
    """How far each judge is from validated (the report's rule, per judge on its own items:
    at least min_labels human labels and the lower (1 − alpha) limit of kappa ≥ min_kappa).
    Thresholds and alpha default to the run's stored config. Includes `agreement` and the
    PPI headlines."""
    run = load_run(store, run_id)
    cfg = run_config(run)
    upd: dict[str, Any] = {}
    if min_labels is not None:
        upd["min_labels"] = int(min_labels)
    if min_kappa is not None:
        upd["min_kappa"] = float(min_kappa)
    cfg = cfg.model_copy(update={"review": cfg.review.model_copy(update=upd),
                                 **({"alpha": float(alpha)} if alpha is not None else {})})
    items = store.review_items(run_id)
    labels = store.human_labels(run_id)
    by_id = {r["item_id"]: r for r in items}
    by_judge: dict[str, dict[str, int]] = {}
    for r in items:
        by_judge.setdefault(r["judge"], {"items": 0, "labelled_items": 0, "labels": 0})
        by_judge[r["judge"]]["items"] += 1
    labelled_items: set[str] = set()
    for lab in labels:
        it = by_id.get(lab["item_id"])
        if it is None:
            continue
        by_judge[it["judge"]]["labels"] += 1
        if lab["item_id"] not in labelled_items:
            by_judge[it["judge"]]["labelled_items"] += 1
            labelled_items.add(lab["item_id"])
    val = run_judge_validation(store, run_id, cfg)
    unlabelled = len(items) - len(labelled_items)
    claim_judges = val["claim_judges"]
    if not items:
        msg = f"no review pack yet: run `abtest review export {run_id}`"
    elif val["validated"]:
        msg = "every judge the claim rests on is validated: " + ", ".join(
            f"{j} kappa {val[j]['kappa']:.3f} (lower limit {val[j]['ci_low']:.3f})"
            for j in claim_judges)
    else:
        parts = [f"{j}: {val[j]['reason']}" for j in claim_judges if not val[j]["validated"]]
        msg = "not validated — " + "; ".join(parts)
        short = [j for j in claim_judges if val[j]["n_labels"] < cfg.review.min_labels]
        if short and unlabelled == 0:
            msg += (f"; every item is labelled: export a bigger pack (`abtest review export "
                    f"{run_id} --n …`): each item counts once, however many reviewers label it")
    return {"run_id": run_id, "n_items": len(items), "n_labelled_items": len(labelled_items),
            "n_unlabelled_items": unlabelled, "min_labels": cfg.review.min_labels,
            "min_kappa": cfg.review.min_kappa, "validated": val["validated"],
            "validation": val, "by_judge": by_judge,
            "reviewers": sorted({lab["reviewer"] for lab in labels if lab["reviewer"]}),
            "message": msg, "alpha": cfg.alpha,
            "judges": agreement(store, run_id, alpha=cfg.alpha),
            "ppi": ppi_headlines(store, run_id, alpha=cfg.alpha)}


def render_status(st: dict) -> str:
    """Plain-text rendering of `status()` for the CLI."""
    lines = [f"run {st['run_id']}: {st['n_items']} review item(s), {st['n_labelled_items']} "
             f"labelled, {st['n_unlabelled_items']} unlabelled; reviewers: "
             f"{', '.join(st['reviewers']) or '-'}"]
    for j, c in sorted(st["by_judge"].items()):
        lines.append(f"  {j:<13} items {c['items']:>4}  labelled {c['labelled_items']:>4}  "
                     f"labels {c['labels']:>4}")
    val = st["validation"]
    lines.append(f"validation rule: {val['rule']}")
    for j in ("pairwise", *val["claim_judges"]):
        b = val[j]
        lines.append(f"  {j:<13} {b['n_labels']:>4} labels, kappa "
                     f"{kappa_text(b['kappa'], b['ci_low'], b['ci_high'])} → "
                     + ("VALIDATED" if b["validated"] else f"not validated ({b.get('reason')})")
                     + ("" if j in val["claim_judges"] else "  (not part of the claim)"))
    lines.append(f"  {st['message']}")
    conf = f"{100 * (1 - st['alpha']):.10g}"
    for j in ("pairwise", "faithfulness", "coverage", "abstention"):
        a = st["judges"].get(j)
        if not a:
            continue
        lines.append(f"agreement {j}: n {a['n']}, raw {num(a['agreement'])}, kappa "
                     f"{kappa_text(a['kappa'], a['ci_low'], a['ci_high'])} ({conf}% CI)")
        pi = a.get("position_inconsistent") or {}
        if pi.get("n"):
            lines.append(f"  position-inconsistent items: {pi['n']} (human labels "
                         f"{pi['human_labels']}; human sides with the A-first order "
                         f"{num(pi['agree_with_ab_order'], 2)}, B-first order "
                         f"{num(pi['agree_with_ba_order'], 2)})")
    for j in ("pairwise", "faithfulness"):
        p = (st.get("ppi") or {}).get(j)
        if not p:
            continue
        jo, pp = p["judge_only"], p["ppi"]
        lines.append(f"PPI {j} ({p['estimand']}): judge-only {num(jo['estimate'])} "
                     f"[{num(jo['ci_low'])}, {num(jo['ci_high'])}]; prediction-powered "
                     f"{num(pp['estimate'])} [{num(pp['ci_low'])}, {num(pp['ci_high'])}] "
                     f"(N {p['N']}, human-labelled {p['n_labelled']})"
                     + (f" — {p['note']}" if p.get("note") else ""))
    return "\n".join(lines) + "\n"


def judge_validation(pairs_by_judge: dict[str, list[tuple[Any, Any]]], cfg) -> dict:
    """Per judge: Cohen's kappa of its verdicts against human labels on its own items.

    Validated when there are at least review.min_labels labels and the lower (1 − alpha)
    limit of kappa is at least review.min_kappa: the point estimate alone lets a judge
    pass on luck in a small sample."""

    lvl = 1 - cfg.alpha
    rv = cfg.review
    out: dict[str, Any] = {}
    for judge in VALIDATED_JUDGES:
        pairs = [(j, h) for j, h in pairs_by_judge.get(judge, []) if j is not None and h is not None]
        b: dict[str, Any] = {"n_labels": len(pairs), "kappa": None, "ci_low": None,
                             "ci_high": None, "agreement": None, "validated": False}
        if len(pairs) >= 2:
            k = stats.cohen_kappa([p[0] for p in pairs], [p[1] for p in pairs], conf_level=lvl)
            b.update({"kappa": k.kappa, "ci_low": k.ci_low, "ci_high": k.ci_high,
                      "agreement": k.p_observed})
            if k.note:
                b["note"] = k.note
        if len(pairs) < rv.min_labels:
            b["reason"] = f"{len(pairs)} human label(s) of its items (need {rv.min_labels})"
        elif b["kappa"] is None:
            b["reason"] = (f"kappa undefined ({b.get('note') or 'no variation in the labels'}): "
                           "label items of both kinds")
        elif b["ci_low"] is None or b["ci_low"] < rv.min_kappa:
            b["reason"] = (f"kappa {num(b['kappa'])}, lower {pct(lvl)} limit {num(b['ci_low'])} "
                           f"< {rv.min_kappa}")
        else:
            b["validated"] = True
        out[judge] = b
    out["claim_judges"] = list(CLAIM_JUDGES)
    out["validated"] = all(out[j]["validated"] for j in CLAIM_JUDGES)
    out["rule"] = (f"each judge on its own items: ≥ {rv.min_labels} human labels and the lower "
                   f"{pct(lvl)} limit of Cohen's kappa ≥ {rv.min_kappa}")
    out["min_labels"], out["min_kappa"] = rv.min_labels, rv.min_kappa
    return out


def run_judge_validation(store: Store, run_id: str, cfg) -> dict:
    """Per judge, its verdicts against the human labels of its own review items, one human
    label per item: a second reviewer of the same items adds no evidence about the judge
    (15 reviewers of 2 items are 2 items, not 30 labels). An item's label is its reviewers'
    majority; where they split evenly the judge is counted as disagreeing (it cannot be
    credited with an item people could not agree on)."""
    items = {r["item_id"]: r for r in store.review_items(run_id)}
    by_item: dict[str, list[Any]] = defaultdict(list)
    for lab in store.human_labels(run_id):
        it = items.get(lab["item_id"])
        if it is not None and it["judge_label"] is not None and lab["label"] is not None:
            by_item[lab["item_id"]].append(lab["label"])
    pairs: dict[str, list[tuple]] = defaultdict(list)
    for item_id, labels in by_item.items():
        it = items[item_id]
        pairs[it["judge"]].append((it["judge_label"], item_label(labels, it["judge_label"])))
    return judge_validation(pairs, cfg)


def item_label(labels: list[Any], judge_label: Any) -> Any:
    """The human label of one item: the majority; on an even split, a label other than the
    judge's (the worst case for the judge)."""
    counts = Counter(labels).most_common()
    top = [lab for lab, n in counts if n == counts[0][1]]
    if len(top) == 1:
        return top[0]
    return next(lab for lab in top if lab != judge_label)
