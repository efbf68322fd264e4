"""The one sentence abtest exists to say, and the exact reasons when it cannot.

The frozen claim "given these contexts, B was more faithful and no less complete than
A" is licensed only when every condition in docs/CLAIM_STATISTICS.md holds:

1. the run is complete, a prompt comparison, without model drift or self-judging;
2. faithfulness B − A is positive and significant after Holm;
3. it survives the worst-case bound for pairs only one variant left unscored;
4. coverage is non-inferior (margins.coverage);
5. refusals on answerable questions did not rise (margins.abstention_answerable);
6. correct abstention on unanswerable questions did not fall (margins.abstention_unanswerable);
7. each judge the claim rests on (faithfulness, coverage, abstention) is validated on
   its own human-labelled items: enough labels and the lower confidence limit of
   Cohen's kappa at or above review.min_kappa.

Each condition rests on enough evidence (docs/CLAIM_STATISTICS.md §2, §10): a non-inferiority
condition on at least the independent cases its margin needs (`min_n`, counted as Kish's
n²/Σn_g² when cases share groups), a cluster-robust test on at least `min_groups` groups;
each reason names its N (cases, and groups when there are any).

The live report uses `effect_reasons` and `validation_reasons` for its own sentence.
"""

from __future__ import annotations

from typing import Iterable

from abtest.core.fmt import num, pct, signed
from abtest.review.agreement import CLAIM_JUDGES

SCOPE = "frozen: given these contexts (never an end-to-end claim)"


def cases_text(m: dict, noun: str = "cases") -> str:
    """"40 cases", or "120 cases in 40 groups" when the metric's cases share groups."""
    g = m.get("n_groups")
    return f"{m.get('n')} {noun}" + (f" in {g} groups" if g is not None else "")


def too_few_groups(m: dict | None) -> bool:
    """The metric's cases share groups, but too few for its cluster-robust test."""
    return bool(m and m.get("n_groups") is not None and m.get("min_groups")
                and m["n_groups"] < m["min_groups"])


def _too_few_reason(m: dict, name: str) -> str:
    return (f"too few groups: {name} rests on {cases_text(m)}; a claim needs at least "
            f"{m['min_groups']} groups")


def _short_of_floor(m: dict, ni: dict) -> bool:
    """Fewer independent cases than the margin needs (Kish's count when grouped)."""
    units = ni.get("units")
    return bool(ni.get("min_n") and (units if units is not None else m.get("n") or 0)
                < ni["min_n"])


def _floor_reason(m: dict, ni: dict, label: str, noun: str = "cases") -> str:
    """'coverage: 5 cases with references; non-inferiority at margin 0.05 needs ≥ 52'."""
    worth = ""
    if ni.get("units") is not None:
        worth = f", worth {num(ni['units'], 1)} independent ones"
    return (f"{label}: {cases_text(m, noun)}{worth}; non-inferiority at margin "
            f"{ni.get('margin')} needs ≥ {ni['min_n']}")


def _level(m: dict, fixed: str) -> str:
    """How an interval is named: its level, or "anytime-valid" for a sequential run's."""
    return "anytime-valid" if m.get("anytime") else fixed


def _faithfulness_reasons(f: dict | None, alpha: float) -> list[str]:
    if not f or f.get("difference") is None:
        return ["faithfulness was not measured on any complete pair"]
    lvl = _level(f, pct(f["conf_level"]) + " CI")
    what = (f"faithfulness B − A = {signed(f['difference'])} ({lvl} {num(f['ci_low'])} to "
            f"{num(f['ci_high'])}, Holm p = {num(f.get('p_holm'))}, over {cases_text(f)})")
    out = []
    if too_few_groups(f):
        out.append(_too_few_reason(f, "faithfulness"))
    elif f.get("p_holm") is None:
        out.append(f"no test possible: {what}" + (f"; {f['note']}" if f.get("note") else ""))
    elif f["p_holm"] > alpha:
        mde = (f.get("mde") or {})
        tail = ""
        if mde.get("mde") is not None and mde.get("effective_n") is not None:
            tail = (f"; the smallest difference this effective N ({num(mde['effective_n'], 1)} "
                    f"of {cases_text(f)}) detects with 80% power is {num(mde['mde'])}")
        elif mde.get("mde") is not None:
            tail = f"; the smallest difference this N detects with 80% power is {num(mde['mde'])}"
        elif mde.get("note"):
            tail = f"; {mde['note']}"
        out.append(f"not significant: {what}{tail}")
    elif f["difference"] < 0:
        out.append(f"significant, in A's favour: {what}")
    elif f["difference"] == 0:
        out.append(f"no difference: {what}")
    capped = (f.get("at_claim_cap") or {}).get("B") or []
    if capped:
        out.append(f"{len(capped)} of B's answers gave the claim extractor the most claims it "
                   f"keeps (max_claims {f.get('max_claims')}): what they said beyond those was "
                   f"never checked (e.g. {', '.join(capped[:3])}); raise max_claims (up to 30) "
                   "and re-run")
    # the bound is over the same pairs plus the answerable one-sided drops: without such a
    # drop it holds whenever the Holm-adjusted test does, so only a significant gain is checked
    dr = f.get("dropped") or {}
    bound = f.get("drop_bound") or {}
    significant_gain = f.get("p_holm") is not None and f["p_holm"] <= alpha and f["difference"] > 0
    if significant_gain and not bound.get("holds"):
        why_b = ", ".join(f"{k} {v}" for k, v in ((dr.get("reasons") or {}).get("B") or {}).items())
        out.append(f"the faithfulness gain does not survive the answerable pairs only one "
                   f"variant left unscored ({bound.get('imputed_b')} without a B score"
                   + (f" — B overall: {why_b}" if why_b else "") + f", {bound.get('imputed_a')} "
                   f"without an A score): counting them at the worst case for B, B − A = "
                   f"{signed(bound.get('difference'))} (p = {num(bound.get('p_value'))})")
    return out


