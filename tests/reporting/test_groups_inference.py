"""Groups through the report's metrics and claim (docs/CLAIM_STATISTICS.md §10, §2): cases that share
a group are not independent, so every paired test takes the group as the unit; one case per
group changes nothing; a condition on fewer cases (or groups) than it needs cannot license.

Expected values are computed here from the distinct cases or per-group sums with scipy —
for exact repeats, the grouped analysis must equal the iid analysis of the distinct cases —
never by the functions under test."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from scipy import stats as st

from abtest import stats as S
from abtest.reporting.claim import CLAIM_JUDGES, licensed_claim
from abtest.reporting.metrics import MIN_GROUPS, compute_metrics
from support.sample_reports import CFG


def _case(cid, *, answerable=True, fa=0.8, fb=0.9, ca=None, cb=None, abst_a=False,
          abst_b=False, pw="tie"):
    return {"id": cid, "answerable": answerable, "fa": fa, "fb": fb, "ca": ca, "cb": cb,
            "abst_a": abst_a, "abst_b": abst_b, "pw": pw}


def _jv(cases):
    jv: dict = {("pairwise", "AB"): {}, ("pairwise", "BA"): {}}
    for c in cases:
        for v in "AB":
            f = c["f" + v.lower()]
            jv.setdefault(("faithfulness", v), {})[c["id"]] = {
                "verdict": "scored" if f is not None else "no_claims", "score": f}
            jv.setdefault(("abstention", v), {})[c["id"]] = {
                "verdict": "abstained" if c["abst_" + v.lower()] else "answered"}
            if c["c" + v.lower()] is not None:
                jv.setdefault(("coverage", v), {})[c["id"]] = {"verdict": "scored",
                                                              "score": c["c" + v.lower()]}
        jv[("pairwise", "AB")][c["id"]] = {"verdict": c["pw"]}
        jv[("pairwise", "BA")][c["id"]] = {"verdict": c["pw"]}
    return jv


def _metrics(cases, groups=None):
    ids = [c["id"] for c in cases]
    return compute_metrics(ids, _jv(cases), {c["id"]: c["answerable"] for c in cases},
                           {(c["id"], v): 100 for c in cases for v in "AB"}, CFG, CFG.judges,
                           groups=groups)


def _claim(metrics):
    ok = {"n_labels": 40, "kappa": 1.0, "ci_low": 1.0, "ci_high": 1.0, "validated": True}
    report = {"status": "complete", "unfinished_cases": [], "comparison_kind": "prompt",
              "pipeline_reasons": [], "self_judge": False, "judges": CFG.judges,
              "models": {"generator": {"resolved": ["g"]}, "judge": {"resolved": ["j"]}},
              "golden": None, "metrics": metrics,
              "judge_validation": {**{j: ok for j in CLAIM_JUDGES}, "validated": True}}
    return licensed_claim(report, CFG)


def _distinct(n_ans, n_un, seed=0, *, gain=0.15, cov=True):
    """Distinct cases: B more faithful on answerable cases (A refused one of them), coverage
    alike; on unanswerable ones both abstain, except two where only B does."""
    rnd = random.Random(seed)
    out = []
    for i in range(n_ans):
        fa = rnd.choice([0.5, 0.6, 0.7])
        fb = fa + rnd.choice([0.0, gain, 2 * gain, -0.1])
        c = rnd.choice([0.5, 1.0]) if cov else None
        out.append(_case(f"q{i:03d}", fa=None if i == 3 else fa, fb=fb, ca=c, cb=c,
                         abst_a=i == 3, pw=rnd.choice(["B", "B", "tie", "A"])))
    for i in range(n_un):
        out.append(_case(f"u{i:03d}", answerable=False, fa=None, fb=None, abst_a=i > 1,
                         abst_b=True, pw="tie"))
    return out


def _repeat(cases, k):
    """Every case k times under new ids, with the same verdicts (a deterministic pipeline
    answers identical prompts identically); groups as abtest.core.groups gives repeats."""
    out, groups = [], {}
    for c in cases:
        for j in range(k):
            rid = c["id"] if j == 0 else f"{c['id']}~{j}"
            out.append({**c, "id": rid})
            groups[rid] = f"group:{c['id']}"
    return out, groups


def _dump(x):
    return json.dumps(x, sort_keys=True)


# --------------------------------------------------------------------------- singletons

def test_one_case_per_group_gives_exactly_the_iid_report():
    rnd = random.Random(4)
    cases = _distinct(70, 30, seed=4)
    for c in cases[::9]:
        c.update(fb=None, abst_b=True)         # some one-sided drops and discordant refusals
    for c in cases[::13]:
        c.update(fa=None)
    ids = [c["id"] for c in cases]
    base = _metrics(cases)
    for groups in (None, {}, {cid: f"case:{cid}" for cid in ids},
                   {cid: f"doc:{i}" for i, cid in enumerate(ids) if rnd.random() < 0.5},
                   # a group of two whose second case is not among the finished ones
                   {ids[0]: "doc:x", "not-finished": "doc:x"}):
        assert _dump(_metrics(cases, groups)) == _dump(base)
    assert "n_groups" not in _dump(base) and "inference" not in base[0]["faithfulness"]


# --------------------------------------------------------------------------- repeats

def test_exact_repeats_are_analysed_as_their_distinct_cases():
    distinct = _distinct(40, 30, seed=1)
    cases, groups = _repeat(distinct, 3)
    m, _, _ = _metrics(cases, groups)
    iid, _, _ = _metrics(cases)
    ans = [c for c in distinct if c["answerable"] and c["fa"] is not None]
    fa = np.array([c["fa"] for c in ans])
    fb = np.array([c["fb"] for c in ans])
    f = m["faithfulness"]
    # equal groups: CR2 with Bell–McCaffrey df (= G − 1) is the paired t of the 40 distinct
    ref = st.ttest_rel(fb, fa)
    ci = ref.confidence_interval(0.95)
    assert f["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert (f["ci_low"], f["ci_high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert f["n"] == 117 and f["n_groups"] == 39 and f["df"] == pytest.approx(38)
    assert f["inference"] == "cluster (CR2, Bell–McCaffrey df)"
    # the iid test on the 120 rows is the inflation the groups remove
    assert iid["faithfulness"]["p_value"] < f["p_value"] / 10
    # design effect: (cluster SE / iid SE)², by hand
    d3 = np.repeat(fb - fa, 3)
    deff = (np.var(fb - fa, ddof=1) / 39) / (np.var(d3, ddof=1) / 117)
    assert f["design_effect"] == pytest.approx(deff)
    assert f["effective_n"] == pytest.approx(117 / deff)
    assert f["icc"] == pytest.approx((deff - 1) / (3 - 1))
    # Wilcoxon on one value per group: the distinct differences
    # (differences rounded to 12 decimals before ranking, as abtest does: 0.75 − 0.6 ties 0.15)
    w = st.wilcoxon(np.round(fb - fa, 12), zero_method="wilcox", correction=True,
                    method=f["secondary"]["method"])
    assert f["secondary"]["p_value"] == pytest.approx(w.pvalue)
    # the MDE is read at the effective N on the test's df (Holm-conservative α/5)
    mde = f["mde"]
    crit = st.t.isf(0.01 / 2, 38)
    nc = mde["mde"] / f["sd_d"] * math.sqrt(f["effective_n"])
    assert st.nct.sf(crit, 38, nc) + st.nct.cdf(-crit, 38, nc) == pytest.approx(0.8, abs=1e-7)
    assert mde["effective_n"] == f["effective_n"]
    # pairwise: one vote per group, i.e. the sign test of the distinct cases
    pw = m["pairwise"]
    wins = sum(c["pw"] == "B" for c in distinct)
    losses = sum(c["pw"] == "A" for c in distinct)
    assert pw["p_value"] == pytest.approx(st.binomtest(wins, wins + losses, 0.5).pvalue)
    assert pw["by_group"] == {"b": wins, "a": losses, "none": 70 - wins - losses}
    assert (pw["b_wins"], pw["a_wins"]) == (3 * wins, 3 * losses)
    # abstention on unanswerable cases: Durkalski = McNemar of the distinct cases, and the
    # Rao–Scott Tango interval = Tango's interval of the distinct table (DEFF = 3)
    un = m["abstention"]["unanswerable"]
    sub = [c for c in distinct if not c["answerable"]]
    b_only = sum(c["abst_b"] and not c["abst_a"] for c in sub)
    a_only = sum(c["abst_a"] and not c["abst_b"] for c in sub)
    both = sum(c["abst_a"] and c["abst_b"] for c in sub)
    assert b_only == 2 and un["test"] == "durkalski (clustered McNemar, 1 df)"
    assert un["p_value"] == pytest.approx(st.chi2.sf((b_only - a_only) ** 2 / (b_only + a_only), 1))
    assert un["design_effect"] == pytest.approx(3.0) and un["effective_n"] == pytest.approx(30)
    t = S.tango_ci(both, b_only, a_only, 30 - both - a_only - b_only, conf_level=0.95)
    assert (un["ci_low"], un["ci_high"]) == (pytest.approx(t.ci_low), pytest.approx(t.ci_high))
    assert un["noninferiority"]["units"] == pytest.approx(30) and un["n_groups"] == 30


def test_repeats_cannot_pass_a_margin_their_distinct_cases_cannot():
    """40 distinct answerable cases written 3 times: 120 rows, but 40 independent ones, fewer
    than the 68 a 0.05 margin needs, for coverage and for refusals alike."""
    cases, groups = _repeat(_distinct(40, 30, seed=2), 3)
    m, _, _ = _metrics(cases, groups)
    cov = m["coverage"]["noninferiority"]
    assert cov["min_n"] == 68 and cov["units"] == pytest.approx(40) and cov["holds"] is False
    ref = m["abstention"]["answerable"]["noninferiority"]
    assert ref["units"] == pytest.approx(40) and ref["holds"] is False
    reasons = _claim(m)["reasons"]
    assert ("coverage: 120 cases with references in 40 groups, worth 40.0 independent ones; "
            "non-inferiority at margin 0.05 needs ≥ 68") in reasons
    assert ("refusals on answerable cases: 120 cases in 40 groups, worth 40.0 independent ones; "
            "non-inferiority at margin 0.05 needs ≥ 68") in reasons
    # ignoring the groups, the same rows hold both conditions
    iid, _, _ = _metrics(cases)
    assert iid["coverage"]["noninferiority"]["holds"]
    assert iid["abstention"]["answerable"]["noninferiority"]["holds"]


def test_a_grouped_claim_says_cases_in_groups():
    distinct = _distinct(70, 35, seed=3)
    cases, groups = _repeat(distinct, 2)
    m, _, _ = _metrics(cases, groups)
    c = _claim(m)
    assert c["licensed"], c["reasons"]
    s = c["sentence"]
    assert "paired over 138 questions in 69 groups" in s    # A refused one (2 rows)
    assert "over 140 questions in 70 groups, margin 0.05" in s          # coverage
    assert "refusals on answerable questions B − A -0.014 over 140 in 70 groups" in s
    assert "unanswerable questions B − A" in s and "over 70 in 35 groups, margin 0.1" in s


# --------------------------------------------------------------------------- clustering

def test_correlated_groups_use_the_cr2_interval():
    """Unequal groups with a shared per-group shift: the interval is d̄ ± t·SE_CR2 on
    Bell–McCaffrey df, from STATS_SPEC.md §9's closed form on the per-group residual sums."""
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 9, size=30)
    shift = rng.normal(0, 0.15, size=30)
    cases, groups = [], {}
    for g, (k, s) in enumerate(zip(sizes, shift)):
        for j in range(k):
            fa = float(rng.choice([0.5, 0.75, 1.0]))
            fb = float(np.clip(fa + s + rng.normal(0, 0.1), 0, 1))
            cid = f"g{g}-{j}"
            cases.append(_case(cid, fa=fa, fb=fb))
            groups[cid] = f"document:{g}"
    m, _, _ = _metrics(cases, groups)
    f = m["faithfulness"]
    d = np.array([c["fb"] - c["fa"] for c in cases])
    lab = np.array([groups[c["id"]] for c in cases])
    n = d.size
    e = d - d.mean()
    keys = list(dict.fromkeys(lab.tolist()))
    sums = np.array([e[lab == k].sum() for k in keys])
    ng = np.array([(lab == k).sum() for k in keys])
    se = math.sqrt(np.sum(sums ** 2 / (1 - ng / n))) / n
    # Bell–McCaffrey: eigenvalues of the G × G matrix u_g'u_h of the CR2 quadratic form
    a = 1 / np.sqrt(1 - ng / n)
    w = np.outer(a, a) / n ** 2 * (np.diag(ng) - np.outer(ng, ng) / n)
    lam = np.linalg.eigvalsh(w)
    df = lam.sum() ** 2 / np.sum(lam ** 2)
    q = st.t.ppf(0.975, df)
    assert f["df"] == pytest.approx(df)
    assert f["p_value"] == pytest.approx(2 * st.t.sf(abs(d.mean()) / se, df))
    assert (f["ci_low"], f["ci_high"]) == (pytest.approx(d.mean() - q * se),
                                           pytest.approx(d.mean() + q * se))
    assert f["design_effect"] == pytest.approx((se / (d.std(ddof=1) / math.sqrt(n))) ** 2)
    assert f["design_effect"] > 1.5
    # the worst-case drop bound is the same cluster-robust t over the same groups
    b = f["drop_bound"]
    assert b["n_groups"] == 30 and b["p_value"] == pytest.approx(f["p_value"])


