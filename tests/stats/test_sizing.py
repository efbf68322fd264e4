"""How many cases a claim needs (abtest.stats.sizing), checked against the betting bound and the Holm
step it must pass, and said by the dry run."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from abtest.core.models import Config
from support.sample_reports import CFG


@pytest.mark.parametrize("margin", [0.02, 0.05, 0.10])
def test_smallest_n_is_where_binary_noninferiority_first_can_hold(margin):
    """At the stated N, zero refusals on both sides shows non-inferiority; one case fewer
    never can (the report's own decision; the floor itself is checked against the closed
    form of tied pairs in test_stats_betting.py)."""
    from abtest.reporting.metrics import binary
    from abtest.stats.sizing import min_n_binary_noninferiority

    n = min_n_binary_noninferiority(margin, 0.05)
    for size, holds in ((n, True), (n - 1, False)):
        ids = [str(i) for i in range(size)]
        never = {i: False for i in ids}
        ni = binary("x", never, never, ids, 0.05, margin=margin)["noninferiority"]
        assert (ni["upper"] < margin) is holds and ni["holds"] is holds
    # Tango's limit with no discordant pair reached the margin at 52 (0.05) and 25 (0.10),
    # where B refusing at A's rate plus the margin went unseen in 7 % of runs
    assert n == {0.02: 173, 0.05: 68, 0.10: 33}[margin]


def test_dry_run_states_the_smallest_fixture_that_can_license(project):
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml", "--dry-run"])
    assert r.exit_code == 0, r.stderr
    mn = json.loads(r.stdout)["claim_minimum_n"]
    assert mn["fixture"] == {"answerable": 3, "unanswerable": 1} and mn["can_license"] is False
    assert (mn["answerable"], mn["unanswerable"]) == (68, 33)
    assert "needs at least 68 answerable and 33 unanswerable cases" in mn["text"]


@pytest.mark.parametrize("n_ans,n_un,ok", [(68, 33, True), (67, 33, False), (68, 32, False),
                                           (400, 0, False)])
def test_minimum_n_decides_can_license(n_ans, n_un, ok):
    from abtest.stats.sizing import minimum_n

    assert minimum_n(CFG, n_ans, n_un)["can_license"] is ok


@pytest.mark.parametrize("margins", [{"abstention_answerable": 0.0},
                                     {"abstention_unanswerable": 0.0}])
def test_a_zero_refusal_margin_has_no_minimum_fixture(margins):
    """At margin 0 a B that refuses as often as A never holds, so no fixture size is enough."""
    from abtest.stats.sizing import minimum_n, minimum_n_text

    mn = minimum_n(Config(margins=margins), 5000, 5000)
    assert mn["can_license"] is False
    assert "cannot license a claim" in minimum_n_text(mn)
    assert "no fixture can license" in minimum_n_text(minimum_n(Config(margins=margins)))


def _all_gains_p(n: int, alpha: float) -> float:
    """The betting p-value of n gains of 1 (B 1, A 0), from the definition: x = 1 every time,
    μ̂_t = (½ + t)/(t + 1), σ̂²_t = (¼ + Σ_{i≤t}(1 − μ̂_i)²)/(t + 1), λ_t = √(2 log(2/α) /
    (σ̂²_{t−1} n)); K⁺_t(½) = Π(1 + min(λ_i, 0.9/½)·½) only grows, K⁻ only falls, so
    p = 2/K⁺_n(½)."""
    import math

    cap, ss, s2 = 1.0, 0.0, 0.25
    for t in range(1, n + 1):
        lam = math.sqrt(2 * math.log(2 / alpha) / (s2 * n))
        cap *= 1 + min(lam, 0.9 / 0.5) * 0.5
        ss += (1 - (0.5 + t) / (t + 1)) ** 2
        s2 = (0.25 + ss) / (t + 1)
    return min(1.0, 2 / cap)


@pytest.mark.parametrize("judges", [None, ["faithfulness", "coverage", "abstention"],
                                    ["faithfulness"]])
def test_minimum_n_for_faithfulness_follows_the_holm_family(judges):
    """n gains of 1 must give a p-value that passes α/m (m = the family size)."""
    from abtest.stats.sizing import minimum_n

    cfg = Config(margins={"abstention_answerable": 0.9}, **({"judges": judges} if judges else {}))
    m = {None: 5, 3: 4, 1: 1}[None if judges is None else len(judges)]  # abstention counts twice
    want = next(k for k in range(2, 100) if _all_gains_p(k, 0.05) <= 0.05 / m)
    assert minimum_n(cfg)["answerable"] == want
    assert want == {5: 9, 4: 8, 1: 6}[m]


def test_smallest_faithfulness_n_passes_holm_at_equality():
    from abtest.stats.sizing import minimum_n

    cfg = Config(alpha=0.0625, judges=["faithfulness"], margins={"abstention_answerable": 0.9})
    want = next(k for k in range(2, 100) if _all_gains_p(k, 0.0625) <= 0.0625)
    assert minimum_n(cfg)["answerable"] == want


def test_bound_and_margins_at_their_exact_boundaries():
    from scipy import stats as sst

    from abtest.reporting.metrics import drop_bound, noninferiority_continuous, pairwise
    from abtest.stats.sizing import min_n_binary_noninferiority

    from abtest import stats as S

    # 60 pairs of spread-out gains: the t's interval (enough effective units), whose p does
    # not depend on alpha, so alpha can be set to it exactly
    ids = [str(i) for i in range(60)]
    a = {i: 0.3 + 0.005 * k for k, i in enumerate(ids)}
    b = {i: a[i] + 0.02 + 0.3 * ((k * 37) % 60 - 29.5) / 60 for k, i in enumerate(ids)}
    d = [b[i] - a[i] for i in ids]
    assert S.effective_units(d) >= S.CLT_MIN_UNITS
    p = sst.ttest_rel([b[i] for i in ids], [a[i] for i in ids]).pvalue
    # the bound holds when its p is exactly alpha (reject when p <= alpha)
    assert drop_bound(a, b, ids, {}, p)["holds"] is True
    assert drop_bound(a, b, ids, {}, p * 0.999999)["holds"] is False
    # two pairs are enough for a non-inferiority bound (never for the decision: the floor)
    two = noninferiority_continuous({"1": 0.5, "2": 0.5}, {"1": 0.5, "2": 0.5}, ["1", "2"], 0.05, 0.05)
    assert "note" not in two or two["note"] != "fewer than 2 pairs"
    assert two["p_value"] == S.paired([0.5, 0.5], [0.5, 0.5], margin=0.05).ni_p_value
    assert two["holds"] is False
    assert min_n_binary_noninferiority(0.0, 0.05) is None
    # first-position wins counted per order: A-first says A, B-first says B
    m, _ = pairwise(["1", "2", "3"], ["A", "B", "A"], ["B", "B", "tie"], [1] * 3, [1] * 3, 0.05)
    assert m["first_position_win_rate"] == pytest.approx(4 / 5)  # A, A; B, B of 5 decided
