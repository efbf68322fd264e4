"""The report's statistics from per-case judge verdicts.

One function, `compute_metrics`, serves the frozen report, the live report and the
validity simulation (scripts/validity_sim.py), so the numbers the simulation checks are
the numbers users read. Inputs are plain maps; nothing here reads a store.

Conventions (docs/CLAIM_STATISTICS.md): differences are B − A; every CI is clipped to the
range its quantity can take; the Holm family is fixed from the configured judges before
any data is seen, and a member without data enters it as p = 1.

Groups (docs/CLAIM_STATISTICS.md §10): when `groups` puts two or more of a metric's cases in one
group, that metric's tests take the group as the unit (cluster-robust t, Durkalski's
McNemar, the sign test on per-group sums) and say so in `inference`; otherwise every
number is the iid one, computed by the same calls as without groups.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, is_dataclass
from datetime import date, datetime
from typing import Any, Callable, Mapping

from abtest.core.fmt import pct
from abtest.core.groups import MIN_GROUPS
from abtest.stats.sizing import holm_family
from abtest import stats
import statistics
from scipy.stats import norm
import numpy as np
import warnings
from statsmodels.discrete.discrete_model import Logit
from scipy import stats as st
from scipy.special import expit

# judges that give each answer a 0–1 score: summarised, compared and shown per case alike
SCORE_JUDGES = ("faithfulness", "coverage", "quality", "relevance", "conformance")
DIFF_LIMITS = (-1.0, 1.0)  # the range of a difference of two 0–1 scores or rates
# a length difference below this share of the pair's mean length counts as "equal length"
LENGTH_TOLERANCE = 0.05
CLUSTER_T = "cluster (CR2, Bell–McCaffrey df)"

JudgeMap = Mapping[tuple[str, str], Mapping[str, Mapping[str, Any]]]
_NONE: dict = {}  # read-only stand-in for an absent map or row


def plain(obj: Any) -> Any:
    """Dataclasses, tuples and dates as JSON-ready values."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {k: plain(v) for k, v in asdict(obj).items()}
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    return obj


def _clip(x, lo=DIFF_LIMITS[0], hi=DIFF_LIMITS[1]):
    return None if x is None else min(hi, max(lo, x))


def group_labels(ids: list[str], groups: Mapping[str, str] | None) -> list | None:
    """Each id's group label (a case `groups` does not name is a group of its own), or None
    when no group among `ids` holds two cases: then nothing is clustered and every test is
    the iid one. Labels are tuples, so a user's group named like a case id never meets it."""
    if not groups:
        return None
    labels = [(0, groups[c]) if groups.get(c) is not None else (1, c) for c in ids]
    return None if len(set(labels)) == len(labels) else labels


def _too_few(n: int, g: int) -> str:
    return (f"too few groups: {n} cases in {g} groups; a claim needs at least {MIN_GROUPS} "
            "groups (the interval is the betting one on the group means, valid at any number "
            "of groups, and wide)")


def direction(m: dict, alpha: float) -> str | None:
    """'B' or 'A' when the metric's difference is significant after Holm, else None."""
    if not m or m.get("difference") is None or m.get("p_holm") is None:
        return None
    if m["p_holm"] > alpha or m["difference"] == 0:
        return None
    return "B" if m["difference"] > 0 else "A"


# --------------------------------------------------------------------------- continuous

