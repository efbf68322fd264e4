"""Paired statistics for A/B prompt comparison (see docs/STATS_SPEC.md).

Every function is pure and returns a small frozen dataclass. Conventions that hold
throughout, because mixing them up silently flips or inflates a result:

* Differences are ``B - A`` (positive = B higher). For the paired 2x2 table the
  estimate is ``(n10 - n01) / N`` = p(first/row condition) - p(second/column condition).
* ``alpha`` / ``conf_level`` are passed explicitly to every library call; library
  defaults (scipy ``correction=False``, ppi_py ``alpha=0.1``) are never relied on.
* Degenerate inputs (no data, zero variance, no discordant pairs) never leak NaN or
  inf: an undefined quantity is ``None`` and ``note`` says why; a test with nothing
  observable to test reports ``p_value = 1.0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Sequence, Union

import numpy as np
from scipy import optimize
from scipy import stats as st
from statsmodels.stats.contingency_tables import mcnemar as _sm_mcnemar
from statsmodels.stats.inter_rater import cohens_kappa as _sm_cohens_kappa
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestIndPower, TTestPower
from statsmodels.stats.proportion import proportion_confint
import gc
import statsmodels.api as sm
from abtest.core.groups import MIN_GROUPS

__all__ = [
    "SignTestResult", "WinRateResult", "PairedTResult", "WilcoxonResult", "McNemarResult",
    "PairedPropCI", "TangoScoreTest", "HolmResult", "KappaResult",
    "PositionConsistencyResult", "PairwiseCounts", "RequiredN", "MDEResult", "PowerResult",
    "BootstrapCI", "Summary", "NonInferiorityResult",
    "sign_test", "win_rate", "paired_t", "wilcoxon", "mcnemar", "paired_proportion_diff_ci",
    "tango_ci", "newcombe_ci", "tango_score_test", "holm", "cohen_kappa", "cohen_kappa_table",
    "position_consistency", "pairwise_outcome", "pairwise_outcomes", "required_n",
    "mde_paired_t", "power_paired_t", "power_two_sample_t", "n_mcnemar_connor",
    "bootstrap_mean_diff_ci", "summary", "noninferiority_paired_t",
    "ClusteredTResult", "ClusteredNonInferiorityResult", "ClusteredMcNemarResult",
    "ClusteredSignResult", "clustered_paired_t", "noninferiority_clustered_t",
    "clustered_mcnemar", "clustered_sign_test", "rao_scott_tango_ci",
    "cluster_bootstrap_mean_diff_ci", "group_means", "kish_units", "mde_clustered_t",
    "ClusteredMDEResult",
    "BettingCI", "BettingBound", "PairedResult", "AnytimeBound", "betting_ci", "betting_bound",
    "effective_units", "min_n_noninferiority", "paired", "anytime", "BETTING_TRUNCATION",
    "CLT_MIN_UNITS",
]

Verdict = Literal["A", "B", "tie"] | None
Floats = Union[Sequence[float], np.ndarray]   # a 1-d sequence of numbers, or an array
_VERDICTS = ("A", "B", "tie", None)


def _alpha(conf_level: float) -> float:
    if not 0.0 < conf_level < 1.0:
        raise ValueError(f"conf_level must be in (0, 1), got {conf_level}")
    return 1.0 - conf_level


def _f(x) -> float | None:
    """Plain float, or None for NaN/inf so nothing non-finite reaches a report."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _scalar(x) -> float:
    """statsmodels' solve_power returns a 0-d or a 1-element array depending on the root
    finder it fell back to; either is one number."""
    return float(np.asarray(x, dtype=float).ravel()[0])


def _clip(x: float | None, limits: tuple[float, float] | None) -> float | None:
    if x is None or limits is None:
        return x
    return min(max(x, limits[0]), limits[1])


def _count(name: str, v) -> int:
    if int(v) != v or v < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    return int(v)


def _diffs(a: Floats, b: Floats) -> np.ndarray:
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.shape != xb.shape or xa.ndim != 1:
        raise ValueError("a and b must be paired 1-d sequences of equal length, got "
                         f"{xa.shape} and {xb.shape}")
    d = xb - xa
    if not np.all(np.isfinite(d)):
        raise ValueError("a and b must be finite; drop undefined pairs (and report them) before testing")
    return d


def _flat(d: np.ndarray) -> bool:
    """Zero spread up to float noise: 0.2-0.1 and 0.3-0.2 differ in the last bit, and
    scipy would turn that noise into t ~ 1e15 and p ~ 1e-32."""
    return d.size > 0 and float(np.ptp(d)) <= 1e-12 * max(1.0, float(np.max(np.abs(d))))


def _binom_two_sided(k_min: int, n: int) -> tuple[float, float]:
    """Exact and mid-p two-sided p for Bin(n, 1/2) at the smaller count.

    mid-p is ``2*P(X<=k) - P(X=k)`` capped at 1, which equals docs/STATS_SPEC.md's
    ``exact - pmf(k)`` whenever the two counts differ; when they are equal the
    exact p is capped at 1 and ``exact - pmf`` would wrongly fall below 1.
    """
    if n == 0:
        return 1.0, 1.0
    exact = float(st.binomtest(k_min, n, 0.5, alternative="two-sided").pvalue)
    midp = min(1.0, 2.0 * float(st.binom.cdf(k_min, n, 0.5)) - float(st.binom.pmf(k_min, n, 0.5)))
    return exact, midp


# --------------------------------------------------------------------------- §1 preference

@dataclass(frozen=True)
class SignTestResult:
    wins: int
    losses: int
    n: int                      # decisive pairs W + L (ties are excluded by design)
    p_value: float              # exact two-sided binomial, = R binom.test
    midp: float                 # mid-p sensitivity check
    estimate: float             # W / (W + L); 0.5 when there are no decisive pairs
    ci_low: float | None        # Wilson; None when W + L = 0
    ci_high: float | None
    conf_level: float
    note: str | None = None


def sign_test(wins: int, losses: int, conf_level: float = 0.95) -> SignTestResult:
    """Exact sign test on decisive pairs; W + L = 0 is reported as p = 1, not an error."""
    w, los = _count("wins", wins), _count("losses", losses)
    n = w + los
    if n == 0:
        return SignTestResult(w, los, 0, 1.0, 1.0, 0.5, None, None, conf_level,
                              note="no decisive pairs: sign test undefined, reported as p = 1")
    exact, midp = _binom_two_sided(min(w, los), n)
    ci = st.binomtest(w, n, 0.5).proportion_ci(confidence_level=conf_level, method="wilson")
    return SignTestResult(w, los, n, exact, midp, w / n, float(ci.low), float(ci.high), conf_level)


@dataclass(frozen=True)
class WinRateResult:
    wins: int
    losses: int
    ties: int
    n: int
    estimate: float             # (W + T/2) / N; 0.5 when N = 0
    ci_low: float | None        # t-interval on scores {1, .5, 0}; None when N = 0
    ci_high: float | None
    conf_level: float
    note: str | None = None


def win_rate(wins: int, losses: int, ties: int, conf_level: float = 0.95) -> WinRateResult:
    """Ties-as-half win rate with a t-interval: the scores are 3-valued, not binomial,
    so a Wilson/Clopper-Pearson interval would be wrong here."""
    w, los, t = _count("wins", wins), _count("losses", losses), _count("ties", ties)
    n = w + los + t
    if n == 0:
        return WinRateResult(w, los, t, 0, 0.5, None, None, conf_level, note="no questions")
    est = (w + t / 2) / n
    if sum(1 for k in (w, los, t) if k) == 1:  # every score identical: zero-width interval
        return WinRateResult(w, los, t, n, est, est, est, conf_level,
                             note="all per-question scores equal: zero-width interval")
    scores = np.concatenate([np.ones(w), np.full(t, 0.5), np.zeros(los)])
    ci = st.ttest_1samp(scores, 0.5).confidence_interval(confidence_level=conf_level)
    # a rate: the t interval is clipped to [0, 1]
    return WinRateResult(w, los, t, n, est, max(0.0, float(ci.low)), min(1.0, float(ci.high)),
                         conf_level)


def _check_verdict(v) -> None:
    if v not in _VERDICTS:
        raise ValueError(f"verdict must be 'A', 'B', 'tie' or None (judge error), got {v!r}")


def pairwise_outcome(verdict_ab: Verdict, verdict_ba: Verdict) -> str:
    """docs/STATS_SPEC.md §1: only agreement across both orders counts as a win; a disagreement,
    a tie in either order or a judge error is 'tie' (no preference)."""
    _check_verdict(verdict_ab)
    _check_verdict(verdict_ba)
    if verdict_ab == verdict_ba and verdict_ab in ("A", "B"):
        return verdict_ab
    return "tie"


@dataclass(frozen=True)
class PairwiseCounts:
    wins: int                   # W: B preferred in both orders
    losses: int                 # L: A preferred in both orders
    ties: int                   # T: everything else (incl. inconsistent and errors)
    n: int                      # W + L + T
    inconsistent: int           # both runs answered but disagreed (one tie counts)
    errors: int                 # a judge error in at least one run (counted in ties too)
    outcomes: tuple[str, ...]   # per question, input order


def pairwise_outcomes(verdicts_ab: Sequence[Verdict], verdicts_ba: Sequence[Verdict]) -> PairwiseCounts:
    """W/L/T for the sign test, with inconsistencies and errors kept visible."""
    if len(verdicts_ab) != len(verdicts_ba):
        raise ValueError("verdicts_ab and verdicts_ba must be paired (same length)")
    outcomes = tuple(pairwise_outcome(x, y) for x, y in zip(verdicts_ab, verdicts_ba))
    errors = sum(1 for x, y in zip(verdicts_ab, verdicts_ba) if x is None or y is None)
    inconsistent = sum(1 for x, y in zip(verdicts_ab, verdicts_ba)
                       if x is not None and y is not None and x != y)
    w, los = outcomes.count("B"), outcomes.count("A")
    return PairwiseCounts(w, los, outcomes.count("tie"), len(outcomes), inconsistent, errors, outcomes)


