"""The one number formatter: what each kind of value prints as."""

from __future__ import annotations

import pytest

from abtest.core.fmt import interval, num, p_value, pct, signed


@pytest.mark.parametrize("x, want", [
    (None, "n/a"), (True, "yes"), (0, "0"), (0.5, "0.500"), (1 / 3, "0.333"),
    (0.0004, "4.0e-04"), (0.0, "0.000"), (float("nan"), "nan"), ("x<y", "x<y"),
])
def test_num(x, want):
    assert num(x) == want


def test_a_whole_number_figure_below_one_is_never_scientific():
    # latencies and token counts print with nd=0: 0.44 ms must not read "4.4e-01 ms" nor "0"
    assert num(0.44, 0) == "0.44" and num(0.004, 0) == "0.004" and num(440.4, 0) == "440"
    assert num(-0.5, 0, signed=True) == "-0.5"


def test_signed_p_and_level():
    assert signed(0.25) == "+0.250" and signed(-0.00001) == "-1.0e-05" and signed(3) == "+3"
    assert p_value(0.0004) == "0.0004" and p_value(0.04) == "0.040" and p_value(None) == "n/a"
    assert pct(0.95) == "95%" and pct(0.9) == "90%" and pct(0.975) == "97.5%"


@pytest.mark.parametrize("lo, hi, want", [
    (-0.1, 0.2, "[-0.100, 0.200]"), (0, 1, "[0, 1]"), (None, 0.2, "n/a"), (0.1, None, "n/a"),
    (float("nan"), 0.2, "n/a"), (0.1, float("inf"), "n/a"), (True, 0.2, "n/a"),
    ("0.1", 0.2, "n/a"),
])
def test_interval_needs_two_finite_ends(lo, hi, want):
    assert interval(lo, hi) == want