def continuous(metric: str, a_by: Mapping[str, float | None], b_by: Mapping[str, float | None],
               ids: list[str], alpha: float, *, family_size: int = 1,
               reason: Callable[[str, str], str] | None = None,
               groups: Mapping[str, str] | None = None) -> dict:
    """B − A on the pairs where both sides have a score: interval and p-value from
    `abtest.stats.paired` (the t, CR2 with groups, where the units carry at least 30
    effective units; the betting interval, valid at any N, where they do not), the
    R-compatible Wilcoxon (secondary) and Pratt (sensitivity), on the per-group means with
    groups. Pairs dropped are listed per variant with their reasons (`reason(case_id,
    "A"|"B")`, default "no score")."""

    reason = reason or (lambda _cid, _v: "no score")
    a_only, b_only, both = [], [], []
    used: list[tuple[str, float, float]] = []
    for cid in ids:
        sa, sb = a_by.get(cid), b_by.get(cid)
        if sa is None and sb is None:
            both.append(cid)
        elif sa is None:
            a_only.append(cid)
        elif sb is None:
            b_only.append(cid)
        else:
            used.append((cid, sa, sb))
    why = {"A": Counter(reason(c, "A") for c in a_only + both),
           "B": Counter(reason(c, "B") for c in b_only + both)}
    dropped = {"a_only": a_only, "b_only": b_only, "both": both,
               "reasons": {v: dict(sorted(c.items())) for v, c in why.items()},
               "note": "a_only: A has no score and B has one; b_only: the reverse"}
    level = 1 - alpha
    out: dict[str, Any] = {"metric": metric, "n": len(used), "dropped": dropped,
                           "n_dropped": len(a_only) + len(b_only) + len(both),
                           "a": None, "b": None, "difference": None, "ci_low": None,
                           "ci_high": None, "conf_level": level, "test": "paired_t",
                           "p_value": None, "p_holm": None, "significant": False,
                           "direction": None}
    # each variant over every answer it has a score for, paired or not: what an absolute bar
    # on B (the gate) reads, so answers A left unscored cannot hide B's weaker ones
    for v, by in (("a", a_by), ("b", b_by)):
        own = [s for s in (by.get(cid) for cid in ids) if s is not None]
        out[f"{v}_all"] = sum(own) / len(own) if own else None
        out[f"n_{v}_all"] = len(own)
    if not used:
        out["note"] = "no case has a score on both sides"
        return out
    a = [x[1] for x in used]
    b = [x[2] for x in used]
    labels = group_labels([x[0] for x in used], groups)
    pr = stats.paired(a, b, groups=labels, alpha=alpha)
    if labels is None:
        wa, wb, on = a, b, ""
    else:
        wa, wb, on = stats.group_means(a, labels), stats.group_means(b, labels), \
            " on per-group mean differences"
    w = stats.wilcoxon(wa, wb)
    wp = stats.wilcoxon(wa, wb, zero_method="pratt", method="asymptotic")
    out.update({"a": sum(a) / len(a), "b": sum(b) / len(b), "difference": pr.estimate,
                "ci_low": pr.ci_low, "ci_high": pr.ci_high,
                "ci_method": f"{pr.method}, {pct(level)}, unadjusted, clipped to [-1, 1]",
                "test": _test_name(pr), "p_value": pr.p_value, "d_z": pr.d_z, "sd_d": pr.sd_d,
                "effective_units": pr.effective_units,
                "secondary": {"test": f"wilcoxon{on} (R-compatible: zeros dropped, {w.method}"
                                      + (", continuity correction" if w.method != "exact" else "")
                                      + ")", "method": w.method, "p_value": w.p_value,
                              "n_used": w.n_used},
                "sensitivity": {"test": f"wilcoxon pratt{on}", "p_value": wp.p_value},
                "summary_a": plain(stats.summary(a)), "summary_b": plain(stats.summary(b))})
    if labels is not None:
        g = pr.n_groups or 0
        out.update({"n_groups": g, "design_effect": pr.design_effect,
                    "effective_n": pr.effective_n, "icc": pr.icc, "df": pr.df,
                    "min_groups": MIN_GROUPS,
                    "inference": CLUSTER_T if pr.method == stats.CR2_T else
                    f"betting on the {g} group means (each group one unit)"})
    out["mde"] = _mde(pr, a, b, labels, alpha, family_size)
    note = [x for x in pr.notes if not x.startswith(f"{pr.n_groups} groups: a claim needs")]
    if labels is not None and (pr.n_groups or 0) < MIN_GROUPS:
        out["note"] = _too_few(len(used), pr.n_groups or 0)
    elif pr.sd_d == 0 and pr.estimate == 0:
        out["note"] = "all differences zero: no difference observed (the interval says how " \
                      "large one these pairs cannot rule out)"
    elif note:
        out["note"] = "; ".join(note)
    return out


def _test_name(pr) -> str:

    if pr.method == stats.PAIRED_T:
        return "paired_t"
    if pr.method == stats.CR2_T:
        return "clustered_t (CR2, Bell–McCaffrey df)"
    return "betting" + (" on group means" if pr.n_groups else "")