@dataclass(frozen=True)
class PositionConsistencyResult:
    n: int                      # questions where both runs returned a verdict
    consistent: int             # both-A, both-B or both-tie
    estimate: float | None      # consistent / n; None when n = 0
    ci_low: float | None        # Wilson
    ci_high: float | None
    biased_to_first: int        # run1 says A (shown 1st) and run2 says B (shown 1st)
    biased_to_second: int       # run1 says B (shown 2nd) and run2 says A (shown 2nd)
    other_inconsistent: int     # one run tie, the other a preference
    errors: int                 # excluded from n
    conf_level: float


def position_consistency(verdicts_ab: Sequence[Verdict], verdicts_ba: Sequence[Verdict],
                         conf_level: float = 0.95) -> PositionConsistencyResult:
    """Judge diagnostic, not an A/B metric (keep it out of Holm). Verdicts are already
    mapped to the underlying variant; run 1 showed A first, run 2 showed B first.
    Questions with a judge error in either run are excluded and counted in `errors`."""
    if len(verdicts_ab) != len(verdicts_ba):
        raise ValueError("verdicts_ab and verdicts_ba must be paired (same length)")
    n = cons = first = second = other = errors = 0
    for x, y in zip(verdicts_ab, verdicts_ba):
        _check_verdict(x)
        _check_verdict(y)
        if x is None or y is None:
            errors += 1
            continue
        n += 1
        if x == y:
            cons += 1
        elif x == "A" and y == "B":
            first += 1
        elif x == "B" and y == "A":
            second += 1
        else:
            other += 1
    if n == 0:
        return PositionConsistencyResult(0, 0, None, None, None, 0, 0, 0, errors, conf_level)
    lo, hi = proportion_confint(cons, n, alpha=_alpha(conf_level), method="wilson")
    # statsmodels leaves float noise at the ends (2.8e-17 for 0 of 12): the scale ends at 0 and 1
    lo = 0.0 if lo < 1e-12 else float(lo)
    hi = 1.0 if hi > 1 - 1e-12 else float(hi)
    return PositionConsistencyResult(n, cons, cons / n, lo, hi, first, second, other, errors,
                                     conf_level)


# --------------------------------------------------------------------------- §2/3 continuous

@dataclass(frozen=True)
class PairedTResult:
    n: int
    mean_diff: float | None     # mean(b - a); None when n = 0
    estimate: float | None      # = mean_diff
    ci_low: float | None
    ci_high: float | None
    p_value: float | None       # two-sided; None when the test is undefined (see note)
    t: float | None
    df: int | None
    d_z: float | None           # mean(d) / sd(d, ddof=1)
    sd_d: float | None
    conf_level: float
    note: str | None = None


def paired_t(a: Floats, b: Floats, conf_level: float = 0.95,
             limits: tuple[float, float] | None = None) -> PairedTResult:
    """Paired t on d = b - a (never Welch/independent: pairing removes question difficulty).

    ``limits`` is the range d can take (e.g. (-1, 1) for two 0-1 scores): the CI is
    clipped to it, since a t interval knows nothing of a bounded scale.

    Degenerate cases, instead of scipy's NaN: n = 0 -> everything None; n = 1 -> only
    the estimate; all d zero (|d| <= 1e-12) -> t = 0, p = 1, CI [0, 0], d_z = 0; all d
    equal to some c != 0 (up to float noise) -> the t statistic is undefined, but n
    differences of one sign are the strongest evidence there is: p is the exact
    two-sided sign test, 2 * 0.5**n (what any distribution-free test gives here), the
    CI is [c, c] and the note says so.
    """
    alpha_ = _alpha(conf_level)
    d = _diffs(a, b)
    n = d.size
    if n == 0:
        return PairedTResult(0, None, None, None, None, None, None, None, None, None, conf_level,
                             note="no pairs")
    mean = float(d.mean())
    if n == 1:
        return PairedTResult(1, mean, mean, None, None, None, None, None, None, None, conf_level,
                             note="one pair: no variance estimate, test undefined")
    sd = float(d.std(ddof=1))
    if _flat(d):
        if np.all(np.abs(d) <= 1e-12):
            return PairedTResult(n, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, n - 1, 0.0, 0.0, conf_level,
                                 note="all differences zero: no difference observable")
        p = float(st.binomtest(n, n, 0.5).pvalue)
        c = _clip(mean, limits)
        return PairedTResult(n, mean, mean, c, c, p, None, n - 1, None, 0.0, conf_level,
                             note="all differences equal and non-zero: zero variance, so the t "
                                  "statistic is undefined; p is the exact sign test on the "
                                  f"{n} same-signed differences")
    r = st.ttest_rel(np.asarray(b, float), np.asarray(a, float))
    ci = r.confidence_interval(confidence_level=1.0 - alpha_)
    return PairedTResult(n, mean, mean, _clip(float(ci.low), limits), _clip(float(ci.high), limits),
                         float(r.pvalue), float(r.statistic), int(r.df), mean / sd, sd, conf_level)


@dataclass(frozen=True)
class WilcoxonResult:
    statistic: float            # V = W+ (R's statistic), whatever the alternative
    statistic_min: float | None  # min(W+, W-), scipy's two-sided statistic
    p_value: float
    n_used: int                 # differences entering the ranks' test (zeros dropped unless zsplit)
    n_zero: int
    zero_method: str
    correction: bool
    method: str
    alternative: str
    note: str | None = None


def wilcoxon(a: Sequence[float], b: Sequence[float], zero_method: str = "wilcox",
             correction: bool = True, method: str = "auto",
             alternative: str = "two-sided") -> WilcoxonResult:
    """Signed-rank test on d = b - a, R-compatible by default: ``wilcox.test(b, a,
    paired=TRUE)`` drops zeros and uses the exact distribution when fewer than 50
    differences remain and none are tied or zero, else the normal approximation with a
    continuity correction (scipy's defaults differ on both). ``method`` "exact" or
    "asymptotic" forces one; the result records the one used. Differences are rounded
    to 12 decimals before ranking, so 0.3 - 0.2 and 0.2 - 0.1 tie as they should.
    All-zero differences give p = 1 on every scipy version."""
    if method not in ("auto", "exact", "asymptotic"):
        raise ValueError(f"method must be 'auto', 'exact' or 'asymptotic', got {method!r}")
    d = np.round(_diffs(a, b), 12)
    n_zero = int(np.sum(d == 0))
    nonzero = d.size - n_zero
    n_used = d.size if zero_method == "zsplit" else nonzero
    if method == "auto":
        nz = np.abs(d[d != 0])
        tied = np.unique(nz).size < nz.size
        method = "exact" if nonzero < 50 and n_zero == 0 and not tied else "asymptotic"
    if nonzero == 0:
        return WilcoxonResult(0.0, 0.0, 1.0, n_used, n_zero, zero_method, correction, method,
                              alternative, note="all differences zero: no difference observable")
    kw = dict(zero_method=zero_method, correction=correction, method=method)
    r = st.wilcoxon(d, alternative=alternative, **kw)
    v = r.statistic if alternative == "greater" else st.wilcoxon(d, alternative="greater", **kw).statistic
    smin = r.statistic if alternative == "two-sided" else st.wilcoxon(d, **kw).statistic
    return WilcoxonResult(float(v), _f(smin), float(r.pvalue), n_used, n_zero, zero_method,
                          correction, method, alternative)


@dataclass(frozen=True)
class NonInferiorityResult:
    n: int
    margin: float
    alpha: float
    estimate: float | None      # mean(b - a)
    ci_low: float | None        # two-sided (1 - 2*alpha) CI, e.g. 90% for alpha 0.05
    ci_high: float | None
    p_value: float | None       # one-sided, H1: mean(b - a) > -margin
    t: float | None
    df: int | None
    noninferior: bool
    note: str | None = None


def noninferiority_paired_t(a: Sequence[float], b: Sequence[float], margin: float,
                            alpha: float = 0.05) -> NonInferiorityResult:
    """'B is no worse than A by more than margin' (docs/STATS_SPEC.md §3). The decision is
    ``ci_low > -margin`` on the (1 - 2 alpha) CI, equivalent to one-sided p < alpha.
    Fewer than 2 pairs never shows non-inferiority. Zero variance (every d equal to c)
    leaves the t statistic undefined; then the one-sided sign test on d + margin decides:
    p = 0.5**n when c > -margin (n same-signed shifted differences), else 1."""
    if margin < 0:
        raise ValueError("margin must be >= 0 (it is the tolerated loss, on the metric's scale)")
    d = _diffs(a, b)
    n = d.size
    if n < 2:
        mean = float(d.mean()) if n else None
        return NonInferiorityResult(n, margin, alpha, mean, None, None, None, None, None,
                                    False, note="fewer than 2 pairs: test undefined")
    if _flat(d):
        mean = float(d.mean())
        p = 0.5 ** n if mean > -margin + 1e-12 else 1.0  # equal to −margin up to float noise: not above it
        return NonInferiorityResult(n, margin, alpha, mean, mean, mean, p, None, n - 1,
                                    bool(p < alpha),
                                    note="all differences equal: zero variance, the t statistic is "
                                         "undefined; p is the one-sided sign test on d + margin")
    one = st.ttest_1samp(d, popmean=-margin, alternative="greater")
    ci = st.ttest_rel(np.asarray(b, float), np.asarray(a, float)).confidence_interval(
        confidence_level=1.0 - 2.0 * alpha)
    return NonInferiorityResult(n, margin, alpha, float(d.mean()), float(ci.low), float(ci.high),
                                float(one.pvalue), float(one.statistic), n - 1,
                                bool(float(ci.low) > -margin))


@dataclass(frozen=True)
class BootstrapCI:
    n: int
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    conf_level: float
    n_boot: int
    seed: int
    method: str
    note: str | None = None


def bootstrap_mean_diff_ci(a: Sequence[float], b: Sequence[float], n_boot: int = 10000,
                           seed: int = 0, conf_level: float = 0.95,
                           method: str = "percentile") -> BootstrapCI:
    """Bootstrap CI of mean(b - a), a small-N / skew sensitivity check for the t CI.
    Resampling d keeps the pairing. Seeded, so re-running a report gives the same CI;
    report the seed. Zero variance gives a zero-width CI instead of NaN."""
    d = _diffs(a, b)
    n = d.size
    if n < 2:
        return BootstrapCI(n, float(d.mean()) if n else None, None, None, conf_level, n_boot, seed,
                           method, note="fewer than 2 pairs")
    mean = float(d.mean())
    if _flat(d):
        return BootstrapCI(n, mean, mean, mean, conf_level, n_boot, seed, method,
                           note="all differences equal: zero-width interval")
    r = st.bootstrap((d,), np.mean, n_resamples=n_boot, confidence_level=conf_level,
                     method=method, vectorized=True, rng=np.random.default_rng(seed))
    ci = r.confidence_interval
    return BootstrapCI(n, mean, _f(ci.low), _f(ci.high), conf_level, n_boot, seed, method)


