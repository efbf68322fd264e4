"""The small-N simulation (scripts/validity_sim_small.py, `validity_sim.py --small-n`) in
miniature: its worlds have the truth it says, and abtest never prints a zero-width interval
where the t did."""

from __future__ import annotations

import numpy as np
import pytest

import validity_sim_small as VS


@pytest.mark.parametrize("p1,target", [(0.7, 0.05), (0.9, 0.03), (0.9, -0.05)])
def test_the_worlds_truth_is_what_a_large_draw_measures(p1, target):
    shift = VS.shift_for(p1, target)
    a, b = VS.draw_scores(np.random.default_rng(1), 1, 400_000, p1, shift)
    d = (b - a).ravel()
    assert abs(d.mean() - target) < 4 * d.std() / np.sqrt(d.size)
    assert abs(a.mean() - VS.mean_score(p1, 0.0)) < 0.002
    assert abs(np.mean(a == 1.0) - p1) < 0.003       # 70 % / 90 % of A's scores exactly 1.0


def test_tied_pairs_never_give_abtest_a_zero_width_interval():
    cells = VS.score_cells(15, seed=3)
    assert all(c.counts.get("zero_width", (0, 0))[0] == 0 for c in cells)
    tied10 = next(c for c in cells if (c.family, c.truth, c.n) == ("tied", "gain", 10))
    assert tied10.counts["t_zero_width"][0] > 0       # the t's "CI 0.000 to 0.000"
    assert VS.print_scores(cells) in (True, False)


def test_a_quick_run_forgives_noise_and_the_full_run_holds_the_bars_exactly(capsys):
    """12 NI errors in 200 (0.060 ± 0.017) is within 2 SE of the 0.055 bar: a smoke run
    must not fail on it; 120 in 2,000 (0.060 ± 0.005) is a real miss; 20 in 200 (0.100,
    2.6 SE past the bar) misses even a quick run."""
    def cell(k, t):
        c = VS.Cell("refusals", "margin", 150, reps=t)
        c.counts["ni"] = (k, t)
        return c

    row = lambda c: f"{c.counts['ni'][0]}/{c.reps}"   # noqa: E731
    assert VS._table("| cell | met |", [cell(12, 200)], row)
    assert VS._table("| cell | met |", [cell(11, 200)], row)
    assert not VS._table("| cell | met |", [cell(120, 2000)], row)
    assert not VS._table("| cell | met |", [cell(20, 200)], row)
    out = capsys.readouterr().out.splitlines()
    assert [line.rsplit("|", 2)[1].strip() for line in out if line.startswith("| 1") or
            line.startswith("| 2")] == ["yes, within 2 SE", "yes", "**NO**", "**NO**"]