def _mde(pr, a: list[float], b: list[float], labels, alpha: float, family_size: int
         ) -> dict | None:
    """The smallest difference this N detects with 80 % power, at Holm's first step α/m.
    For the t (CR2) the noncentral-t answer; for the betting interval, its own half-width
    at α/m on these data plus z₀.₈ standard errors (the betting interval is wider than the
    t's, so the t's MDE would overstate what the run can see)."""



    if not pr.sd_d or pr.n < 2:
        return None
    a_m = alpha / max(1, family_size)
    n = pr.n
    block: dict[str, Any] = {"alpha": a_m, "power": 0.8, "sd_d": pr.sd_d}
    if pr.method == stats.PAIRED_T:
        mde = stats.mde_paired_t(n, pr.sd_d, alpha=a_m)
        block.update({"mde": mde.mde, "d_z": mde.d_z})
    elif pr.method == stats.CR2_T:
        if not (pr.effective_n and pr.effective_n > 1 and pr.df):
            return None
        cm = stats.mde_clustered_t(pr.effective_n, pr.df, pr.sd_d, alpha=a_m)
        block.update({"mde": cm.mde, "d_z": cm.d_z, "effective_n": pr.effective_n,
                      "df": pr.df})
    else:
        units = [y - x for x, y in zip(a, b)] if labels is None else \
            [y - x for x, y in zip(stats.group_means(a, labels), stats.group_means(b, labels))]
        k = len(units)
        bc = stats.betting_ci(units, conf_level=1 - a_m)
        if bc.ci_low is None or bc.ci_high is None or k < 2:
            return None
        sd_u = statistics.stdev(units)
        mde_v = (bc.ci_high - bc.ci_low) / 2 + float(norm.ppf(0.8)) * sd_u / math.sqrt(k)
        block.update({"mde": mde_v, "d_z": mde_v / pr.sd_d,
                      "method": "betting: the interval's half-width at α/m plus z₀.₈·SE "
                                "(approximate)"})
        if labels is not None:
            block["effective_n"] = pr.effective_n
    if block.get("mde") is not None and block["mde"] > DIFF_LIMITS[1]:
        block["mde"] = None
        block["note"] = (f"with {n} pairs" + (f" in {pr.n_groups} groups" if pr.n_groups else "")
                         + " no difference within the 0–1 scale is detectable with 80% power")
    return block


def drop_bound(a_by: Mapping[str, float | None], b_by: Mapping[str, float | None],
               ids: list[str], answerable: Mapping[str, bool], alpha: float, *,
               groups: Mapping[str, str] | None = None) -> dict:
    """The faithfulness effect under the worst case for the answerable pairs only one variant
    left unscored: where only B has no score (it refused, or made no claim) B counts 0;
    where only A has none, A counts 1. A variant that refuses exactly the answerable
    questions it would get wrong cannot buy a gain this way. On unanswerable questions an
    answer without a claim is the correct abstention, so those pairs stay out, as do
    pairs where neither side has a score (both behaved alike). The test is `stats.paired`'s,
    as for faithfulness; with groups below MIN_GROUPS the bound cannot hold."""

    a: list[float] = []
    b: list[float] = []
    kept: list[str] = []
    n_a = n_b = 0
    for cid in ids:
        x, y = a_by.get(cid), b_by.get(cid)
        if (x is None) == (y is None):
            if x is None:
                continue
        elif not answerable.get(cid, True):
            continue
        elif y is None:
            y, n_b = 0.0, n_b + 1
        else:
            x, n_a = 1.0, n_a + 1
        assert x is not None and y is not None  # both scored, or the missing one imputed
        a.append(x)
        b.append(y)
        kept.append(cid)
    out: dict[str, Any] = {
        "method": "worst case for B on answerable questions: a pair missing only B's score "
                  "counts B = 0, a pair missing only A's score counts A = 1; the faithfulness "
                  "test (stats.paired)",
        "imputed_b": n_b, "imputed_a": n_a, "n": len(a), "difference": None,
        "ci_low": None, "ci_high": None, "p_value": None, "holds": False}
    if len(a) < 2:
        return out
    labels = group_labels(kept, groups)
    pr = stats.paired(a, b, groups=labels, alpha=alpha)
    ok = labels is None or (pr.n_groups or 0) >= MIN_GROUPS
    out.update({"difference": pr.estimate, "ci_low": pr.ci_low, "ci_high": pr.ci_high,
                "p_value": pr.p_value, "test": _test_name(pr),
                "holds": bool(ok and pr.estimate is not None and pr.estimate > 0
                              and pr.p_value is not None and pr.p_value <= alpha)})
    if labels is not None:
        out.update({"n_groups": pr.n_groups,
                    "inference": (CLUSTER_T if pr.method == stats.CR2_T else
                                  f"betting on the {pr.n_groups} group means")
                    + ("" if ok else f"; too few groups for a claim ({pr.n_groups} < "
                                     f"{MIN_GROUPS})")})
    return out