@dataclass(frozen=True)
class Summary:
    n: int
    n_missing: int
    average: float | None
    median: float | None
    p25: float | None
    p75: float | None
    min: float | None
    max: float | None
    high: int                   # >= 0.8
    medium: int                 # 0.6 <= v < 0.8
    low: int                    # < 0.6


def summary(values: Sequence[float | None]) -> Summary:
    """Per-variant descriptive summary; None/NaN are missing (counted, not averaged).
    Percentiles use numpy's default linear interpolation."""
    raw = list(values)
    x = np.asarray([v for v in raw if v is not None and math.isfinite(float(v))], dtype=float)
    missing = len(raw) - x.size
    if x.size == 0:
        return Summary(0, missing, None, None, None, None, None, None, 0, 0, 0)
    p25, med, p75 = (float(v) for v in np.percentile(x, [25, 50, 75]))
    high = int(np.sum(x >= 0.8))
    low = int(np.sum(x < 0.6))
    return Summary(int(x.size), missing, float(x.mean()), med, p25, p75, float(x.min()),
                   float(x.max()), high, int(x.size) - high - low, low)


# --------------------------------------------------------------------------- §4 binary paired

@dataclass(frozen=True)
class McNemarResult:
    b: int                      # discordant: first (row) condition only
    c: int                      # discordant: second (column) condition only
    method: str
    p_value: float              # of `method` (chi2 honours `correction`)
    p_exact: float              # exact conditional (binomial on b + c)
    p_midp: float               # Fagerland et al. 2013 recommended default
    p_chi2: float               # asymptotic, no continuity correction
    p_chi2_cc: float            # asymptotic with continuity correction (R mcnemar.test default)
    statistic: float | None     # chi2 statistic of the chosen asymptotic variant; None if b + c = 0
    note: str | None = None


def mcnemar(b: int, c: int, method: str = "midp", correction: bool = False) -> McNemarResult:
    """McNemar on the discordant counts. b + c = 0 is p = 1 for every variant
    (statsmodels' asymptotic version returns p = 0 or NaN there)."""
    b, c = _count("b", b), _count("c", c)
    if method not in ("midp", "exact", "chi2"):
        raise ValueError(f"method must be 'midp', 'exact' or 'chi2', got {method!r}")
    if b + c == 0:
        return McNemarResult(b, c, method, 1.0, 1.0, 1.0, 1.0, 1.0, None,
                             note="no discordant pairs: no difference observable")
    table = [[0, b], [c, 0]]  # concordant cells do not enter McNemar
    p_exact = min(1.0, float(_sm_mcnemar(table, exact=True).pvalue))
    _, p_midp = _binom_two_sided(min(b, c), b + c)
    plain = _sm_mcnemar(table, exact=False, correction=False)
    cc = _sm_mcnemar(table, exact=False, correction=True)
    chosen = {"midp": p_midp, "exact": p_exact,
              "chi2": float(cc.pvalue) if correction else float(plain.pvalue)}[method]
    stat = float(cc.statistic) if correction else float(plain.statistic)
    return McNemarResult(b, c, method, chosen, p_exact, p_midp, float(plain.pvalue),
                         float(cc.pvalue), stat)


@dataclass(frozen=True)
class PairedPropCI:
    n: int
    estimate: float | None      # (n10 - n01) / N
    ci_low: float | None
    ci_high: float | None
    conf_level: float
    method: str


def _table(n11, n10, n01, n00) -> tuple[int, int, int, int, int]:
    c11, c10, c01, c00 = (_count(k, v) for k, v in zip(("n11", "n10", "n01", "n00"),
                                                      (n11, n10, n01, n00)))
    return (c11, c10, c01, c00, c11 + c10 + c01 + c00)


def _tango_z(n10: float, n01: float, n: float, delta: float) -> float:
    """Tango (1998) score statistic at H0: p10 - p01 = delta, using the constrained
    MLE of p01. Non-finite values are clamped so root finding stays well defined."""
    A = 2.0 * n
    B = -n10 - n01 + (2.0 * n - n10 + n01) * delta
    C = -n01 * delta * (1.0 - delta)
    q01 = (math.sqrt(max(B * B - 4.0 * A * C, 0.0)) - B) / (2.0 * A)
    num = n10 - n01 - n * delta
    var = n * (2.0 * q01 + delta * (1.0 - delta))
    if num == 0.0:
        return 0.0
    if var <= 0.0:
        return math.copysign(1e12, num)
    return num / math.sqrt(var)


def tango_ci(n11: int, n10: int, n01: int, n00: int, conf_level: float = 0.95) -> PairedPropCI:
    """Tango (1998) score interval for p10 - p01: stays inside [-1, 1] and behaves with
    zero off-diagonal cells, where Wald fails."""
    n11, n10, n01, n00, n = _table(n11, n10, n01, n00)
    if n == 0:
        return PairedPropCI(0, None, None, None, conf_level, "tango")
    est, low, high = _tango_limits(n10, n01, n, conf_level)
    return PairedPropCI(n, est, low, high, conf_level, "tango")


def _tango_limits(n10: float, n01: float, n: float, conf_level: float) -> tuple[float, float, float]:
    """(estimate, low, high) of the Tango interval; counts may be fractional (the Rao-Scott
    effective table of a clustered design, `rao_scott_tango_ci`)."""
    z = float(st.norm.ppf(1.0 - _alpha(conf_level) / 2.0))
    est = (n10 - n01) / n
    # z(delta) decreases in delta; lower limit solves z = +zc, upper solves z = -zc.
    lo_end, hi_end = -1.0, 1.0
    f_lo = lambda dl: _tango_z(n10, n01, n, dl) - z  # noqa: E731
    f_hi = lambda dl: _tango_z(n10, n01, n, dl) + z  # noqa: E731
    low = lo_end if f_lo(lo_end) <= 0 else optimize.brentq(f_lo, lo_end, est, xtol=1e-12)
    high = hi_end if f_hi(hi_end) >= 0 else optimize.brentq(f_hi, est, hi_end, xtol=1e-12)
    return est, float(low), float(high)


def newcombe_ci(n11: int, n10: int, n01: int, n00: int, conf_level: float = 0.95,
                phi_correction: bool = True) -> PairedPropCI:
    """Newcombe (1998) square-and-add of the two marginal Wilson intervals, with the
    correlation phi (method 10 uses the continuity-corrected phi; phi_correction=False
    gives the uncorrected-phi variant, 'method 8' in the vectors)."""
    n11, n10, n01, n00, n = _table(n11, n10, n01, n00)
    name = "newcombe" if phi_correction else "newcombe8"
    if n == 0:
        return PairedPropCI(0, None, None, None, conf_level, name)
    alpha_ = _alpha(conf_level)
    x1, x2 = n11 + n10, n11 + n01          # positive under first / second condition
    p1, p2 = x1 / n, x2 / n
    l1, u1 = proportion_confint(x1, n, alpha=alpha_, method="wilson")
    l2, u2 = proportion_confint(x2, n, alpha=alpha_, method="wilson")
    margins = float(x1) * (n - x1) * x2 * (n - x2)
    cross = float(n11) * n00 - float(n10) * n01
    if margins == 0.0:
        phi = 0.0
    elif phi_correction and cross > 0:
        phi = max(cross - n / 2.0, 0.0) / math.sqrt(margins)
    else:
        phi = cross / math.sqrt(margins)
    est = p1 - p2
    dl = math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    du = math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    return PairedPropCI(n, est, max(-1.0, est - dl), min(1.0, est + du), conf_level, name)


def paired_proportion_diff_ci(n11: int, n10: int, n01: int, n00: int, method: str = "tango",
                              conf_level: float = 0.95) -> PairedPropCI:
    """CI for p(first) - p(second) on a paired 2x2 table; n10 = positive under the first
    condition only. Tango is the primary choice; 'newcombe' = method 10,
    'newcombe8' = uncorrected phi."""
    if method == "tango":
        return tango_ci(n11, n10, n01, n00, conf_level)
    if method == "newcombe":
        return newcombe_ci(n11, n10, n01, n00, conf_level, phi_correction=True)
    if method == "newcombe8":
        return newcombe_ci(n11, n10, n01, n00, conf_level, phi_correction=False)
    raise ValueError(f"method must be 'tango', 'newcombe' or 'newcombe8', got {method!r}")


@dataclass(frozen=True)
class TangoScoreTest:
    n: int
    delta0: float
    estimate: float             # (n10 - n01) / N
    z: float
    p_greater: float            # H1: p10 - p01 > delta0, norm.sf(z)
    p_less: float               # H1: p10 - p01 < delta0, norm.cdf(z)


def tango_score_test(n11: int, n10: int, n01: int, n00: int, delta0: float) -> TangoScoreTest:
    """Score test at a non-zero null (binary non-inferiority, docs/STATS_SPEC.md §4). Pick the
    one-sided p that matches the direction of the claim."""
    n11, n10, n01, n00, n = _table(n11, n10, n01, n00)
    if n == 0:
        raise ValueError("empty table")
    if not -1.0 < delta0 < 1.0:
        raise ValueError("delta0 must be in (-1, 1)")
    z = _tango_z(n10, n01, n, delta0)
    return TangoScoreTest(n, delta0, (n10 - n01) / n, z, float(st.norm.sf(z)), float(st.norm.cdf(z)))


# --------------------------------------------------------------------------- §5 Holm

class HolmResult(tuple):
    """The Holm-adjusted p-values in input order (a tuple), with the details as attributes."""

    p_values: tuple[float, ...]
    p_adjusted: tuple[float, ...]   # input order (the tuple itself)
    reject: tuple[bool, ...]
    alpha: float

    def __new__(cls, p_values, p_adjusted, reject, alpha):
        obj = super().__new__(cls, p_adjusted)
        obj.p_values, obj.p_adjusted, obj.reject, obj.alpha = p_values, p_adjusted, reject, alpha
        return obj