def test_too_few_groups_gives_the_betting_interval_and_no_licence():
    distinct = _distinct(12, 0, seed=5, gain=0.3)
    cases, groups = [], {}
    for c in distinct:                           # 12 documents of 5 varied questions each
        for j in range(5):
            cid = f"{c['id']}-{j}"
            cases.append({**c, "id": cid, "fb": min(1.0, c["fb"] + 0.05 * (j % 2))})
            groups[cid] = f"document:{c['id']}"
    cases += _distinct(0, 30, seed=5)
    m, _, _ = _metrics(cases, groups)
    f = m["faithfulness"]
    assert f["n_groups"] == 11 < MIN_GROUPS               # A refused in one document
    # the betting interval on the 11 group means: valid at any number of groups, and wide
    gm = {}
    for c in cases:
        if c["fa"] is not None and c["answerable"]:
            gm.setdefault(groups[c["id"]], []).append(c["fb"] - c["fa"])
    want = S.betting_ci(S._ordered(np.array([np.mean(v) for v in gm.values()])))
    assert (f["ci_low"], f["ci_high"], f["p_value"]) == pytest.approx(
        (want.ci_low, want.ci_high, want.p_value))
    assert f["inference"] == "betting on the 11 group means (each group one unit)"
    assert f["difference"] == pytest.approx(np.mean([c["fb"] - c["fa"] for c in cases
                                                     if c["fa"] is not None]))
    reasons = _claim(m)["reasons"]
    assert (f"too few groups: faithfulness rests on 55 cases in 11 groups; a claim needs at "
            f"least {MIN_GROUPS} groups") in reasons
    # the pairwise sign test on groups is exact at any number of groups (here 12 documents
    # and 30 unanswerable singletons)
    assert m["pairwise"]["n_groups"] == 42 and m["pairwise"]["p_value"] is not None