def noninferiority_continuous(a_by, b_by, ids: list[str], margin: float, alpha: float, *,
                              groups: Mapping[str, str] | None = None) -> dict:
    """Non-inferiority of a 0–1 score (coverage): the one-sided (α) betting lower limit of
    B − A above −margin (`stats.paired`), on at least `min_n` independent cases. The
    betting bound holds at any N, tied scores included, where the t's lower limit erred
    7–24 % at the margin (docs/CLAIM_STATISTICS.md §12). The floor is the first N at which pairs
    that all agree clear the margin: a loss of m on a [−1, 1] difference can sit as full
    losses on a share m of the cases, and until that many cases show none, nothing shows the
    loss is not there. With groups the count is Kish's n²/Σn_g² (a group of repeats fails
    together) and the bound is on the group means."""

    both = [c for c in ids if a_by.get(c) is not None and b_by.get(c) is not None]
    min_n = stats.min_n_noninferiority(margin, alpha)
    out = {"margin": margin, "conf_level": 1 - alpha, "ci_low": None, "p_value": None,
           "holds": False,
           "rule": f"one-sided {pct(1 - alpha)} betting lower limit of B − A > −margin",
           "min_n": min_n}
    if len(both) < 2:
        out["note"] = "fewer than 2 pairs"
        return out
    xa, xb = [a_by[c] for c in both], [b_by[c] for c in both]
    labels = group_labels(both, groups)
    pr = stats.paired(xa, xb, groups=labels, margin=margin, better="higher", alpha=alpha)
    out.update({"ci_low": _clip(pr.ni_limit), "p_value": pr.ni_p_value,
                "holds": bool(pr.noninferior)})
    enough = pr.ni_units is not None and min_n is not None and pr.ni_units >= min_n
    if labels is None:
        if not enough:
            out["note"] = (f"{len(both)} pairs: non-inferiority at margin {margin} needs at "
                           f"least {min_n}")
        return out
    g = pr.n_groups or 0
    out.update({"rule": f"one-sided {pct(1 - alpha)} betting lower limit of B − A over the "
                        "group means > −margin",
                "n_groups": g, "units": pr.ni_units,
                "inference": f"betting on the {g} group means"})
    if g < MIN_GROUPS:
        out["note"] = _too_few(len(both), g)
    elif not enough:
        out["note"] = (f"{len(both)} pairs in {g} groups, worth {pr.ni_units:.1f} independent "
                       f"ones: non-inferiority at margin {margin} needs at least {min_n}")
    return out


# --------------------------------------------------------------------------- binary

def binary(name: str, a_by: Mapping[str, bool | None], b_by: Mapping[str, bool | None],
           ids: list[str], alpha: float, *, margin: float | None = None,
           higher_is_better: bool = False, groups: Mapping[str, str] | None = None) -> dict:
    """Paired 2×2 of abstention, difference B − A (B is the first condition of the table),
    from `stats.paired(kind="binary")`: Tango's interval and the mid-p McNemar test
    (Rao–Scott Tango and Durkalski's McNemar with groups). The non-inferiority rule depends
    on which way is better: where abstaining is an error (answerable questions) B may
    exceed A by less than the margin (upper limit < margin); where it is correct
    (unanswerable) B may fall short of A by less than the margin (lower limit > −margin).
    Both limits are the one-sided betting ones: Tango's limit at the margin erred 6–7 %
    when A rarely refuses (docs/CLAIM_STATISTICS.md §12)."""

    used = [(cid, a_by[cid], b_by[cid]) for cid in ids if a_by.get(cid) is not None
            and b_by.get(cid) is not None]
    side = "lower" if higher_is_better else "upper"
    out: dict[str, Any] = {"metric": name, "n": len(used), "n_dropped": len(ids) - len(used),
                           "a": None, "b": None, "difference": None, "ci_low": None,
                           "ci_high": None, "conf_level": 1 - alpha, "test": "mcnemar_midp",
                           "p_value": None, "p_holm": None, "significant": False,
                           "direction": None,
                           "better": "higher" if higher_is_better else "lower"}
    if margin is not None:
        out["noninferiority"] = {
            "margin": margin, "holds": False,
            "min_n": stats.min_n_noninferiority(margin, alpha),
            "rule": (f"one-sided {pct(1 - alpha)} betting {side} limit of B − A "
                     + ("> −margin" if higher_is_better else "< margin"))}
    if not used:
        out["note"] = "no cases in this subset"
        return out
    xa = [1.0 if a else 0.0 for _, a, _ in used]
    xb = [1.0 if b else 0.0 for _, _, b in used]
    n11 = sum(1 for _, a, b in used if a and b)
    b_only = sum(1 for _, a, b in used if b and not a)
    a_only = sum(1 for _, a, b in used if a and not b)
    n00 = len(used) - n11 - b_only - a_only
    labels = group_labels([u[0] for u in used], groups)
    pr = stats.paired(xa, xb, kind="binary", groups=labels, margin=margin,
                      better="higher" if higher_is_better else "lower", alpha=alpha)
    n = len(used)
    out.update({"a": (n11 + a_only) / n, "b": (n11 + b_only) / n,
                "difference": pr.estimate, "ci_low": pr.ci_low, "ci_high": pr.ci_high,
                "ci_method": f"{pr.method.split(';')[0]}, {pct(1 - alpha)}, unadjusted",
                "p_value": pr.p_value,
                "table": {"both": n11, "a_only": a_only, "b_only": b_only, "neither": n00}})
    if labels is None:
        m = stats.mcnemar(a_only, b_only, method="midp")
        out["secondary"] = {"p_exact": m.p_exact, "p_chi2": m.p_chi2}
    else:
        dm = stats.clustered_mcnemar(*_discordant_by_group(used, labels))
        out.update({"test": "durkalski (clustered McNemar, 1 df)",
                    "secondary": {"statistic": dm.statistic},
                    "n_groups": pr.n_groups, "design_effect": pr.design_effect,
                    "effective_n": pr.effective_n,
                    "inference": f"cluster (Durkalski McNemar; {pr.method.split(';')[0]})"
                                 + ("" if dm.design_effect is not None else
                                    ", worst case: no discordant pair")})
    if margin is not None:
        ni = out["noninferiority"]
        ni.update({side: pr.ni_limit, "p_value": pr.ni_p_value, "holds": bool(pr.noninferior)})
        if labels is not None:
            ni.update({"units": pr.ni_units, "n_groups": pr.n_groups})
            ni["rule"] = ni["rule"].replace("limit of B − A", "limit of B − A over the group "
                                                               "means")
            if pr.ni_units is not None and ni["min_n"] and pr.ni_units < ni["min_n"]:
                ni["note"] = (f"{n} cases in {pr.n_groups} groups, worth {pr.ni_units:.1f} "
                              f"independent ones: non-inferiority at margin {margin} needs at "
                              f"least {ni['min_n']}")
    if a_only + b_only == 0:
        out["note"] = "no discordant pairs" if labels is None else (
            "no discordant pairs: the design effect cannot be estimated; the interval takes "
            f"the worst case (effective N {pr.effective_n:.1f})")
    return out