def holm(pvalues: Sequence[float], alpha: float = 0.05) -> HolmResult:
    """Holm step-down adjustment over the pre-declared family, adjusted p in input order.

    Boundary convention: reject when ``p_adj <= alpha`` (statsmodels'); an adjusted p of
    exactly alpha IS rejected, unlike the strict '<' of many R reports (vector holm_six).
    """
    p = [float(x) for x in pvalues]
    if any(not (0.0 <= x <= 1.0) for x in p):
        raise ValueError(f"p-values must be in [0, 1] (no None/NaN), got {p}")
    if not p:
        return HolmResult((), (), (), alpha)
    # statsmodels' Holm branch calls gc.collect(): a full collection over everything the caller
    # holds (a 10,000-case report: ~0.1 s; a sequential run's looks, after litellm and scipy
    # loaded: 0.14 s a call). The adjustment allocates no cycle, so that collection finds
    # nothing of its own to free: it is skipped for the call, the result the same.

    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        reject, padj, _, _ = multipletests(p, alpha=alpha, method="holm")
    finally:
        gc.collect = collect
    return HolmResult(tuple(p), tuple(float(x) for x in padj), tuple(bool(x) for x in reject), alpha)


# --------------------------------------------------------------------------- agreement

@dataclass(frozen=True)
class KappaResult:
    n: int
    kappa: float | None         # None when p_expected = 1 (both raters constant)
    estimate: float | None      # = kappa
    p_observed: float | None
    p_expected: float | None
    se: float | None            # asymptotic SE (Fleiss et al.), used for the CI
    ci_low: float | None
    ci_high: float | None
    conf_level: float
    labels: tuple
    note: str | None = None


def cohen_kappa_table(table, conf_level: float = 0.95, labels: tuple = ()) -> KappaResult:
    """Unweighted Cohen's kappa with an asymptotic-SE Wald CI at conf_level."""
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or t.shape[0] != t.shape[1] or np.any(t < 0):
        raise ValueError("table must be a square matrix of non-negative counts")
    n = int(t.sum())
    if n == 0:
        return KappaResult(0, None, None, None, None, None, None, None, conf_level, labels, note="no items")
    po = float(np.trace(t) / n)
    pe = float((t.sum(0) * t.sum(1)).sum() / n / n)
    if pe >= 1.0:
        return KappaResult(n, None, None, po, pe, None, None, None, conf_level, labels,
                           note="both raters used one and the same label: kappa undefined")
    r = _sm_cohens_kappa(t)
    kappa = float(r.kappa)
    se = _f(math.sqrt(r.var_kappa)) if r.var_kappa >= 0 else None
    z = float(st.norm.ppf(1.0 - _alpha(conf_level) / 2.0))
    lo = hi = None
    note = None
    one_label = int((t.sum(0) > 0).sum()) == 1 or int((t.sum(1) > 0).sum()) == 1
    if one_label:   # one rater used one label: kappa is 0 and its asymptotic SE degenerates
        se = None
        note = "one rater used a single label: no interval (its standard error is 0)"
    elif se is not None:
        lo, hi = max(-1.0, kappa - z * se), min(1.0, kappa + z * se)
    return KappaResult(n, kappa, kappa, po, pe, se, lo, hi, conf_level, labels, note=note)


def cohen_kappa(x: Sequence, y: Sequence, conf_level: float = 0.95) -> KappaResult:
    """Kappa between two raters' label sequences (e.g. judge vs human); pairs with a
    None label are dropped, because a missing label is not a disagreement."""
    if len(x) != len(y):
        raise ValueError("x and y must be paired (same length)")
    pairs = [(u, v) for u, v in zip(x, y) if u is not None and v is not None]
    labels = tuple(sorted({u for u, _ in pairs} | {v for _, v in pairs}, key=str))
    idx = {lab: i for i, lab in enumerate(labels)}
    t = np.zeros((len(labels), len(labels)))
    for u, v in pairs:
        t[idx[u], idx[v]] += 1
    return cohen_kappa_table(t, conf_level=conf_level, labels=labels)


# --------------------------------------------------------------------------- §7 power / MDE

@dataclass(frozen=True)
class RequiredN:
    n: int                      # ceil(n_exact), at least 2
    n_exact: float
    d_z: float | None           # standardized effect used (None for Connor)
    alpha: float
    power: float

    def __int__(self) -> int:   # usable where a plain number of pairs is expected
        return self.n

    __index__ = __int__


@dataclass(frozen=True)
class MDEResult:
    n: int
    d_z: float                  # detectable standardized mean difference
    mde: float | None           # d_z * sd_d, on the metric's scale
    sd_d: float | None
    alpha: float
    power: float


@dataclass(frozen=True)
class PowerResult:
    power: float
    effect_size: float
    n: int
    alpha: float


def required_n(delta: float | None = None, sd_d: float | None = None, *, d_z: float | None = None,
               alpha: float = 0.05, power: float = 0.8,
               alternative: str = "two-sided") -> RequiredN:
    """Pairs needed for a paired t to detect ``delta`` given pilot ``sd_d`` (or a given
    d_z). Size alpha at alpha/m when the metric sits in a Holm family of m."""
    if d_z is None:
        if delta is None or sd_d is None or sd_d <= 0:
            raise ValueError("give delta and a positive sd_d, or d_z")
        d_z = delta / sd_d
    if d_z == 0:
        raise ValueError("a zero effect needs infinitely many pairs")
    n_exact = _scalar(TTestPower().solve_power(effect_size=abs(d_z), nobs=None, alpha=alpha,
                                               power=power, alternative=alternative))
    return RequiredN(max(2, math.ceil(n_exact)), n_exact, float(d_z), alpha, power)


def mde_paired_t(n: int, sd_d: float | None = None, alpha: float = 0.05, power: float = 0.8,
                 alternative: str = "two-sided") -> MDEResult:
    """Smallest paired difference N pairs detect with the given power: the honest
    companion of a non-significant p."""
    if n < 2:
        raise ValueError("need at least 2 pairs")
    # two-sided power is symmetric in d_z and the root finder may land on either root
    dz = abs(_scalar(TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power,
                                              alternative=alternative)))
    return MDEResult(n, dz, dz * sd_d if sd_d is not None else None, sd_d, alpha, power)


def power_paired_t(d_z: float, n: int, alpha: float = 0.05,
                   alternative: str = "two-sided") -> PowerResult:
    """Noncentral-t power of the paired t (matches G*Power 'matched pairs')."""
    p = float(TTestPower().power(effect_size=d_z, nobs=n, alpha=alpha, alternative=alternative))
    return PowerResult(p, d_z, n, alpha)


def power_two_sample_t(d: float, n_per_group: int, alpha: float = 0.05,
                       alternative: str = "two-sided") -> PowerResult:
    """Two-sample t power, for comparison with published tables only (abtest's data are
    paired). Counts both rejection regions; R's power.t.test counts one (diff < 1e-6)."""
    p = float(TTestIndPower().power(effect_size=d, nobs1=n_per_group, ratio=1.0, alpha=alpha,
                                    alternative=alternative))
    return PowerResult(p, d, n_per_group, alpha)


def n_mcnemar_connor(p10: float, p01: float, alpha: float = 0.05, power: float = 0.8) -> RequiredN:
    """Connor (1987) pairs needed for a two-sided McNemar, from the expected discordant
    cell probabilities."""
    psi, delta = p10 + p01, p10 - p01
    if not (0 < psi <= 1) or p10 < 0 or p01 < 0:
        raise ValueError("p10 and p01 must be non-negative with 0 < p10 + p01 <= 1")
    if delta == 0:
        raise ValueError("p10 == p01: no difference to detect")
    za, zb = st.norm.ppf(1 - alpha / 2), st.norm.ppf(power)
    n_exact = float((za * math.sqrt(psi) + zb * math.sqrt(psi - delta ** 2)) ** 2 / delta ** 2)
    return RequiredN(math.ceil(n_exact), n_exact, None, alpha, power)


# --------------------------------------------------------------------------- §9 groups

# Cases about one source document, or one question written twice, share their difficulty:
# their paired differences are correlated and every iid test understates its variance. The
# unit of inference is then the group (docs/STATS_SPEC.md §9, docs/CLAIM_STATISTICS.md §10). With one
# case per group every function below reduces to its iid counterpart's formula; the report
# still calls the iid functions then, so their exact paths (sign test, Wilcoxon, mid-p,
# Tango) give today's results to the last bit.

def _group_index(groups: Sequence, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per case the index of its group (in order of first appearance), and the group sizes.
    A missing label (None) is refused: it would silently put every unlabelled case in one
    group."""
    if len(groups) != n:
        raise ValueError(f"groups must give one label per pair: {len(groups)} labels for {n} pairs")
    idx: dict = {}
    inv = np.empty(n, dtype=np.intp)
    for i, g in enumerate(groups):
        if g is None:
            raise ValueError(f"pair {i} has no group label (None)")
        inv[i] = idx.setdefault(g, len(idx))
    return inv, np.bincount(inv, minlength=len(idx))


def kish_units(sizes: Sequence[int]) -> float:
    """n² / Σ n_g²: how many independent cases n cases in groups of these sizes are worth when
    each group's cases move together (Kish's effective size of a mean weighted by n_g); G for
    equal groups, n for singletons. A data-free worst case, so a floor built on it cannot be
    passed by what the sample happened not to show."""
    s = np.asarray(sizes, dtype=float)
    tot = float(s.sum())
    return tot * tot / float(np.sum(s * s)) if tot else 0.0


def group_means(values: Sequence[float], groups: Sequence) -> list[float]:
    """Per-group means, groups in order of first appearance (one value per independent unit,
    for a Wilcoxon on groups)."""
    x = np.asarray(values, dtype=float)
    inv, sizes = _group_index(groups, x.size)
    return [float(v) for v in np.bincount(inv, weights=x, minlength=sizes.size) / sizes]


def _bm_df(sizes: np.ndarray) -> float:
    """Bell & McCaffrey (2002) Satterthwaite df of the CR2 variance of a mean (working model:
    independent, equal variances), in closed form: with a_g = (1 − n_g/n)^(−1/2) the variance
    is σ²·Σλχ²₁ over the eigenvalues of W = [diag(a_g² n_g) − c cᵀ/n]/n², c_g = a_g n_g, and
    df = tr(W)²/‖W‖²_F. Equal groups give exactly G − 1; unequal ones fewer, which keeps the
    test's size where G − 1 exceeds it (docs/CLAIM_STATISTICS.md §10)."""
    s = sizes.astype(float)
    n = float(s.sum())
    a2 = 1.0 / (1.0 - s / n)
    diag = a2 * s
    c2 = a2 * s * s
    tr = float(diag.sum() - c2.sum() / n)
    fro = float(np.sum(diag * diag) - 2.0 * np.sum(diag * c2) / n + c2.sum() ** 2 / n ** 2)
    return tr * tr / fro


