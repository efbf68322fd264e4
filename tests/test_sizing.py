"""How many cases a claim needs (abtest.sizing), checked against the Tango bound and the Holm
step it must pass, and said by the dry run."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from abtest.shapes import Config
from sample_reports import CFG


@pytest.mark.parametrize("margin", [0.02, 0.05, 0.10])
def test_smallest_n_is_where_binary_noninferiority_first_can_hold(margin):
    """At the stated N, zero refusals on both sides shows non-inferiority; one case fewer
    never can (checked with the Tango interval itself)."""
    from abtest import stats as S
    from abtest.reporting.metrics import binary
    from abtest.sizing import min_n_binary_noninferiority

    n = min_n_binary_noninferiority(margin, 0.05)
    for size, holds in ((n, True), (n - 1, False)):
        ci = S.paired_proportion_diff_ci(0, 0, 0, size, conf_level=0.90)
        assert (ci.ci_high < margin) is holds
        ids = [str(i) for i in range(size)]
        never = {i: False for i in ids}
        assert binary("x", never, never, ids, 0.05, margin=margin)["noninferiority"]["holds"] is holds
    if margin == 0.02:
        assert n == 133  # the figure the claim-soundness issue measured on main


def test_dry_run_states_the_smallest_fixture_that_can_license(project):
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml", "--dry-run"])
    assert r.exit_code == 0, r.stderr
    mn = json.loads(r.stdout)["claim_minimum_n"]
    assert mn["fixture"] == {"answerable": 3, "unanswerable": 1} and mn["can_license"] is False
    assert (mn["answerable"], mn["unanswerable"]) == (52, 25)
    assert "needs at least 52 answerable and 25 unanswerable cases" in mn["text"]


@pytest.mark.parametrize("n_ans,n_un,ok", [(52, 25, True), (51, 25, False), (52, 24, False),
                                           (400, 0, False)])
def test_minimum_n_decides_can_license(n_ans, n_un, ok):
    from abtest.sizing import minimum_n

    assert minimum_n(CFG, n_ans, n_un)["can_license"] is ok


@pytest.mark.parametrize("margins", [{"abstention_answerable": 0.0},
                                     {"abstention_unanswerable": 0.0}])
def test_a_zero_refusal_margin_has_no_minimum_fixture(margins):
    """At margin 0 a B that refuses as often as A never holds, so no fixture size is enough."""
    from abtest.sizing import minimum_n, minimum_n_text

    mn = minimum_n(Config(margins=margins), 5000, 5000)
    assert mn["can_license"] is False
    assert "cannot license a claim" in minimum_n_text(mn)
    assert "no fixture can license" in minimum_n_text(minimum_n(Config(margins=margins)))


@pytest.mark.parametrize("judges,n", [(None, 8), (["faithfulness", "coverage", "abstention"], 8),
                                      (["faithfulness"], 6)])
def test_minimum_n_for_faithfulness_follows_the_holm_family(judges, n):
    """n equal gains give p = 2·0.5ⁿ, which must pass α/m (m = the family size)."""
    from abtest.sizing import minimum_n

    cfg = Config(margins={"abstention_answerable": 0.9}, **({"judges": judges} if judges else {}))
    m = {None: 5, 3: 4, 1: 1}[None if judges is None else len(judges)]  # abstention counts twice
    want = next(k for k in range(2, 100) if 2 * 0.5 ** k <= 0.05 / m)
    assert minimum_n(cfg)["answerable"] == want == n


def test_smallest_faithfulness_n_passes_holm_at_equality():
    from abtest.sizing import minimum_n

    # alpha = 0.0625 = 2 · 0.5⁵: five equal gains reach exactly alpha, and Holm rejects p ≤ alpha
    cfg = Config(alpha=0.0625, judges=["faithfulness"], margins={"abstention_answerable": 0.9})
    assert minimum_n(cfg)["answerable"] == 5


def test_bound_and_margins_at_their_exact_boundaries():
    from scipy import stats as sst

    from abtest.reporting.metrics import (drop_bound, min_n_binary_noninferiority,
                                       noninferiority_continuous, pairwise)

    a = {"1": 0.2, "2": 0.4, "3": 0.1, "4": 0.3}
    b = {"1": 0.9, "2": 0.5, "3": 0.6, "4": 0.35}
    ids = list(a)
    p = sst.ttest_rel([b[i] for i in ids], [a[i] for i in ids]).pvalue
    # the bound holds when its p is exactly alpha (reject when p <= alpha)
    assert drop_bound(a, b, ids, {}, p)["holds"] is True
    assert drop_bound(a, b, ids, {}, p * 0.999999)["holds"] is False
    # two pairs are enough for a non-inferiority test
    two = noninferiority_continuous({"1": 0.5, "2": 0.5}, {"1": 0.5, "2": 0.5}, ["1", "2"], 0.05, 0.05)
    assert "note" not in two or two["note"] != "fewer than 2 pairs"
    assert two["p_value"] == pytest.approx(0.25)
    assert min_n_binary_noninferiority(0.0, 0.05) is None
    # first-position wins counted per order: A-first says A, B-first says B
    m, _ = pairwise(["1", "2", "3"], ["A", "B", "A"], ["B", "B", "tie"], [1] * 3, [1] * 3, 0.05)
    assert m["first_position_win_rate"] == pytest.approx(4 / 5)  # A, A; B, B of 5 decided