def _discordant_by_group(used: list, labels: list) -> tuple[list[int], list[int]]:
    bg: Counter = Counter()
    cg: Counter = Counter()
    for (_, a, b), lab in zip(used, labels):
        if b and not a:
            bg[lab] += 1
        elif a and not b:
            cg[lab] += 1
    keys = list(dict.fromkeys(labels))
    return [bg[k] for k in keys], [cg[k] for k in keys]


# --------------------------------------------------------------------------- pairwise

def pairwise(ids: list[str], ab: list, ba: list, len_a: list[int], len_b: list[int],
             alpha: float, *, groups: Mapping[str, str] | None = None
             ) -> tuple[dict, dict[str, str]]:
    """The sign test on decisive pairs, the ties-as-half win rate and the judge's position
    and length diagnostics. With groups the test is the sign test on per-group sums (one
    vote per decisive group: exact at any number of groups) and the win-rate interval is
    the CR2 one; the diagnostics describe the judge, case by case, and stay as they are."""

    pc = stats.pairwise_outcomes(ab, ba)
    outcomes = dict(zip(ids, pc.outcomes))
    sign = stats.sign_test(pc.wins, pc.losses, conf_level=1 - alpha)
    wr = stats.win_rate(pc.wins, pc.losses, pc.ties, conf_level=1 - alpha)
    cons = stats.position_consistency(ab, ba, conf_level=1 - alpha)
    first = sum(1 for x in ab if x == "A") + sum(1 for x in ba if x == "B")
    decided = sum(1 for x in list(ab) + list(ba) if x in ("A", "B"))
    m = {
        "metric": "pairwise", "n": len(ids), "b_wins": pc.wins, "a_wins": pc.losses,
        "no_preference": pc.ties, "position_inconsistent": pc.inconsistent,
        "judge_errors": pc.errors,
        "a": 1 - wr.estimate, "b": wr.estimate,
        "difference": 2 * wr.estimate - 1, "estimate": wr.estimate,
        "win_rate_ci": {"ci_low": wr.ci_low, "ci_high": wr.ci_high},
        "ci_low": _clip(None if wr.ci_low is None else 2 * wr.ci_low - 1),
        "ci_high": _clip(None if wr.ci_high is None else 2 * wr.ci_high - 1),
        "conf_level": 1 - alpha,
        "ci_method": "t-interval on per-case scores {1, .5, 0}, as B − A win rates (ties half), "
                     "clipped to [-1, 1]",
        "test": "sign_test (exact, two-sided, decisive pairs)", "p_value": sign.p_value,
        "p_holm": None, "significant": False, "direction": None, "midp": sign.midp,
        "decisive_share_b": {"estimate": sign.estimate, "ci_low": sign.ci_low,
                             "ci_high": sign.ci_high, "method": "Wilson"},
        "position_consistency": {"estimate": cons.estimate, "ci_low": cons.ci_low,
                                 "ci_high": cons.ci_high, "n": cons.n,
                                 "biased_to_first": cons.biased_to_first,
                                 "biased_to_second": cons.biased_to_second},
        "first_position_win_rate": (first / decided) if decided else None,
        "length_ratio_b_over_a": (sum(len_b) / sum(len_a)) if sum(len_a) else None,
    }
    m["length_bias"] = length_bias(pc.outcomes, len_a, len_b, alpha)
    labels = group_labels(ids, groups)
    if labels is not None:
        _pairwise_grouped(m, pc.outcomes, labels, alpha)
    return m, outcomes