def _cluster_se(d: np.ndarray, inv: np.ndarray, sizes: np.ndarray, method: str) -> float:
    """Cluster-robust SE of mean(d) (intercept-only regression), G >= 2.

    CR2 (Bell & McCaffrey 2002) in its intercept-only closed form, SE² = Σ_g S_g²/(1 − n_g/n)/n²
    with S_g the group's residual sum; CR1 (Liang–Zeger with the G/(G−1) factor) through
    statsmodels' cluster covariance, which is what a reader can re-run."""
    n = d.size
    if method == "CR2":
        s = np.bincount(inv, weights=d - d.mean(), minlength=sizes.size)
        return math.sqrt(float(np.sum(s * s / (1.0 - sizes / n)))) / n

    fit = sm.OLS(d, np.ones(n)).fit(cov_type="cluster", cov_kwds={"groups": inv})
    return float(fit.bse[0])


def _check_method(method: str, df_method: str) -> None:
    if method not in ("CR2", "CR1"):
        raise ValueError(f"method must be 'CR2' or 'CR1', got {method!r}")
    if df_method not in ("bm", "G-1"):
        raise ValueError(f"df_method must be 'bm' or 'G-1', got {df_method!r}")
    if method == "CR1" and df_method == "bm":
        raise ValueError("Bell–McCaffrey df belong to CR2; use df_method='G-1' with CR1")


@dataclass(frozen=True)
class ClusteredTResult:
    n: int
    n_groups: int
    mean_diff: float | None     # mean over cases of b - a
    estimate: float | None      # = mean_diff
    se: float | None            # cluster-robust (method)
    se_iid: float | None        # sd(d)/sqrt(n), what an iid paired t uses
    design_effect: float | None  # (se / se_iid)²; None when either is 0 or undefined
    icc: float | None           # (DEFF − 1)/(m − 1), m = Σn_g²/n: the implied intra-group correlation
    effective_n: float | None   # n / DEFF
    ci_low: float | None
    ci_high: float | None
    p_value: float | None       # two-sided, t on `df`
    t: float | None
    df: float | None            # Bell–McCaffrey or G − 1
    sd_d: float | None
    d_z: float | None           # mean(d)/sd(d), as the iid paired t reports it
    method: str                 # CR2 | CR1
    df_method: str              # bm | G-1
    conf_level: float
    note: str | None = None


def _implied(se: float | None, se_iid: float | None, n: int, sizes: np.ndarray
             ) -> tuple[float | None, float | None, float | None]:
    """(design effect, implied ICC, effective N) from the two standard errors."""
    if not se or not se_iid:
        return None, None, None
    deff = (se / se_iid) ** 2
    m = float(np.sum(sizes.astype(float) ** 2)) / n
    icc = (deff - 1.0) / (m - 1.0) if m > 1.0 else None
    return deff, icc, n / deff


def clustered_paired_t(a: Floats, b: Floats, groups: Sequence,
                       conf_level: float = 0.95, method: str = "CR2", df_method: str = "bm",
                       limits: tuple[float, float] | None = None) -> ClusteredTResult:
    """Paired t on d = b - a with a cluster-robust SE: the group, not the case, is the unit.

    Default CR2 with Bell–McCaffrey df (docs/CLAIM_STATISTICS.md §10 says why: G − 1 df with
    unequal groups rejected 7–10 % at a nominal 5 %); method='CR1', df_method='G-1' is
    statsmodels' cluster covariance with G − 1 df (docs/STATS_SPEC.md §9's vector). With every
    group a singleton SE = sd/√n and BM df = n − 1: the iid paired t.

    Degenerate cases, as in `paired_t`: no pairs -> all None; one group -> only the
    estimate; every group mean equal (no between-group spread, so SE = 0) -> p = 1 when that
    mean is 0, else the exact sign test on the G same-signed group means, 2·0.5^G, with a
    zero-width CI.
    """
    _check_method(method, df_method)
    alpha_ = _alpha(conf_level)
    d = _diffs(a, b)
    inv, sizes = _group_index(groups, d.size)
    n, g = d.size, sizes.size
    if n == 0:
        return ClusteredTResult(0, 0, None, None, None, None, None, None, None, None, None, None,
                                None, None, None, None, method, df_method, conf_level,
                                note="no pairs")
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else None
    se_iid = sd / math.sqrt(n) if sd is not None else None
    d_z = mean / sd if sd else None
    if g == 1:
        return ClusteredTResult(n, 1, mean, mean, None, se_iid, None, None, None, None, None, None,
                                None, None, sd, d_z, method, df_method, conf_level,
                                note="one group: no between-group variance, test undefined")
    gm = np.bincount(inv, weights=d, minlength=g) / sizes
    df = float(g - 1) if df_method == "G-1" else _bm_df(sizes)
    if _flat(gm):
        if abs(mean) <= 1e-12:
            return ClusteredTResult(n, g, 0.0, 0.0, 0.0, se_iid, None, None, None, 0.0, 0.0, 1.0,
                                    0.0, df, sd, d_z, method, df_method, conf_level,
                                    note="every group's mean difference is zero: no difference "
                                         "observable")
        p = float(st.binomtest(g, g, 0.5).pvalue)
        c = _clip(mean, limits)
        return ClusteredTResult(n, g, mean, mean, 0.0, se_iid, None, None, None, c, c, p, None, df,
                                sd, d_z, method, df_method, conf_level,
                                note="every group's mean difference is equal and non-zero: no "
                                     "between-group variance, so the t statistic is undefined; "
                                     f"p is the exact sign test on the {g} same-signed groups")
    se = _cluster_se(d, inv, sizes, method)
    deff, icc, n_eff = _implied(se, se_iid, n, sizes)
    t = mean / se
    p = float(2.0 * st.t.sf(abs(t), df))
    q = float(st.t.ppf(1.0 - alpha_ / 2.0, df))
    return ClusteredTResult(n, g, mean, mean, se, se_iid, deff, icc, n_eff,
                            _clip(mean - q * se, limits), _clip(mean + q * se, limits), p, t, df,
                            sd, d_z, method, df_method, conf_level)


@dataclass(frozen=True)
class ClusteredNonInferiorityResult:
    n: int
    n_groups: int
    margin: float
    alpha: float
    estimate: float | None
    ci_low: float | None        # two-sided (1 - 2 alpha), cluster-robust
    ci_high: float | None
    p_value: float | None       # one-sided, H1: mean(b - a) > -margin
    t: float | None
    df: float | None
    se: float | None
    noninferior: bool
    note: str | None = None


def noninferiority_clustered_t(a: Sequence[float], b: Sequence[float], groups: Sequence,
                               margin: float, alpha: float = 0.05, method: str = "CR2",
                               df_method: str = "bm") -> ClusteredNonInferiorityResult:
    """`noninferiority_paired_t` with the group as the unit: the lower (1 − 2α) limit of the
    cluster-robust interval must exceed −margin. Every group mean equal (no between-group
    spread) -> the one-sided sign test on the G groups, 0.5^G when that mean is above
    −margin. The floor on how many groups a margin needs is the caller's policy
    (abtest.reporting.metrics), not this test's."""
    if margin < 0:
        raise ValueError("margin must be >= 0 (it is the tolerated loss, on the metric's scale)")
    _check_method(method, df_method)
    d = _diffs(a, b)
    inv, sizes = _group_index(groups, d.size)
    n, g = d.size, sizes.size
    if n < 2 or g < 2:
        mean = float(d.mean()) if n else None
        return ClusteredNonInferiorityResult(n, g, margin, alpha, mean, None, None, None, None,
                                             None, None, False,
                                             note="fewer than 2 groups: test undefined")
    mean = float(d.mean())
    gm = np.bincount(inv, weights=d, minlength=g) / sizes
    df = float(g - 1) if df_method == "G-1" else _bm_df(sizes)
    if _flat(gm):
        p = 0.5 ** g if mean > -margin + 1e-12 else 1.0
        return ClusteredNonInferiorityResult(
            n, g, margin, alpha, mean, mean, mean, p, None, df, 0.0, bool(p < alpha),
            note="every group's mean difference is equal: no between-group variance, the t "
                 "statistic is undefined; p is the one-sided sign test on the groups")
    se = _cluster_se(d, inv, sizes, method)
    t = (mean + margin) / se
    q = float(st.t.ppf(1.0 - alpha, df))
    lo, hi = mean - q * se, mean + q * se
    return ClusteredNonInferiorityResult(n, g, margin, alpha, mean, lo, hi,
                                         float(st.t.sf(t, df)), t, df, se, bool(lo > -margin))


@dataclass(frozen=True)
class ClusteredMcNemarResult:
    b: int                      # discordant: first (row) condition only, summed over groups
    c: int                      # discordant: second (column) condition only
    n_groups: int
    statistic: float | None     # Durkalski X², 1 df; None when b + c = 0
    p_value: float
    design_effect: float | None  # Σ(b_g − c_g)² / (b + c): cluster over iid variance of b − c
    note: str | None = None