# --------------------------------------------------------------------------- minimum evidence

def _with_coverage_on(k, seed=6):
    cases = _distinct(max(70, k), 35, seed=seed, cov=False)
    for c in cases[:k]:
        c.update(ca=1.0, cb=1.0)
    return cases


def test_coverage_on_five_cases_cannot_license():
    """Five equal coverage pairs: the t's sign-test fallback once said non-inferior (0.5⁵ =
    0.031), but a loss of 0.05 hides on a share 0.05 of the cases, and 5 cases cannot see it.
    The betting bound of five tied pairs is far below the margin, and the floor says why."""
    m, _, _ = _metrics(_with_coverage_on(5))
    ni = m["coverage"]["noninferiority"]
    assert ni["ci_low"] < -0.05 and ni["p_value"] > 0.05
    assert ni["min_n"] == S.min_n_noninferiority(0.05) == 68
    assert ni["holds"] is False
    c = _claim(m)
    assert c["reasons"] == ["coverage: 5 cases with references; non-inferiority at margin 0.05 "
                            "needs ≥ 68"]


def test_coverage_at_the_floor_licenses():
    m, _, _ = _metrics(_with_coverage_on(68))
    assert m["coverage"]["noninferiority"]["holds"] is True
    assert _claim(m)["licensed"], _claim(m)["reasons"]
    m67, _, _ = _metrics(_with_coverage_on(67))
    assert _claim(m67)["reasons"] == ["coverage: 67 cases with references; non-inferiority at "
                                      "margin 0.05 needs ≥ 68"]


def test_every_failing_condition_states_its_n():
    cases = _distinct(70, 35, seed=8)
    for c in cases[:70]:
        c.update(cb=0.0 if c["ca"] == 1.0 else c["cb"], fb=c["fa"])   # B loses coverage
    m, _, _ = _metrics(cases)
    reasons = _claim(m)["reasons"]
    cov = next(r for r in reasons if r.startswith("coverage not shown non-inferior"))
    assert cov.endswith(", over 70 cases")
    faith = next(r for r in reasons if r.startswith("not significant"))
    assert "over 69 cases)" in faith