def _binary_reason(m: dict | None, label: str, alpha: float, remedy: str) -> str | None:
    if not m or not m.get("n"):
        return f"no {label.split(' on ')[-1]}: {remedy}"
    ni = m.get("noninferiority") or {}
    short = _short_of_floor(m, ni)
    if short and ni.get("units") is not None:
        return _floor_reason(m, ni, label)
    if ni.get("holds"):
        return None
    side = "lower" if m.get("better") == "higher" else "upper"
    limit, margin = ni.get(side), ni.get("margin") or 0.0
    if short and limit is not None and (limit > -margin if side == "lower" else limit < margin):
        return _floor_reason(m, ni, label)     # the limit clears; the cases are too few
    lvl = _level(ni, "one-sided " + pct(1 - alpha))
    if m.get("better") == "higher":
        worse = (m.get("difference") or 0) < 0
        lim = f"lower {lvl} limit {num(ni.get('lower'))} ≤ −{ni.get('margin')}"
        head = f"{label} {'fell' if worse else 'not shown not to fall'}"
    else:
        worse = (m.get("difference") or 0) > 0
        lim = f"upper {lvl} limit {num(ni.get('upper'))} ≥ {ni.get('margin')}"
        head = f"{label} {'rose' if worse else 'not shown not to rise'}"
    text = f"{head}: B − A = {signed(m.get('difference'))}, {lim} (the margin)"
    if ni.get("min_n") and m["n"] < ni["min_n"]:
        text += (f"; with {m['n']} such cases it cannot hold at this margin: it needs at least "
                 f"{ni['min_n']}")
    else:
        text += f", over {cases_text(m)}"
    return text


def effect_reasons(m: dict, cfg) -> list[str]:
    """Why the measured effect does not license the claim (frozen and live alike)."""
    alpha = cfg.alpha
    reasons = _faithfulness_reasons(m.get("faithfulness"), alpha)
    c = m.get("coverage")
    if c is None:
        reasons.append("coverage was not measured (the coverage judge is off, or no case has "
                       "key points or a reference answer)")
    elif c.get("difference") is None:
        reasons.append("coverage was not measured on any complete pair")
    elif too_few_groups(c):
        reasons.append(_too_few_reason(c, "coverage"))
    elif _short_of_floor(c, c.get("noninferiority") or {}):
        reasons.append(_floor_reason(c, c["noninferiority"], "coverage", "cases with references"))
    elif not (c.get("noninferiority") or {}).get("holds"):
        ni = c.get("noninferiority") or {}
        reasons.append(f"coverage not shown non-inferior: B − A = {signed(c['difference'])}, "
                       f"lower {_level(ni, 'one-sided ' + pct(1 - alpha))} limit {num(ni.get('ci_low'))} ≤ "
                       f"−{ni.get('margin')} (the margin), over {cases_text(c)}")
    pw = m.get("pairwise") or {}
    if pw.get("direction") == "A":
        # B more faithful yet significantly less preferred (e.g. it pastes the context): a
        # reader takes the sentence for "B is better", which the pairwise judge contradicts
        reasons.append(f"the pairwise judge significantly prefers A: A won {pw.get('a_wins')}, "
                       f"B won {pw.get('b_wins')} (Holm p = {num(pw.get('p_holm'))}); read the "
                       "answers before calling B better")
    ab = m.get("abstention")
    if ab is None:
        reasons.append("refusals were not measured (the abstention judge is off): a variant "
                       "that refuses more can look more faithful")
    else:
        for r in (_binary_reason(ab.get("answerable"), "refusals on answerable cases", alpha,
                                 "refusals on answerable questions cannot be checked"),
                  _binary_reason(ab.get("unanswerable"), "correct abstention on unanswerable "
                                 "cases", alpha, "cannot show that B still abstains when the "
                                 "context lacks the answer (add some with `abtest fixtures "
                                 "add-unanswerable`)")):
            if r:
                reasons.append(r)
    return reasons