def clustered_mcnemar(b_g: Sequence[int], c_g: Sequence[int]) -> ClusteredMcNemarResult:
    """Durkalski et al. (Stat Med 2003) McNemar for clustered pairs:
    X² = (Σb_g − Σc_g)² / Σ_g (b_g − c_g)², 1 df. With every group one pair it is McNemar's
    (b − c)²/(b + c). Its variance is estimated from the groups' own imbalances, so it needs
    no intra-group correlation model; with few discordant groups it is conservative
    (docs/CLAIM_STATISTICS.md §10)."""
    if len(b_g) != len(c_g):
        raise ValueError("b_g and c_g must give one count per group")
    bs = [_count("b_g", v) for v in b_g]
    cs = [_count("c_g", v) for v in c_g]
    b, c, g = sum(bs), sum(cs), len(bs)
    if b + c == 0:
        return ClusteredMcNemarResult(b, c, g, None, 1.0, None,
                                      note="no discordant pairs: no difference observable")
    den = float(sum((x - y) ** 2 for x, y in zip(bs, cs)))
    deff = den / (b + c)
    if den == 0.0:  # every group balanced, so b == c
        return ClusteredMcNemarResult(b, c, g, 0.0, 1.0, deff,
                                      note="every group's discordant pairs balance: no difference")
    stat = (b - c) ** 2 / den
    return ClusteredMcNemarResult(b, c, g, stat, float(st.chi2.sf(stat, 1)), deff)


@dataclass(frozen=True)
class ClusteredSignResult:
    n: int                      # cases
    n_groups: int
    wins: int                   # cases B won (w = +1)
    losses: int                 # cases A won (w = -1)
    ties: int
    group_wins: int             # groups whose votes sum > 0
    group_losses: int           # groups whose votes sum < 0
    group_ties: int             # groups whose votes sum to 0
    p_value: float              # exact two-sided sign test on the decisive groups
    midp: float
    estimate: float             # group_wins / decisive groups; 0.5 when none
    ci_low: float | None        # Wilson over decisive groups
    ci_high: float | None
    chi2: float | None          # (Σw)² / Σ_g (Σ_{i∈g} w_i)², 1 df (Durkalski's form)
    p_chi2: float | None
    design_effect: float | None  # Σ_g s_g² / Σ w_i²
    conf_level: float
    note: str | None = None


def clustered_sign_test(w: Sequence[int], groups: Sequence,
                        conf_level: float = 0.95) -> ClusteredSignResult:
    """Pairwise preference with the group as the unit: each group votes with the sign of its
    summed per-case outcomes w ∈ {+1 B won, −1 A won, 0 no preference}, and the exact sign
    test runs on the decisive groups. It stays exact at any number of groups, and with one
    case per group it is `sign_test` itself. Durkalski's form of the same data (chi2) is
    returned as a secondary check."""
    x = np.asarray(w, dtype=float)
    if x.ndim != 1 or not np.all(np.isin(x, (-1.0, 0.0, 1.0))):
        raise ValueError("w must be +1 (B won), -1 (A won) or 0 (no preference) per case")
    inv, sizes = _group_index(groups, x.size)
    s = np.bincount(inv, weights=x, minlength=sizes.size)
    gw, gl = int(np.sum(s > 0)), int(np.sum(s < 0))
    sign = sign_test(gw, gl, conf_level=conf_level)
    den = float(np.sum(s * s))
    chi2 = p_chi2 = deff = None
    if den > 0:
        chi2 = float(x.sum()) ** 2 / den
        p_chi2 = float(st.chi2.sf(chi2, 1))
        deff = den / float(np.sum(x * x))
    return ClusteredSignResult(int(x.size), int(sizes.size), int(np.sum(x > 0)), int(np.sum(x < 0)),
                               int(np.sum(x == 0)), gw, gl, int(sizes.size) - gw - gl,
                               sign.p_value, sign.midp, sign.estimate, sign.ci_low, sign.ci_high,
                               chi2, p_chi2, deff, conf_level, note=sign.note)


def rao_scott_tango_ci(n11: int, n10: int, n01: int, n00: int, design_effect: float,
                       conf_level: float = 0.95) -> PairedPropCI:
    """Tango's interval on the Rao–Scott effective table: every cell divided by the design
    effect (Rao & Scott, JASA 1992: clustered counts behave like independent counts of
    n/DEFF). DEFF = 1 is `tango_ci`; which DEFF to use is the caller's (see
    abtest.reporting.metrics.binary: Durkalski's ratio, or the worst case without
    discordant pairs)."""
    n11, n10, n01, n00, n = _table(n11, n10, n01, n00)
    if not design_effect > 0:
        raise ValueError(f"design_effect must be > 0, got {design_effect!r}")
    if n == 0:
        return PairedPropCI(0, None, None, None, conf_level, "tango (Rao–Scott)")
    k = float(design_effect)
    est, low, high = _tango_limits(n10 / k, n01 / k, n / k, conf_level)
    return PairedPropCI(n, (n10 - n01) / n, low, high, conf_level, "tango (Rao–Scott)")


def cluster_bootstrap_mean_diff_ci(a: Sequence[float], b: Sequence[float], groups: Sequence,
                                   n_boot: int = 5000, seed: int = 0, conf_level: float = 0.95
                                   ) -> BootstrapCI:
    """Percentile bootstrap of mean(b − a) resampling whole groups (the ratio Σ sums / Σ sizes
    of the drawn groups), the clustered counterpart of `bootstrap_mean_diff_ci`: a small-G
    sensitivity check, seeded."""
    d = _diffs(a, b)
    inv, sizes = _group_index(groups, d.size)
    g = sizes.size
    if g < 2:
        return BootstrapCI(d.size, float(d.mean()) if d.size else None, None, None, conf_level,
                           n_boot, seed, "cluster percentile", note="fewer than 2 groups")
    mean = float(d.mean())
    sums = np.bincount(inv, weights=d, minlength=g)
    if _flat(sums / sizes):
        return BootstrapCI(d.size, mean, mean, mean, conf_level, n_boot, seed,
                           "cluster percentile", note="every group mean equal: zero-width interval")
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, g, size=(n_boot, g))
    stats_ = sums[draw].sum(axis=1) / sizes[draw].sum(axis=1)
    a_ = _alpha(conf_level)
    lo, hi = np.quantile(stats_, [a_ / 2.0, 1.0 - a_ / 2.0])
    return BootstrapCI(d.size, mean, float(lo), float(hi), conf_level, n_boot, seed,
                       "cluster percentile")


@dataclass(frozen=True)
class ClusteredMDEResult:
    effective_n: float
    df: float
    d_z: float                  # detectable mean difference / sd_d
    mde: float | None           # on the metric's scale
    sd_d: float | None
    alpha: float
    power: float


def mde_clustered_t(effective_n: float, df: float, sd_d: float | None = None, alpha: float = 0.05,
                    power: float = 0.8) -> ClusteredMDEResult:
    """Smallest mean difference a cluster-robust t detects with `power`: noncentrality
    d_z·√(effective N) on the test's own df (n/DEFF cases are worth no more than that, and
    the t is read on G − 1 or BM df, not n − 1)."""
    if effective_n <= 1 or df <= 0:
        raise ValueError("need an effective N above 1 and positive df")
    crit = float(st.t.isf(alpha / 2.0, df))

    def gap(nc: float) -> float:
        # two-sided noncentral-t power; scipy's nct turns NaN far in the tail, where it is 1
        p = float(st.nct.sf(crit, df, nc) + st.nct.cdf(-crit, df, nc))
        return (p if math.isfinite(p) else 1.0) - power

    hi = 4.0
    while gap(hi) < 0:
        hi *= 2.0
    nc = float(optimize.brentq(gap, 0.0, hi, xtol=1e-12))
    dz = nc / math.sqrt(effective_n)
    return ClusteredMDEResult(float(effective_n), float(df), dz,
                              dz * sd_d if sd_d is not None else None, sd_d, alpha, power)


# --------------------------------------------------------------------------- §11 bounded means

# Differences of 0–1 scores lie in [−1, 1], and at the sizes prompt experiments run (10–200
# cases, most of them exact ties) a t interval's normal approximation does not hold: measured on
# tied scores it covered 60 % at N = 10 (docs/CLAIM_STATISTICS.md §12). The intervals below lean on
# nothing but that bound: the hedged-capital betting confidence sets of Waudby-Smith & Ramdas
# (JRSS-B 86(1), 2024). For a candidate mean m of x = (d + 1)/2 ∈ [0, 1], a gambler bets on
# "the mean is above m" with capital K⁺_t(m) = Π_{i≤t} (1 + λ_i(m)(x_i − m)) and on "below m"
# with K⁻_t(m) = Π (1 − λ_i(m)(x_i − m)); each is a non-negative martingale when the mean is m,
# so by Ville's inequality it reaches 1/a with probability at most a, at any n and any stopping
# time. The set of m where neither side reached 2/α is a (1 − α) confidence set at every n at
# once; tuned to one n it is a confidence interval, and tuned to the n a condition expects it
# is the confidence sequence of a sequential run.

BETTING_TRUNCATION = 0.9   # a bet never risks more than 90 % of the capital (WSR's c)
CLT_MIN_UNITS = 30         # effective units from which the t (or CR2) interval is used
_BISECT = 48               # halvings of [0, 1]: limits to 4e-15


def _bets(x: np.ndarray, log_inv_a: float, n_star: float | None) -> np.ndarray:
    """The predictable plug-in bets of WSR 2024 (§3.1, eq. 26/27): λ_t = √(2 log(1/a) /
    (σ̂²_{t−1} · n*)), with σ̂² and μ̂ regularised by one pseudo-observation (mean ½, variance
    ¼) so the first bets are small. They use only what came before t, which is what keeps
    the capital a martingale; n* is the n the bound is tuned to (t·log(1 + t) when None: a
    sequence with no horizon). x may carry leading axes (one row per sequence)."""
    n = x.shape[-1]
    t = np.arange(1, n + 1, dtype=float)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1.0)
    s2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1.0)
    prev = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), s2[..., :-1]], axis=-1)
    horizon = t * np.log1p(t) if n_star is None else float(n_star)
    return np.sqrt(2.0 * log_inv_a / (prev * horizon))


def _log_wealth(x: np.ndarray, lam: np.ndarray, m: np.ndarray, side: int, c: float) -> np.ndarray:
    """log K_t(m) for every t (cumulative), side +1 (betting the mean is above m) or −1
    (below). Each bet is truncated to c/m (c/(1 − m)), so no observation in [0, 1] can take
    more than a share c of the capital: every factor stays ≥ 1 − c > 0."""
    mm = np.asarray(m, dtype=float)[..., None]
    with np.errstate(divide="ignore"):
        cap = c / (mm if side > 0 else 1.0 - mm)
    f = 1.0 + side * np.minimum(lam, cap) * (x - mm)
    return np.cumsum(np.log(f), axis=-1)


