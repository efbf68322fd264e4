"""The report's statistics from per-case judge verdicts.

One function, `compute_metrics`, serves the frozen report, the live report and the
validity simulation (scripts/validity_sim.py), so the numbers the simulation checks are
the numbers users read. Inputs are plain maps; nothing here reads a store.

Conventions (docs/STATISTICS.md): differences are B − A; every CI is clipped to the
range its quantity can take; the Holm family is fixed from the configured judges before
any data is seen, and a member without data enters it as p = 1.

Groups (docs/STATISTICS.md §10): when `groups` puts two or more of a metric's cases in one
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

from ..fmt import pct
from ..groups import MIN_GROUPS
from ..sizing import holm_family, min_n_binary_noninferiority

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


def _sizes(labels: list) -> list[int]:
    return list(Counter(labels).values())


def _too_few(n: int, g: int) -> str:
    return (f"too few groups: {n} cases in {g} groups; cluster-robust inference (CR2) needs at "
            f"least {MIN_GROUPS} groups, so no test or interval is given")


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
    """Paired t (primary), R-compatible Wilcoxon (secondary), Pratt (sensitivity) on the pairs
    where both sides have a score. Pairs dropped are listed per variant with their reasons
    (`reason(case_id, "A"|"B")`, default "no score"). With groups (`group_labels`) the same
    three run with the group as the unit: `_continuous_grouped`."""
    from .. import stats

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
    if labels is not None:
        return _continuous_grouped(out, a, b, labels, alpha, family_size)
    t = stats.paired_t(a, b, conf_level=level, limits=DIFF_LIMITS)
    w = stats.wilcoxon(a, b)
    wp = stats.wilcoxon(a, b, zero_method="pratt", method="asymptotic")
    out.update({"a": sum(a) / len(a), "b": sum(b) / len(b), "difference": t.mean_diff,
                "ci_low": t.ci_low, "ci_high": t.ci_high,
                "ci_method": f"paired t, {pct(level)}, unadjusted, clipped to [-1, 1]",
                "p_value": t.p_value, "d_z": t.d_z, "sd_d": t.sd_d,
                "secondary": {"test": f"wilcoxon (R-compatible: zeros dropped, {w.method}"
                                      + (", continuity correction" if w.method != "exact" else "")
                                      + ")", "method": w.method, "p_value": w.p_value,
                              "n_used": w.n_used},
                "sensitivity": {"test": "wilcoxon pratt", "p_value": wp.p_value},
                "summary_a": plain(stats.summary(a)), "summary_b": plain(stats.summary(b))})
    if len(used) < 30:
        bs = stats.bootstrap_mean_diff_ci(a, b, n_boot=5000, seed=0, conf_level=level)
        out["bootstrap"] = {"ci_low": bs.ci_low, "ci_high": bs.ci_high, "n_boot": 5000, "seed": 0}
    if t.sd_d and len(used) >= 2:
        a_m = alpha / max(1, family_size)
        mde = stats.mde_paired_t(len(used), t.sd_d, alpha=a_m)
        block: dict[str, Any] = {"mde": mde.mde, "d_z": mde.d_z, "alpha": a_m, "power": 0.8,
                                 "sd_d": t.sd_d}
        if mde.mde is not None and mde.mde > DIFF_LIMITS[1]:
            block["mde"] = None
            block["note"] = (f"with {len(used)} pairs no difference within the 0–1 scale is "
                             "detectable with 80% power")
        out["mde"] = block
    if t.note:
        out["note"] = t.note
    return out


def _continuous_grouped(out: dict, a: list[float], b: list[float], labels: list, alpha: float,
                        family_size: int) -> dict:
    """The group as the unit: CR2 t with Bell–McCaffrey df (primary), Wilcoxon and Pratt on
    the per-group mean differences (one value per group), a cluster bootstrap below 30
    groups, and the MDE at the effective N. Below MIN_GROUPS no test or interval."""
    from .. import stats

    level = 1 - alpha
    n = len(a)
    ct = stats.clustered_paired_t(a, b, labels, conf_level=level, limits=DIFF_LIMITS)
    g = ct.n_groups
    ok = g >= MIN_GROUPS
    ga, gb = stats.group_means(a, labels), stats.group_means(b, labels)
    w = stats.wilcoxon(ga, gb)
    wp = stats.wilcoxon(ga, gb, zero_method="pratt", method="asymptotic")
    out.update({"a": sum(a) / n, "b": sum(b) / n, "difference": ct.mean_diff,
                "ci_low": ct.ci_low if ok else None, "ci_high": ct.ci_high if ok else None,
                "ci_method": f"cluster-robust t (CR2, Bell–McCaffrey df), {pct(level)}, "
                             "unadjusted, clipped to [-1, 1]",
                "test": "clustered_t (CR2, Bell–McCaffrey df)",
                "p_value": ct.p_value if ok else None, "d_z": ct.d_z, "sd_d": ct.sd_d,
                "secondary": {"test": "wilcoxon on per-group mean differences (R-compatible: "
                                      f"zeros dropped, {w.method}"
                                      + (", continuity correction" if w.method != "exact" else "")
                                      + ")", "method": w.method, "p_value": w.p_value,
                              "n_used": w.n_used},
                "sensitivity": {"test": "wilcoxon pratt on per-group mean differences",
                                "p_value": wp.p_value},
                "summary_a": plain(stats.summary(a)), "summary_b": plain(stats.summary(b)),
                "n_groups": g, "design_effect": ct.design_effect, "effective_n": ct.effective_n,
                "icc": ct.icc, "df": ct.df, "min_groups": MIN_GROUPS,
                "inference": CLUSTER_T if ok else
                f"none: too few groups ({g} < {MIN_GROUPS}) for cluster-robust inference"})
    if g < 30:
        bs = stats.cluster_bootstrap_mean_diff_ci(a, b, labels, n_boot=5000, seed=0,
                                                  conf_level=level)
        out["bootstrap"] = {"ci_low": bs.ci_low, "ci_high": bs.ci_high, "n_boot": 5000, "seed": 0,
                            "method": "cluster percentile (whole groups resampled)"}
    if ok and ct.sd_d and ct.effective_n and ct.effective_n > 1 and ct.df:
        a_m = alpha / max(1, family_size)
        mde = stats.mde_clustered_t(ct.effective_n, ct.df, ct.sd_d, alpha=a_m)
        block: dict[str, Any] = {"mde": mde.mde, "d_z": mde.d_z, "alpha": a_m, "power": 0.8,
                                 "sd_d": ct.sd_d, "effective_n": ct.effective_n, "df": ct.df}
        if mde.mde is not None and mde.mde > DIFF_LIMITS[1]:
            block["mde"] = None
            block["note"] = (f"with an effective N of {ct.effective_n:.1f} ({n} cases in {g} "
                             "groups) no difference within the 0–1 scale is detectable with 80% "
                             "power")
        out["mde"] = block
    if not ok:
        out["note"] = _too_few(n, g)
    elif ct.note:
        out["note"] = ct.note
    return out


def drop_bound(a_by: Mapping[str, float | None], b_by: Mapping[str, float | None],
               ids: list[str], answerable: Mapping[str, bool], alpha: float, *,
               groups: Mapping[str, str] | None = None) -> dict:
    """The faithfulness effect under the worst case for the answerable pairs only one variant
    left unscored: where only B has no score (it refused, or made no claim) B counts 0;
    where only A has none, A counts 1. A variant that refuses exactly the answerable
    questions it would get wrong cannot buy a gain this way. On unanswerable questions an
    answer without a claim is the correct abstention, so those pairs stay out, as do
    pairs where neither side has a score (both behaved alike). With groups the paired t is
    the cluster-robust one, and below MIN_GROUPS groups the bound cannot hold."""
    from .. import stats

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
                  "counts B = 0, a pair missing only A's score counts A = 1; paired t",
        "imputed_b": n_b, "imputed_a": n_a, "n": len(a), "difference": None,
        "ci_low": None, "ci_high": None, "p_value": None, "holds": False}
    if len(a) < 2:
        return out
    labels = group_labels(kept, groups)
    if labels is not None:
        ct = stats.clustered_paired_t(a, b, labels, conf_level=1 - alpha, limits=DIFF_LIMITS)
        ok = ct.n_groups >= MIN_GROUPS
        out["method"] = out["method"].replace("paired t", "cluster-robust t (CR2, Bell–McCaffrey "
                                                          "df) over the groups")
        out.update({"difference": ct.mean_diff, "ci_low": ct.ci_low if ok else None,
                    "ci_high": ct.ci_high if ok else None, "p_value": ct.p_value if ok else None,
                    "n_groups": ct.n_groups,
                    "inference": CLUSTER_T if ok else
                    f"none: too few groups ({ct.n_groups} < {MIN_GROUPS})",
                    "holds": bool(ok and ct.mean_diff is not None and ct.mean_diff > 0
                                  and ct.p_value is not None and ct.p_value <= alpha)})
        return out
    t = stats.paired_t(a, b, conf_level=1 - alpha, limits=DIFF_LIMITS)
    out.update({"difference": t.mean_diff, "ci_low": t.ci_low, "ci_high": t.ci_high,
                "p_value": t.p_value,
                "holds": bool(t.mean_diff is not None and t.mean_diff > 0
                              and t.p_value is not None and t.p_value <= alpha)})
    return out


def noninferiority_continuous(a_by, b_by, ids: list[str], margin: float, alpha: float, *,
                              groups: Mapping[str, str] | None = None) -> dict:
    """Non-inferiority of a 0–1 score (coverage): the lower (1 − 2α) limit of B − A above
    −margin, and at least `min_n` independent cases (docs/STATISTICS.md §2). The floor is
    the binary one, ⌊z²(1 − m)/m⌋ + 1: a loss of m on a [−1, 1] difference can sit as full
    losses on a share m of the cases, and with none of them sampled the (1 − 2α) score
    limit of that share is z²/(N + z²), which must fall below m. The observed variance
    cannot replace it: it is zero exactly when no loss was sampled (5 equal pairs once
    showed non-inferiority, p = 0.5⁵). With groups the count is Kish's n²/Σn_g² (a group
    of repeats fails together) and the interval the cluster-robust one."""
    from .. import stats

    both = [c for c in ids if a_by.get(c) is not None and b_by.get(c) is not None]
    min_n = min_n_binary_noninferiority(margin, alpha)
    out = {"margin": margin, "conf_level": 1 - 2 * alpha, "ci_low": None, "p_value": None,
           "holds": False, "rule": f"lower {pct(1 - 2 * alpha)} limit of B − A > −margin",
           "min_n": min_n}
    if len(both) < 2:
        out["note"] = "fewer than 2 pairs"
        return out
    xa, xb = [a_by[c] for c in both], [b_by[c] for c in both]
    labels = group_labels(both, groups)
    if labels is None:
        ni = stats.noninferiority_paired_t(xa, xb, margin, alpha=alpha)
        enough = min_n is None or len(both) >= min_n
        out.update({"ci_low": _clip(ni.ci_low), "p_value": ni.p_value,
                    "holds": bool(ni.noninferior and enough)})
        if ni.note:
            out["note"] = ni.note
        if not enough:
            out["note"] = (f"{len(both)} pairs: non-inferiority at margin {margin} needs at least "
                           f"{min_n}")
        return out
    cn = stats.noninferiority_clustered_t(xa, xb, labels, margin, alpha=alpha)
    units = stats.kish_units(_sizes(labels))
    ok = cn.n_groups >= MIN_GROUPS
    enough = min_n is None or units >= min_n
    out.update({"ci_low": _clip(cn.ci_low) if ok else None, "p_value": cn.p_value if ok else None,
                "holds": bool(ok and enough and cn.noninferior),
                "rule": f"lower {pct(1 - 2 * alpha)} cluster-robust limit of B − A > −margin",
                "n_groups": cn.n_groups, "units": units,
                "inference": CLUSTER_T if ok else
                f"none: too few groups ({cn.n_groups} < {MIN_GROUPS})"})
    if not ok:
        out["note"] = _too_few(len(both), cn.n_groups)
    elif not enough:
        out["note"] = (f"{len(both)} pairs in {cn.n_groups} groups, worth {units:.1f} independent "
                       f"ones: non-inferiority at margin {margin} needs at least {min_n}")
    elif cn.note:
        out["note"] = cn.note
    return out


# --------------------------------------------------------------------------- binary

def binary(name: str, a_by: Mapping[str, bool | None], b_by: Mapping[str, bool | None],
           ids: list[str], alpha: float, *, margin: float | None = None,
           higher_is_better: bool = False, groups: Mapping[str, str] | None = None) -> dict:
    """Paired 2×2 of abstention, difference B − A (B is the first condition of the table).

    The non-inferiority rule depends on which way is better: where abstaining is an error
    (answerable questions) B may exceed A by less than the margin (upper limit < margin);
    where it is correct (unanswerable) B may fall short of A by less than the margin
    (lower limit > −margin). With groups: `_binary_grouped`."""
    from .. import stats

    used = [(cid, a_by[cid], b_by[cid]) for cid in ids if a_by.get(cid) is not None
            and b_by.get(cid) is not None]
    out: dict[str, Any] = {"metric": name, "n": len(used), "n_dropped": len(ids) - len(used),
                           "a": None, "b": None, "difference": None, "ci_low": None,
                           "ci_high": None, "conf_level": 1 - alpha, "test": "mcnemar_midp",
                           "p_value": None, "p_holm": None, "significant": False,
                           "direction": None,
                           "better": "higher" if higher_is_better else "lower"}
    if margin is not None:
        out["noninferiority"] = {"margin": margin, "holds": False,
                                 "min_n": min_n_binary_noninferiority(margin, alpha),
                                 "rule": (f"lower {pct(1 - 2 * alpha)} Tango limit of B − A > "
                                          "−margin") if higher_is_better else
                                         (f"upper {pct(1 - 2 * alpha)} Tango limit of B − A < "
                                          "margin")}
    if not used:
        out["note"] = "no cases in this subset"
        return out
    n11 = sum(1 for _, a, b in used if a and b)
    b_only = sum(1 for _, a, b in used if b and not a)
    a_only = sum(1 for _, a, b in used if a and not b)
    n00 = len(used) - n11 - b_only - a_only
    labels = group_labels([u[0] for u in used], groups)
    if labels is not None:
        return _binary_grouped(out, used, labels, (n11, b_only, a_only, n00), alpha, margin,
                               higher_is_better)
    m = stats.mcnemar(a_only, b_only, method="midp")
    ci = stats.paired_proportion_diff_ci(n11, b_only, a_only, n00, method="tango",
                                         conf_level=1 - alpha)
    out.update({"a": (n11 + a_only) / len(used), "b": (n11 + b_only) / len(used),
                "difference": ci.estimate, "ci_low": ci.ci_low, "ci_high": ci.ci_high,
                "ci_method": f"Tango score, {pct(1 - alpha)}, unadjusted", "p_value": m.p_value,
                "table": {"both": n11, "a_only": a_only, "b_only": b_only, "neither": n00},
                "secondary": {"p_exact": m.p_exact, "p_chi2": m.p_chi2}})
    if margin is not None:
        ci2 = stats.paired_proportion_diff_ci(n11, b_only, a_only, n00, method="tango",
                                              conf_level=1 - 2 * alpha)
        ni = out["noninferiority"]
        # `used` is not empty, so the interval has both limits
        assert ci2.ci_low is not None and ci2.ci_high is not None
        if higher_is_better:
            ni.update({"lower": ci2.ci_low, "holds": bool(ci2.ci_low > -margin)})
        else:
            ni.update({"upper": ci2.ci_high, "holds": bool(ci2.ci_high < margin)})
    if a_only + b_only == 0:
        out["note"] = "no discordant pairs"
    return out


def _binary_grouped(out: dict, used: list, labels: list, table: tuple[int, int, int, int],
                    alpha: float, margin: float | None, higher_is_better: bool) -> dict:
    """The group as the unit for a paired binary: Durkalski's clustered McNemar (its variance
    from the groups' own discordance imbalances), and Tango's interval on the Rao–Scott
    effective table (cells / DEFF). DEFF is Durkalski's ratio Σ(b_g − c_g)²/(b + c), at
    least 1; with no discordant pair it cannot be estimated and takes the worst case, every
    group's cases alike (Σn_g²/n). Non-inferiority also needs `min_n` independent cases,
    counted as Kish's n²/Σn_g², so what the sample did not show cannot pass it."""
    from .. import stats

    n11, b_only, a_only, n00 = table
    n = len(used)
    bg: Counter = Counter()
    cg: Counter = Counter()
    for (_, a, b), lab in zip(used, labels):
        if b and not a:
            bg[lab] += 1
        elif a and not b:
            cg[lab] += 1
    keys = list(dict.fromkeys(labels))
    dm = stats.clustered_mcnemar([bg[k] for k in keys], [cg[k] for k in keys])
    sizes = _sizes(labels)
    units = stats.kish_units(sizes)
    deff = max(1.0, dm.design_effect) if dm.design_effect is not None else n / units
    ci = stats.rao_scott_tango_ci(n11, b_only, a_only, n00, deff, conf_level=1 - alpha)
    out.update({"a": (n11 + a_only) / n, "b": (n11 + b_only) / n,
                "difference": ci.estimate, "ci_low": ci.ci_low, "ci_high": ci.ci_high,
                "ci_method": f"Tango score on the Rao–Scott effective table (cells / {deff:.2f}), "
                             f"{pct(1 - alpha)}, unadjusted",
                "test": "durkalski (clustered McNemar, 1 df)", "p_value": dm.p_value,
                "table": {"both": n11, "a_only": a_only, "b_only": b_only, "neither": n00},
                "secondary": {"statistic": dm.statistic},
                "n_groups": len(keys), "design_effect": dm.design_effect,
                "effective_n": n / deff,
                "inference": f"cluster (Durkalski McNemar; Rao–Scott Tango, DEFF {deff:.2f}"
                             + ("" if dm.design_effect is not None else
                                ", worst case: no discordant pair") + ")"})
    if margin is not None:
        ci2 = stats.rao_scott_tango_ci(n11, b_only, a_only, n00, deff, conf_level=1 - 2 * alpha)
        ni = out["noninferiority"]
        assert ci2.ci_low is not None and ci2.ci_high is not None
        enough = ni["min_n"] is None or units >= ni["min_n"]
        if higher_is_better:
            ni.update({"lower": ci2.ci_low, "holds": bool(enough and ci2.ci_low > -margin)})
        else:
            ni.update({"upper": ci2.ci_high, "holds": bool(enough and ci2.ci_high < margin)})
        ni.update({"units": units, "n_groups": len(keys)})
        ni["rule"] = ni["rule"].replace("Tango limit", "Rao–Scott Tango limit")
        if not enough:
            ni["note"] = (f"{n} cases in {len(keys)} groups, worth {units:.1f} independent ones: "
                          f"non-inferiority at margin {margin} needs at least {ni['min_n']}")
    if a_only + b_only == 0:
        out["note"] = ("no discordant pairs: the design effect cannot be estimated; the interval "
                       f"takes the worst case (effective N {n / deff:.1f})")
    return out


# --------------------------------------------------------------------------- pairwise

def pairwise(ids: list[str], ab: list, ba: list, len_a: list[int], len_b: list[int],
             alpha: float, *, groups: Mapping[str, str] | None = None
             ) -> tuple[dict, dict[str, str]]:
    """The sign test on decisive pairs, the ties-as-half win rate and the judge's position
    and length diagnostics. With groups the test is the sign test on per-group sums (one
    vote per decisive group: exact at any number of groups) and the win-rate interval is
    the CR2 one; the diagnostics describe the judge, case by case, and stay as they are."""
    from .. import stats

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
    from .. import stats

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
    import numpy as np

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
            from scipy import stats as st

            z = float(st.norm.ppf(1 - alpha / 2))

            def sig(v: float) -> float:   # the logistic function, without overflow
                from scipy.special import expit

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
    import warnings

    import numpy as np
    from statsmodels.discrete.discrete_model import Logit

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
    the Holm family. `groups` maps case id → group key (abtest.groups.case_groups); a case
    it does not name is a group of its own, and None or all singletons give exactly the
    iid results."""
    from .. import stats

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
    from .. import stats

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
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))