def _pairwise_grouped(m: dict, outcomes, labels: list, alpha: float) -> None:

    w = [1 if o == "B" else -1 if o == "A" else 0 for o in outcomes]
    cs = stats.clustered_sign_test(w, labels, conf_level=1 - alpha)
    scores = [(1 + x) / 2 for x in w]
    ct = stats.clustered_paired_t([0.0] * len(w), scores, labels, conf_level=1 - alpha,
                                  limits=(0.0, 1.0))
    ok = cs.n_groups >= MIN_GROUPS
    lo, hi = (ct.ci_low, ct.ci_high) if ok else (None, None)
    m.update({"win_rate_ci": {"ci_low": lo, "ci_high": hi},
              "ci_low": _clip(None if lo is None else 2 * lo - 1),
              "ci_high": _clip(None if hi is None else 2 * hi - 1),
              "ci_method": "cluster-robust t (CR2, Bell–McCaffrey df) on per-case scores "
                           "{1, .5, 0}, as B − A win rates (ties half), clipped to [-1, 1]",
              "test": "sign_test on per-group sums (exact, two-sided, one vote per decisive "
                      "group)",
              "p_value": cs.p_value, "midp": cs.midp,
              "decisive_share_b": {"estimate": cs.estimate, "ci_low": cs.ci_low,
                                   "ci_high": cs.ci_high, "method": "Wilson, over decisive groups"},
              "by_group": {"b": cs.group_wins, "a": cs.group_losses, "none": cs.group_ties},
              "secondary": {"test": "Durkalski-form chi-square, (Σw)²/Σ_g(Σ_g w)², 1 df",
                            "statistic": cs.chi2, "p_value": cs.p_chi2},
              "n_groups": cs.n_groups, "design_effect": ct.design_effect,
              "effective_n": ct.effective_n, "icc": ct.icc,
              "inference": "cluster (sign test on per-group sums)"})
    if not ok:
        m["note"] = (f"{cs.n_groups} groups: the sign test on groups is exact, but the win-rate "
                     f"interval needs at least {MIN_GROUPS} groups and is not given")


def length_bias(outcomes, len_a: list[int], len_b: list[int], alpha: float) -> dict:
    """Can the pairwise preference be told apart from answer length?

    A length-controlled share of B wins among decisive pairs, as AlpacaEval 2 does it:
    logit P(B wins) = b0 + b1·tanh((len_B − len_A)/sd), read at equal length (σ(b0)).
    That needs pairs where B is the longer answer and pairs where it is the shorter one:
    when B is longer (or shorter) in nearly every decisive pair, length and variant are
    the same thing and no model can separate them — then `separable` is False and the
    preference is reported with that caveat, never as a clean win."""

    dec = [(o, la, lb) for o, la, lb in zip(outcomes, len_a, len_b) if o in ("A", "B")]
    n = len(dec)
    out: dict[str, Any] = {"n_decisive": n, "method": "length-controlled win share (AlpacaEval 2 "
                           "style logistic regression on tanh of the standardized length "
                           "difference)", "separable": False, "lc_share_b": None,
                           "lc_ci_low": None, "lc_ci_high": None, "explained_by_length": None,
                           "caveat": None}

    def side(la, lb):
        if abs(lb - la) <= LENGTH_TOLERANCE * max(1.0, (la + lb) / 2):
            return 0
        return 1 if lb > la else -1

    sides = [side(la, lb) for _, la, lb in dec]
    longer_b, shorter_b = sides.count(1), sides.count(-1)
    out.update({"b_longer": longer_b, "b_shorter": shorter_b, "equal_length": sides.count(0)})
    wins, losses = sum(1 for o, _, _ in dec if o == "B"), sum(1 for o, _, _ in dec if o == "A")
    favoured = "B" if wins > losses else "A" if losses > wins else None
    # the favoured side's answers were the longer ones in most decisive pairs
    fav_longer = (favoured == "B" and longer_b > shorter_b) or \
                 (favoured == "A" and shorter_b > longer_b)
    minority = min(longer_b, shorter_b)
    if n >= 8 and minority >= max(3, math.ceil(0.1 * n)):
        diffs = np.array([lb - la for _, la, lb in dec], dtype=float)
        sd = float(diffs.std(ddof=1)) or 1.0
        x = np.tanh(diffs / sd)
        y = np.array([1.0 if o == "B" else 0.0 for o, _, _ in dec])
        fit = _logit(x, y)
        if fit is not None:
            b0, se0, b1, p1 = fit

            z = float(st.norm.ppf(1 - alpha / 2))

            def sig(v: float) -> float:   # the logistic function, without overflow

                return float(expit(v))

            out.update({"separable": True, "lc_share_b": sig(b0), "lc_ci_low": sig(b0 - z * se0),
                        "lc_ci_high": sig(b0 + z * se0), "length_coef": b1,
                        "length_p_value": p1})
            shown = out["lc_ci_low"] > 0.5 if favoured == "B" else out["lc_ci_high"] < 0.5
            out["explained_by_length"] = bool(favoured is not None and fav_longer and not shown)
        else:
            out["note"] = "wins follow length exactly (perfect separation): no estimate at equal length"
    if favoured is None or not fav_longer:
        return out
    longer_n = longer_b if favoured == "B" else shorter_b
    if not out["separable"]:
        out["explained_by_length"] = None
        out["caveat"] = (f"{favoured}'s preference cannot be separated from answer length: "
                         f"{favoured}'s answer was the longer one in {longer_n} of {n} decisive pairs")
    elif out["explained_by_length"]:
        out["caveat"] = (f"{favoured}'s preference is not shown once length is controlled: "
                         f"length-controlled B share {out['lc_share_b']:.3f} "
                         f"({pct(1 - alpha)} CI {out['lc_ci_low']:.3f} to {out['lc_ci_high']:.3f})")
    return out