def _betting_limit(x: np.ndarray, lam: np.ndarray, side: int, log_thr, c: float) -> np.ndarray:
    """The lower (side +1) or upper (−1) limit of {m : sup_{t≤n} K_t(m) < e^thr}: K⁺ falls as m
    rises and K⁻ rises, so the rejected means form one end of [0, 1] and a bisection finds
    the edge (returned on the safe side: the last mean still rejected, or 0/1). Taking the
    sup over every t ≤ n is the running intersection of the sequence, valid by Ville."""
    shape = x.shape[:-1]
    thr = np.broadcast_to(np.asarray(log_thr, dtype=float), shape)
    lo, hi = np.zeros(shape), np.ones(shape)
    if x.shape[-1] == 0:
        return lo if side > 0 else hi
    for _ in range(_BISECT):
        mid = (lo + hi) / 2.0
        rej = _log_wealth(x, lam, mid, side, c).max(axis=-1) >= thr
        if side > 0:
            lo, hi = np.where(rej, mid, lo), np.where(rej, hi, mid)
        else:
            lo, hi = np.where(rej, lo, mid), np.where(rej, mid, hi)
    return lo if side > 0 else hi


def _sup_log_wealth(x: np.ndarray, lam: np.ndarray, m: float, side: int, c: float) -> np.ndarray:
    if x.shape[-1] == 0:
        return np.zeros(x.shape[:-1])
    return np.maximum(_log_wealth(x, lam, np.full(x.shape[:-1], m), side, c).max(axis=-1), 0.0)


def _unit_x(d) -> np.ndarray:
    x = (np.asarray(d, dtype=float) + 1.0) / 2.0
    if not np.all(np.isfinite(x)) or np.any(x < -1e-12) or np.any(x > 1 + 1e-12):
        raise ValueError("differences must lie in [-1, 1] (differences of 0-1 scores or rates)")
    return np.clip(x, 0.0, 1.0)


@dataclass(frozen=True)
class BettingCI:
    n: int
    estimate: float | None      # mean(d)
    ci_low: float | None        # two-sided, valid at this n whatever the distribution in [−1, 1]
    ci_high: float | None
    p_value: float | None       # two-sided, H0: mean(d) = 0; p ≤ 1 − conf_level ⟺ 0 outside the CI
    conf_level: float
    n_star: float               # the n the bets were tuned to
    method: str = "betting (hedged capital, Waudby-Smith & Ramdas 2024)"


def betting_ci(d: Floats, conf_level: float = 0.95, n_star: float | None = None,
               c: float = BETTING_TRUNCATION) -> BettingCI:
    """Hedged-capital confidence interval for the mean of differences d ∈ [−1, 1], in the
    order given (`paired` fixes a seeded order first), tuned to n* = len(d) unless told.
    Nothing asymptotic: it holds at every n for any distribution on [−1, 1], and it never
    has zero width — ten tied pairs cannot rule out a difference, and it says so. Its
    p-value is 2/max(sup K⁺(0), sup K⁻(0)), so p ≤ α exactly when 0 is outside the interval."""
    alpha_ = _alpha(conf_level)
    x = _unit_x(d)
    n = x.size
    if n == 0:
        return BettingCI(0, None, None, None, None, conf_level, float(n_star or 0))
    ns = float(n_star if n_star is not None else n)
    lam = _bets(x, math.log(2.0 / alpha_), ns)
    thr = math.log(2.0 / alpha_)
    lo = float(_betting_limit(x, lam, +1, thr, c))
    hi = float(_betting_limit(x, lam, -1, thr, c))
    sup = max(float(_sup_log_wealth(x, lam, 0.5, +1, c)), float(_sup_log_wealth(x, lam, 0.5, -1, c)))
    p = min(1.0, 2.0 * math.exp(-sup))
    return BettingCI(n, float(np.mean(2.0 * x - 1.0)), 2.0 * lo - 1.0, 2.0 * hi - 1.0, p,
                     conf_level, ns)


@dataclass(frozen=True)
class BettingBound:
    n: int
    side: str                   # "lower" | "upper"
    alpha: float
    limit: float | None         # d's mean is above (lower) / below (upper) this, at level α
    null: float | None          # the mean tested
    p_value: float | None       # one-sided, H0: the mean is at or beyond `null` on the wrong side
    n_star: float


def betting_bound(d: Floats, *, alpha: float, side: str, null: float | None = None,
                  n_star: float | None = None, c: float = BETTING_TRUNCATION) -> BettingBound:
    """One-sided betting limit at level α (one capital process, 1/α): the non-inferiority
    bound. With `null` (e.g. −margin for a lower bound) its one-sided p-value 1/sup K(null):
    the limit clears `null` exactly when p ≤ α."""
    if side not in ("lower", "upper"):
        raise ValueError(f"side must be 'lower' or 'upper', got {side!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    x = _unit_x(d)
    n = x.size
    ns = float(n_star if n_star is not None else max(n, 1))
    if n == 0:
        return BettingBound(0, side, alpha, None, null, None if null is None else 1.0, ns)
    s = +1 if side == "lower" else -1
    lam = _bets(x, math.log(1.0 / alpha), ns)
    lim = 2.0 * float(_betting_limit(x, lam, s, math.log(1.0 / alpha), c)) - 1.0
    p = None
    if null is not None:
        m0 = min(max((null + 1.0) / 2.0, 0.0), 1.0)
        p = min(1.0, math.exp(-float(_sup_log_wealth(x, lam, m0, s, c))))
    return BettingBound(n, side, alpha, lim, null, p, ns)


def effective_units(d: Floats) -> float:
    """How many independent observations a mean's normal approximation can lean on:
    n / max(1, skewness², excess kurtosis). The t interval's two-sided error is of order
    (γ² + κ)/n (the Edgeworth expansion of the studentised mean), so this counts the units
    that carry the information: about the non-tied pairs when most pairs tie, about the
    rare events when a 0/1 outcome is rare, n for anything near normal. No spread → 0."""
    x = np.asarray(d, dtype=float)
    n = x.size
    if n < 2:
        return 0.0
    e = x - x.mean()
    m2 = float(np.mean(e * e))
    if m2 <= 1e-24:
        return 0.0
    g2 = float(np.mean(e ** 3)) ** 2 / m2 ** 3
    kurt = float(np.mean(e ** 4)) / (m2 * m2) - 3.0
    return n / max(1.0, g2, kurt)


@lru_cache(maxsize=64)
def min_n_noninferiority(margin: float, alpha: float = 0.05,
                         c: float = BETTING_TRUNCATION) -> int | None:
    """The fewest independent cases on which non-inferiority at `margin` can hold at all: the
    first n at which the one-sided betting bound of n differences all exactly 0 (B = A on
    every case, no loss sampled) clears −margin. A loss of m can sit as full losses on a
    share m of the cases, and until that many cases show none, nothing shows the loss is
    not there. None for a margin of 0 (never, at any n)."""
    if margin <= 0:
        return None
    if margin >= 1:
        return 1
    for n in range(1, 1_000_000):
        lim = betting_bound(np.zeros(n), alpha=alpha, side="lower", c=c).limit
        if lim is not None and lim > -margin:
            return n
    raise ValueError(f"margin {margin} too small")


# --------------------------------------------------------------------------- the public door

@dataclass(frozen=True)
class PairedResult:
    """abtest's paired inference on one metric (`paired`): what the report prints and the
    claim reads."""
    kind: str                   # "score" | "binary"
    n: int                      # pairs
    n_units: int                # independent units: groups, or the pairs themselves
    estimate: float | None      # mean(b − a) over the pairs
    ci_low: float | None        # two-sided (1 − α), clipped to [−1, 1]
    ci_high: float | None
    p_value: float | None       # two-sided, H0: no difference
    noninferior: bool | None    # None without a margin; the report's floors included
    method: str                 # how ci/p were computed
    notes: tuple[str, ...]
    alpha: float
    margin: float | None = None
    better: str = "higher"
    ni_limit: float | None = None    # one-sided (α) betting limit the decision reads: lower
    #                                  (better="higher", must be > −margin) or upper (< margin)
    ni_p_value: float | None = None  # one-sided, H0: B worse than A by the margin or more
    ni_method: str | None = None
    min_n: int | None = None         # the fewest independent cases the margin needs
    ni_units: float | None = None    # independent cases the floor counts (Kish's n²/Σn_g²)
    n_groups: int | None = None      # None when every unit is one pair
    effective_units: float | None = None  # `effective_units` of the units (the t/betting switch)
    sd_d: float | None = None
    d_z: float | None = None
    df: float | None = None          # of the t / CR2 interval when that is the method
    design_effect: float | None = None
    effective_n: float | None = None
    icc: float | None = None


PAIRED_T = "paired t"
CR2_T = "cluster-robust t (CR2, Bell–McCaffrey df)"
BETTING = "betting (hedged capital, Waudby-Smith & Ramdas 2024)"
ORDER_SEED = 20240131     # the fixed order in which `paired` bets on the units


def _units(d: np.ndarray, groups) -> tuple[np.ndarray, list | None, np.ndarray | None]:
    """(one difference per independent unit, labels, sizes): the pairs themselves, or the
    mean of each group's pairs when some group holds two or more."""
    if groups is None:
        return d, None, None
    inv, sizes = _group_index(groups, d.size)
    if sizes.size == d.size:
        return d, None, None
    return np.bincount(inv, weights=d, minlength=sizes.size) / sizes, list(groups), sizes


def _ordered(u: np.ndarray) -> np.ndarray:
    """The units in a fixed pseudo-random order: a bet only sees what came before it, and a
    fixture sorted by topic or difficulty must not order the bets."""
    return u[np.random.default_rng(ORDER_SEED).permutation(u.size)]


def paired(a: Floats, b: Floats, *, kind: str = "score", groups: Sequence | None = None,
           margin: float | None = None, better: str = "higher",
           alpha: float = 0.05) -> PairedResult:
    """abtest's inference on paired measurements of A and B, as the report uses it.

    kind="score": a, b in [0, 1]; the interval and p-value are the t's (CR2 with groups)
    when the units carry at least CLT_MIN_UNITS effective units (`effective_units`) and the
    betting interval otherwise (few pairs, mostly ties, few groups) — docs/CLAIM_STATISTICS.md §12
    shows by simulation that each is used only where it holds its level. kind="binary":
    a, b are 0/1 (True = the event, e.g. a refusal); Tango's interval and the mid-p McNemar
    test (Rao–Scott Tango and Durkalski's McNemar with groups). With a margin, the
    non-inferiority decision is always the one-sided betting bound on the units (lower
    > −margin when better="higher", upper < margin when "lower"), on at least `min_n`
    independent cases (Kish's count with groups) and, with groups, MIN_GROUPS groups."""

    if kind not in ("score", "binary"):
        raise ValueError(f"kind must be 'score' or 'binary', got {kind!r}")
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    if margin is not None and not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1) on the metric's scale, got {margin}")
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = _diffs(xa, xb)
    if kind == "binary" and not np.all(np.isin(np.concatenate([xa, xb]), (0.0, 1.0))):
        raise ValueError("binary outcomes must be 0/1 (or False/True)")
    if kind == "score" and (np.any(xa < 0) or np.any(xa > 1) or np.any(xb < 0) or np.any(xb > 1)):
        raise ValueError("scores must lie in [0, 1]")
    n = d.size
    u, labels, sizes = _units(d, groups)
    g = None if sizes is None else int(sizes.size)
    notes: list[str] = []
    est = float(d.mean()) if n else None
    common: dict[str, Any] = dict(kind=kind, n=n, n_units=int(u.size), estimate=est, alpha=alpha, margin=margin,
                  better=better, n_groups=g)
    if n == 0:
        return PairedResult(ci_low=None, ci_high=None, p_value=None,
                            noninferior=None if margin is None else False, method="none",
                            notes=("no pairs",), **common)
    ce = effective_units(u)
    extra: dict[str, Any] = {"effective_units": ce}
    if n >= 2:
        sd = float(d.std(ddof=1))
        extra.update(sd_d=sd, d_z=(est / sd) if sd > 0 else None)  # type: ignore[operator]
    lo = hi = p = None
    if kind == "binary":
        lo, hi, p, method, bnote, bextra = _binary_ci(xa, xb, labels, sizes, alpha)
        extra.update(bextra)
        if bnote:
            notes.append(bnote)
    elif ce >= CLT_MIN_UNITS:
        if labels is None:
            t = paired_t(xa, xb, conf_level=1 - alpha, limits=(-1.0, 1.0))
            lo, hi, p, method = t.ci_low, t.ci_high, t.p_value, PAIRED_T
            extra["df"] = t.df
        else:
            ct = clustered_paired_t(xa, xb, labels, conf_level=1 - alpha, limits=(-1.0, 1.0))
            lo, hi, p, method = ct.ci_low, ct.ci_high, ct.p_value, CR2_T
            extra.update(df=ct.df, design_effect=ct.design_effect, effective_n=ct.effective_n,
                         icc=ct.icc)
    else:
        bc = betting_ci(_ordered(u), conf_level=1 - alpha)
        lo, hi, p = bc.ci_low, bc.ci_high, bc.p_value
        method = BETTING + (f" on the {g} group means" if g is not None else "")
        notes.append(f"{ce:.1f} effective units (fewer than {CLT_MIN_UNITS}: mostly ties, few "
                     "pairs or few groups), so the interval is the betting one, valid at any N")
        if labels is not None:
            ct = clustered_paired_t(xa, xb, labels, conf_level=1 - alpha)
            extra.update(design_effect=ct.design_effect, effective_n=ct.effective_n, icc=ct.icc)
    if g is not None and g < MIN_GROUPS:
        notes.append(f"{g} groups: a claim needs at least {MIN_GROUPS}")
    ni: dict = {}
    noninferior = None
    if margin is not None:
        ni, noninferior = _noninferiority(u, n, sizes, g, margin, better, alpha, MIN_GROUPS,
                                          notes)
    return PairedResult(ci_low=lo, ci_high=hi, p_value=p, noninferior=noninferior,
                        method=method, notes=tuple(notes), **common, **ni, **extra)