def validation_reasons(val: dict, judges: Iterable[str] | None = None) -> list[str]:
    """One reason per judge the claim rests on that is not validated."""
    out = []
    for j in CLAIM_JUDGES:
        if judges is not None and j not in judges:
            continue  # effect_reasons already says the judge is off
        b = val.get(j) or {}
        if b.get("validated"):
            continue
        out.append(f"{j} judge not validated: {b.get('reason') or 'no human labels'}")
    return out


def licensed_claim(report: dict, cfg, *, incomplete_reason: str | None = None) -> dict:
    """The licensed sentence only when every condition holds; otherwise exactly why not.
    `incomplete_reason` says why an incomplete run is so, and what to do (the builder knows
    whether it is still running, or how to resume it)."""
    reasons = []
    m = report["metrics"]
    if report["status"] != "complete":
        reasons.append(incomplete_reason or
                       f"incomplete run: {len(report['unfinished_cases'])} case(s) unfinished; "
                       "nothing is estimated until it is complete (`abtest run --resume`)")
    if report["comparison_kind"] == "pipeline_change":
        reasons.append("pipeline change: this is a pipeline change, re-measure end to end; the "
                       "frozen claim does not apply (" + "; ".join(report["pipeline_reasons"]) + ")")
    elif report["comparison_kind"] == "model":
        reasons.append("model comparison: the variants use different generator models, so this is "
                       "not a prompt comparison")
    for role in ("generator", "judge"):
        use = report["models"][role]
        # one requested model, several versions; a report without `drift` (older) counts any
        drift = use.get("drift")
        if drift is None and len(use["resolved"]) > 1:
            drift = {use["requested"]: use["resolved"]}
        for versions in (drift or {}).values():
            reasons.append(f"model version drift: the {role} resolved to {', '.join(versions)}")
    if report["self_judge"]:
        reasons.append("self-judging: the judge model is the generator model")
    if report["status"] == "complete":
        reasons += effect_reasons(m, cfg)
    if (report.get("golden") or {}).get("is_draft"):
        reasons.append(report["golden"]["note"])
    val = report["judge_validation"]
    if report["status"] == "complete":
        reasons += validation_reasons(val, report.get("judges"))
    if reasons:
        return {"licensed": False, "sentence": None, "reasons": reasons, "scope": SCOPE}
    return {"licensed": True, "sentence": sentence(m, val, cfg), "reasons": [], "scope": SCOPE}


def sentence(m: dict, val: dict, cfg, prefix: str = "Given these contexts") -> str:
    f, c = m["faithfulness"], m["coverage"]
    ab = m["abstention"]
    dr = f.get("dropped") or {}
    n_drop = f.get("n_dropped") or 0
    dropped = ""
    if n_drop:
        dropped = (f"; {n_drop} dropped for an answer without a factual claim (A {len(dr['a_only'])}, "
                   f"B {len(dr['b_only'])}, both {len(dr['both'])}), the gain holding at the worst "
                   "case for them")
    kappas = ", ".join(f"{j} {num(val[j]['kappa'])} (lower limit {num(val[j]['ci_low'])}, "
                       f"{val[j]['n_labels']} labels)" for j in CLAIM_JUDGES)
    lvl = _level(f, pct(f["conf_level"]) + " CI")

    def over(m: dict) -> str:
        return f"{m.get('n')}" + (f" in {m['n_groups']} groups" if m.get("n_groups") else "")

    return (f"{prefix}, variant B was more faithful and no less complete than A, paired over "
            f"{cases_text(f, 'questions')}{dropped} (faithfulness {f['difference']:+.3f}, {lvl} "
            f"{num(f['ci_low'])} to {num(f['ci_high'])}, Holm p = {num(f['p_holm'])}; coverage "
            f"B − A {c['difference']:+.3f} over {cases_text(c, 'questions')}, margin "
            f"{c['noninferiority']['margin']}; refusals on answerable questions B − A "
            f"{signed(ab['answerable']['difference'])} over {over(ab['answerable'])}, margin "
            f"{ab['answerable']['noninferiority']['margin']}; correct abstention on unanswerable "
            f"questions B − A {signed(ab['unanswerable']['difference'])} over "
            f"{over(ab['unanswerable'])}, margin "
            f"{ab['unanswerable']['noninferiority']['margin']}), with each judge validated against "
            f"a human sample (kappa: {kappas}).")