def _logit(x, y):
    """(b0, se(b0), b1, p(b1)) of a two-parameter logistic fit, or None when it cannot fit."""


    if len(set(y.tolist())) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fit = Logit(y, np.column_stack([np.ones(len(x)), x])).fit(disp=0)
            b0, b1 = (float(v) for v in fit.params)
            se0 = float(fit.bse[0])
            p1 = float(fit.pvalues[1])
        except Exception:  # perfect separation, singular matrix
            return None
    if not all(math.isfinite(v) for v in (b0, b1, se0)) or abs(b1) > 30:
        return None
    return b0, se0, b1, p1


# --------------------------------------------------------------------------- everything

def _n_claims(row: Any) -> int:
    """How many claims a faithfulness verdict checked (0 when it has none or no record)."""
    if not row or row.get("verdict") != "scored" or not row.get("result_json"):
        return 0
    n = json.loads(row["result_json"]).get("n_claims")
    return n if isinstance(n, int) else 0


def compute_metrics(finished: list[str], jv: JudgeMap, answerable: Mapping[str, bool],
                    lengths: Mapping[tuple[str, str], int], cfg, judges, *,
                    groups: Mapping[str, str] | None = None) -> tuple[dict, dict, dict]:
    """(metrics, pairwise outcome per case, Holm info) over the finished cases.

    `jv[(judge, subject)][case_id]` is a judgment row with at least `verdict` and `score`
    (subject "A"/"B", "AB"/"BA" for pairwise, "case" for keywords); `lengths[(case_id, v)]`
    is an answer's length in characters; `judges` the configured judge list, which fixes
    the Holm family. `groups` maps case id → group key (abtest.core.groups.case_groups); a case
    it does not name is a group of its own, and None or all singletons give exactly the
    iid results."""

    alpha = cfg.alpha
    family = holm_family(judges)
    metrics: dict[str, Any] = {}
    outcomes: dict[str, str] = {}

    def score(judge: str, v: str) -> dict[str, float | None]:
        d = jv.get((judge, v), _NONE)
        return {cid: (d.get(cid) or _NONE).get("score") for cid in finished}

    abst = {v: jv.get(("abstention", v), _NONE) for v in ("A", "B")}

    def why_no_score(cid: str, v: str) -> str:
        j = jv.get(("faithfulness", v), _NONE).get(cid) or _NONE
        if (abst[v].get(cid) or _NONE).get("verdict") == "abstained":
            return "abstained"
        if j.get("verdict") == "no_claims":
            return "no factual claim"
        return "no score"

    pab, pba = jv.get(("pairwise", "AB"), _NONE), jv.get(("pairwise", "BA"), _NONE)
    pw_ids = [cid for cid in finished if cid in pab and cid in pba]
    if pw_ids:
        metrics["pairwise"], outcomes = pairwise(
            pw_ids, [pab[c]["verdict"] for c in pw_ids], [pba[c]["verdict"] for c in pw_ids],
            [lengths.get((c, "A"), 0) for c in pw_ids], [lengths.get((c, "B"), 0) for c in pw_ids],
            alpha, groups=groups)
    for judge in SCORE_JUDGES:
        ja, jb = jv.get((judge, "A"), _NONE), jv.get((judge, "B"), _NONE)
        applicable = [cid for cid in finished if cid in ja or cid in jb]
        if not applicable:
            continue
        sa, sb = score(judge, "A"), score(judge, "B")
        m = continuous(judge, sa, sb, applicable, alpha, family_size=len(family),
                       reason=why_no_score if judge == "faithfulness" else None, groups=groups)
        if judge == "faithfulness":
            m["no_claims"] = {v: sorted(cid for cid in finished
                                        if (d.get(cid) or _NONE).get("verdict") == "no_claims")
                              for v, d in (("A", ja), ("B", jb))}
            m["note_no_claims"] = ("an answer with no factual claim (an abstention) has no "
                                   "faithfulness score; its pair is dropped and counted per "
                                   "variant, and the claim must survive the worst-case drop bound")
            m["drop_bound"] = drop_bound(sa, sb, applicable, answerable, alpha, groups=groups)
            # the extractor returns at most max_claims claims (the schema's maxItems): an
            # answer that filled them may have made more, never checked (claim.py withholds)
            m["at_claim_cap"] = {v: sorted(cid for cid in finished
                                           if _n_claims(d.get(cid)) >= cfg.max_claims)
                                 for v, d in (("A", ja), ("B", jb))}
            m["max_claims"] = cfg.max_claims
        if judge == "relevance":
            methods = {json.loads(j["result_json"]).get("method", "llm_rating")
                       if j.get("result_json") else "llm_rating" for d in (ja, jb) for j in d.values()}
            m["method"] = ("embedding (generated questions vs the question, cosine)"
                           if methods == {"embedding"} else
                           "LLM 0-1 rating (no embedding model configured)")
        if judge == "coverage":
            m["margin"] = cfg.margins.coverage
            m["noninferiority"] = noninferiority_continuous(sa, sb, applicable,
                                                            cfg.margins.coverage, alpha,
                                                            groups=groups)
        metrics[judge] = m
    if abst["A"] or abst["B"]:
        def verdicts(v):
            return {cid: abst[v][cid].get("verdict") == "abstained" if cid in abst[v] else None
                    for cid in finished}

        aa, bb = verdicts("A"), verdicts("B")
        ans_ids = [c for c in finished if answerable.get(c, True)]
        un_ids = [c for c in finished if not answerable.get(c, True)]
        metrics["abstention"] = {
            "answerable": binary("abstention_answerable", aa, bb, ans_ids, alpha,
                                 margin=cfg.margins.abstention_answerable, groups=groups),
            "unanswerable": binary("abstention_unanswerable", aa, bb, un_ids, alpha,
                                   margin=cfg.margins.abstention_unanswerable,
                                   higher_is_better=True, groups=groups),
            "direction_note": "difference = B − A abstention rate; on answerable cases lower is "
                              "better, on unanswerable cases higher is better"}
    if ("keywords", "case") in jv:
        ks = [s for s in score("keywords", "case").values() if s is not None]
        metrics["keywords"] = {"metric": "keywords", "n": len(ks),
                               "summary": plain(stats.summary(ks)) if ks else None,
                               "note": "scores the captured search keywords (same for A and B)"}
    holm = apply_holm(metrics, family, alpha)
    return metrics, outcomes, holm