def _binary_ci(xa: np.ndarray, xb: np.ndarray, labels, sizes, alpha: float):
    """Tango's interval and the mid-p McNemar test on the paired 2×2 (B the first condition,
    so the estimate is p_B − p_A); with groups Durkalski's McNemar and Tango on the Rao–Scott
    effective table, its DEFF Durkalski's ratio (at least 1), or without a discordant pair
    the worst case Σn_g²/n."""
    ia, ib = xa.astype(bool), xb.astype(bool)
    n11 = int(np.sum(ia & ib))
    b_only = int(np.sum(ib & ~ia))
    a_only = int(np.sum(ia & ~ib))
    n00 = int(ia.size) - n11 - b_only - a_only
    note = "no discordant pairs" if a_only + b_only == 0 else None
    extra: dict = {}
    if labels is None:
        m = mcnemar(a_only, b_only, method="midp")
        ci = tango_ci(n11, b_only, a_only, n00, conf_level=1 - alpha)
        return ci.ci_low, ci.ci_high, m.p_value, "Tango score interval; mid-p McNemar", note, extra
    inv, sz = _group_index(labels, ia.size)
    bg = np.bincount(inv, weights=(ib & ~ia).astype(float), minlength=sz.size).astype(int)
    cg = np.bincount(inv, weights=(ia & ~ib).astype(float), minlength=sz.size).astype(int)
    dm = clustered_mcnemar(bg.tolist(), cg.tolist())
    n = ia.size
    deff = max(1.0, dm.design_effect) if dm.design_effect is not None else \
        float(np.sum(sz.astype(float) ** 2)) / n
    ci = rao_scott_tango_ci(n11, b_only, a_only, n00, deff, conf_level=1 - alpha)
    extra.update(design_effect=dm.design_effect, effective_n=n / deff)
    return (ci.ci_low, ci.ci_high, dm.p_value,
            f"Tango on the Rao–Scott effective table (DEFF {deff:.2f}); Durkalski's McNemar",
            note, extra)


def _noninferiority(u: np.ndarray, n: int, sizes, g, margin: float, better: str, alpha: float,
                    min_groups: int, notes: list[str]) -> tuple[dict, bool]:
    """The one-sided betting bound on the units and the floors: `min_n` independent cases
    (Kish's n²/Σn_g² with groups, a data-free count: the floor is about losses not sampled)
    and, with groups, `min_groups` groups."""
    side = "lower" if better == "higher" else "upper"
    null = -margin if better == "higher" else margin
    bb = betting_bound(_ordered(u), alpha=alpha, side=side, null=null)
    assert bb.limit is not None
    clears = bb.limit > -margin if better == "higher" else bb.limit < margin
    min_n = min_n_noninferiority(margin, alpha)
    units = float(n) if sizes is None else kish_units(sizes)
    enough = min_n is not None and units >= min_n - 1e-9
    groups_ok = g is None or g >= min_groups
    if margin == 0:
        notes.append("a margin of 0 never shows non-inferiority")
    elif not enough:
        notes.append(f"non-inferiority at margin {margin} needs at least {min_n} independent "
                     f"cases; these are worth {units:.1f}")
    return ({"ni_limit": bb.limit, "ni_p_value": bb.p_value, "min_n": min_n, "ni_units": units,
             "ni_method": f"one-sided betting {side} limit at α = {alpha} on the "
                          + ("pairs" if g is None else f"{g} group means")},
            bool(clears and enough and groups_ok))


@dataclass(frozen=True)
class AnytimeBound:
    """One look of `anytime`: valid simultaneously with every other look."""
    n: int                      # units so far
    mean: float | None
    ci_low: float | None        # two-sided (1 − α) confidence sequence
    ci_high: float | None
    lower: float | None         # one-sided at α: the mean is above this
    upper: float | None         # one-sided at α: the mean is below this
    p_value: float | None       # always-valid two-sided p, H0: mean 0 (non-increasing in n)


def anytime(d: Floats, *, looks: Sequence[int], kind: str = "score",
            alpha: float = 0.05, n_star: float | None = None) -> list[AnytimeBound]:
    """Betting confidence sequences for the mean of per-unit differences d ∈ [−1, 1] (in the
    order the units were taken), read at each look: every interval, bound and p-value holds
    at all looks at once, whenever the run stops, for any distribution on [−1, 1] — rare
    events too, where a normal mixture with an estimated σ did not (docs/CLAIM_STATISTICS.md §11).
    The bets are tuned to n_star units (the condition's units in the whole fixture; default
    the last look): tightest there, valid everywhere. kind="binary" checks d ∈ {−1, 0, 1}."""
    if kind not in ("score", "binary"):
        raise ValueError(f"kind must be 'score' or 'binary', got {kind!r}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    dd = np.asarray(d, dtype=float)
    if kind == "binary" and not np.all(np.isin(dd, (-1.0, 0.0, 1.0))):
        raise ValueError("binary differences must be -1, 0 or 1")
    x = _unit_x(dd)
    ks = [int(k) for k in looks]
    if any(k < 0 or k > x.size for k in ks) or ks != sorted(ks):
        raise ValueError(f"looks must be increasing unit counts within 0..{x.size}")
    ns = float(n_star if n_star is not None else max(ks + [1]))
    c = BETTING_TRUNCATION
    lam2 = _bets(x, math.log(2.0 / alpha), ns)
    lam1 = _bets(x, math.log(1.0 / alpha), ns)
    out = []
    for k in ks:
        if k == 0:
            out.append(AnytimeBound(0, None, None, None, None, None, None))
            continue
        xs = np.stack([x[:k], x[:k]])
        lams = np.stack([lam2[:k], lam1[:k]])
        thr = np.array([math.log(2.0 / alpha), math.log(1.0 / alpha)])
        low = _betting_limit(xs, lams, +1, thr, c)
        high = _betting_limit(xs, lams, -1, thr, c)
        sup = max(float(_sup_log_wealth(x[:k], lam2[:k], 0.5, +1, c)),
                  float(_sup_log_wealth(x[:k], lam2[:k], 0.5, -1, c)))
        out.append(AnytimeBound(k, float(np.mean(dd[:k])), 2 * float(low[0]) - 1,
                                2 * float(high[0]) - 1, 2 * float(low[1]) - 1,
                                2 * float(high[1]) - 1, min(1.0, 2.0 * math.exp(-sup))))
    return out