def metric_at(metrics: dict, key: str) -> dict | None:
    if key.startswith("abstention_"):
        return (metrics.get("abstention") or {}).get(key.split("_", 1)[1])
    return metrics.get(key)


def apply_holm(metrics: dict, family: list[str], alpha: float) -> dict:
    """Holm over the pre-declared family; a member without a p-value enters as p = 1."""

    ps = []
    for key in family:
        m = metric_at(metrics, key)
        ps.append(m["p_value"] if m and m.get("p_value") is not None else 1.0)
    if family:
        h = stats.holm(ps, alpha=alpha)
        for key, p_adj, rej in zip(family, h.p_adjusted, h.reject):
            m = metric_at(metrics, key)
            if m and m.get("p_value") is not None:
                m["p_holm"] = p_adj
                m["significant"] = bool(rej)
                m["direction"] = direction(m, alpha)
    missing = [k for k in family if not (metric_at(metrics, k) or {}).get("p_value") is not None]
    return {"family": family, "alpha": alpha,
            "rule": "reject when Holm-adjusted p <= alpha (statsmodels convention)",
            "fixed_from": "the configured judges, before the run",
            "without_data": missing,
            "note": "members without data count as p = 1; confidence intervals are unadjusted"}


# --------------------------------------------------------------------------- live-only metrics

def context_precision_recall(retrieved_ids: list[str], relevant_ids: list[str] | None
                             ) -> tuple[float | None, float | None]:
    """precision = relevant retrieved / retrieved; recall = relevant retrieved / relevant.

    (None, None) when the question has no relevant ids (excluded from the averages);
    nothing retrieved gives precision 0 (the system offered no relevant material).
    """
    rel = set(relevant_ids or [])
    if not rel:
        return None, None
    got = list(dict.fromkeys(retrieved_ids))
    hit = sum(1 for c in got if c in rel)
    precision = hit / len(got) if got else 0.0
    return precision, hit / len(rel)


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), None for no values."""
    if not values:
        return None

    return float(np.percentile(np.asarray(values, dtype=float), q))
