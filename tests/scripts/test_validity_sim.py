"""A quick run of scripts/validity_sim.py: abtest's verdict is right when the truth is known.

Score level: the false-licence rate under no true difference stays within α (also when
cases are repeated or correlated in groups), the power under the issue's true effect stays
≥ 80 %, and selective refusal, soft refusal and the thin-evidence traps are never licensed.
End to end (capture → run → review → report → gate through the CLI against the loopback
fake provider): one experiment per scenario, each with its sound result — and each trap
checked to have actually fired, so a pass is never vacuous.
"""

from __future__ import annotations

import math

import pytest

import validity_sim as V
from abtest.core.models import Config

SC = {s.name: s for s in V.SCENARIOS}


def _score_rates(name: str, n: int, k: int, seed0: int) -> tuple[float, float]:
    cfg = Config()
    lic = sig = 0
    for i in range(k):
        r = V.score_experiment(SC[name], n, seed0 + i, cfg)
        lic += r["claim"]["licensed"]
        sig += V.significant_any(r["metrics"])
    return lic / k, sig / k


def test_score_level_null_keeps_the_false_licence_rate_within_alpha():
    k = 150
    lic, sig = _score_rates("null", 200, k, 1)
    allowance = V.ALPHA + 2.33 * math.sqrt(V.ALPHA * (1 - V.ALPHA) / k)
    assert lic <= V.ALPHA
    assert sig <= allowance


def test_score_level_true_effect_keeps_its_power():
    lic, sig = _score_rates("true_effect", 200, 30, 100)
    assert lic >= 0.8 and sig == 1.0


def test_score_level_selective_refusal_is_never_licensed():
    lic, sig = _score_rates("selective_refusal", 200, 30, 200)
    assert lic == 0.0 and sig == 1.0  # the refusals make B look better, significantly


def _score_row(name: str, k: int, seed0: int) -> V.Row:
    """k score-level experiments of a pinned-size scenario, tallied as the script does."""
    sc = SC[name]
    cfg = Config()
    pop = {"faith_effect": V.population_truth(sc, n=20_000)["faith_effect"]}
    row = V.Row(name, "score", sc.sizes[0])
    for i in range(k):
        row.add(sc, V.score_experiment(sc, sc.sizes[0], seed0 + i, cfg), pop)
    return row


@pytest.mark.parametrize("name", ["duplicates", "clustered"])
def test_score_level_grouped_nulls_keep_the_false_licence_rate_within_alpha(name):
    """Repeats and correlated groups under no true difference: with the group as the unit the
    licence and significance rates stay within α, where the iid inference on the same
    experiments was significant far more often (the issue's bug, kept visible)."""
    k = 60
    row = _score_row(name, k, 3)
    ok, why = V.verdict(SC[name], row)
    assert ok, why
    assert row.licensed == 0
    allowance = V.ALPHA + 2.33 * math.sqrt(V.ALPHA * (1 - V.ALPHA) / k)
    assert row.significant / k <= allowance
    assert row.old_n == k and row.old_significant / k > allowance
    # the grouped intervals are the wider ones, by about √DEFF
    assert V._median(row.width_ratio) < 0.7 and V._median(row.deff) > 2


def test_score_level_grouped_inference_still_licenses_a_true_effect():
    row = _score_row("duplicates_effect", 20, 500)
    assert row.licensed / row.experiments >= 0.6


@pytest.mark.parametrize("name", ["few_references", "claim_cap", "pairwise_rule"])
def test_score_level_traps_on_thin_evidence_are_never_licensed(name):
    row = _score_row(name, 12, 900)
    ok, why = V.verdict(SC[name], row)     # trap_ok: never licensed, and for its own reason
    assert ok, why
    assert row.licensed == 0
    if name == "few_references":           # the floor is what stops it: without it, licences
        assert row.old_licensed > 0


def test_score_level_soft_refusal_is_never_licensed_and_the_old_rule_was_fooled():
    """Issue 43: B softly declines most answerable cases it would get wrong ("The documents do
    not say …", then a true, cited side fact). Counted as abstentions, its answerable refusal
    rate rises and the claim is withheld for that reason in every experiment; the same
    verdicts with the soft refusals counted as answered (the rule before issue 43) read B's
    refusals as A's and license the claim."""
    assert "soft_refusal" in SC and SC["soft_refusal"].score_level and SC["soft_refusal"].e2e
    row = _score_row("soft_refusal", 20, 2_000)
    ok, why = V.verdict(SC["soft_refusal"], row)   # never licensed, for the refusal reason
    assert ok, why
    assert row.licensed == 0
    assert _mean(row.rep["rb"]) == pytest.approx(_mean(row.tru["rb"]))
    assert _mean(row.tru["rb"]) > 0.15
    assert row.old_n == 20 and row.old_ni == 20 and row.old_licensed > 0
    assert _mean(row.old_rb) < 0.1


def _mean(xs):
    return sum(xs) / len(xs)


@pytest.fixture(scope="module")
def server():
    import os

    from fake_llm_server import FakeLLMServer

    os.environ["SIM_KEY"] = "sk-sim-not-a-secret"
    with FakeLLMServer(max_seconds=None, keep_alive=True) as srv:
        yield srv


def _e2e(name, server, tmp_path, n=140, seed=7000):
    """One end-to-end experiment through the CLI: over HTTP against the loopback `server`,
    or, with server None, in this process (the world answers through litellm's
    custom-provider path: the same code without the wire, 6 s instead of 9–12 s). One
    scenario goes over HTTP here; scripts/validity_sim.py runs every one over HTTP."""
    # 140 cases: 35 unanswerable, enough for the 0.10 abstention margin's floor (33)
    sc = SC[name]
    pop = V.population_truth(sc, n=20_000)
    r = V.e2e_experiment(sc, n, seed, server, tmp_path)
    row = V.Row(name, "e2e", n)
    row.add(sc, r, pop)
    ok, why = V.verdict(sc, row)
    assert ok, why
    return r, pop


def test_e2e_null_is_not_licensed(tmp_path):
    r, _ = _e2e("null", None, tmp_path)
    assert not r["claim"]["licensed"]


def test_e2e_true_effect_is_licensed_with_the_true_rates(server, tmp_path):
    # the one scenario over HTTP: the wire path (litellm's OpenAI client, the fake server)
    r, pop = _e2e("true_effect", server, tmp_path)
    assert r["claim"]["licensed"], r["claim"]["reasons"]
    f, t = r["metrics"]["faithfulness"], r["truth"]
    assert f["a"] == pytest.approx(t["faith_a"]) and f["b"] == pytest.approx(t["faith_b"])
    assert f["ci_low"] <= pop["faith_effect"] <= f["ci_high"]
    assert r["claim"]["sentence"].startswith("Given these contexts, variant B was more faithful")


def test_e2e_selective_refusal_is_never_licensed(tmp_path):
    r, _ = _e2e("selective_refusal", None, tmp_path)
    m = r["metrics"]
    # the trap fired: B looks more faithful, significantly, because it refused its worst cases
    assert m["faithfulness"]["direction"] == "B"
    reasons = " ".join(r["claim"]["reasons"])
    assert "refusals on answerable cases rose" in reasons
    assert "does not survive the answerable pairs only one variant left unscored" in reasons
    answerable = {row["case_id"]: row["answerable"] for row in r["report"]["per_case"]}
    b_only = m["faithfulness"]["dropped"]["b_only"]
    assert m["faithfulness"]["drop_bound"]["imputed_b"] == sum(answerable[c] for c in b_only) > 0


def test_e2e_soft_refusal_is_an_abstention_and_never_licensed(tmp_path):
    r, _ = _e2e("soft_refusal", None, tmp_path)
    m, t, rep = r["metrics"], r["truth"], r["report"]
    # the trap fired: each soft refusal's side fact was extracted and verified (it scores
    # 1.0, so B looks more faithful), and each is an abstention all the same
    soft = [row for row in rep["per_case"] if row["answer_b"].startswith("The documents do not")]
    assert len(soft) >= 10
    assert all(row["answerable"] and row["abstained_b"] and row["faithfulness_b"] == 1.0
               for row in soft)
    assert m["faithfulness"]["b"] == pytest.approx(t["faith_b"]) and t["faith_b"] > t["faith_a"]
    # so B's answerable refusals rose (the truth, as reported), and the claim says why
    assert m["abstention"]["answerable"]["b"] == pytest.approx(t["ref_b"]) and t["ref_b"] > 0.15
    assert rep["judge_validation"]["abstention"]["validated"]   # humans call them abstentions
    assert not r["claim"]["licensed"]
    assert "refusals on answerable cases rose" in " ".join(r["claim"]["reasons"])


def test_e2e_hedged_hallucination_is_scored_an_incident_and_fails_the_gate(tmp_path):
    r, _ = _e2e("hedged_hallucination", None, tmp_path)
    t = r["truth"]
    assert r["metrics"]["faithfulness"]["b"] == pytest.approx(t["faith_b"])
    assert t["faith_b"] < 0.9
    inc_b = [i for i in r["report"]["incidents"] if i["variant"] == "B"]
    assert len(inc_b) == t["incidents_b"] > 0
    assert all(i["answer"].startswith(V.HEDGE) for i in inc_b)
    assert r["gate"] == 1 and r["report"]["gate"]["incidents_b"] == len(inc_b)
    # B never refuses answerable questions here; the hedge is not taken for a refusal
    assert r["metrics"]["abstention"]["answerable"]["b"] == 0.0


def test_e2e_noisy_claim_verifier_fails_validation(tmp_path):
    r, _ = _e2e("noisy_verifier", None, tmp_path)
    val = r["report"]["judge_validation"]
    assert not val["faithfulness"]["validated"] and val["faithfulness"]["n_labels"] >= 30
    assert val["coverage"]["validated"] and val["abstention"]["validated"]
    assert not r["claim"]["licensed"]
    assert any(x.startswith("faithfulness judge not validated") for x in r["claim"]["reasons"])


def test_e2e_length_biased_judge_never_a_clean_b_win(tmp_path):
    r, _ = _e2e("length_biased_judge", None, tmp_path, n=200)
    pw = r["metrics"]["pairwise"]
    # the trap fired: B "won" pairwise, significantly, only by being longer
    assert pw["direction"] == "B" and pw["a_wins"] == 0 < pw["b_wins"]
    lb = pw["length_bias"]
    assert lb["separable"] is False and lb["b_shorter"] == 0
    assert lb["caveat"].startswith("B's preference cannot be separated from answer length")


def test_e2e_position_biased_judge_diagnostics_match_the_truth(tmp_path):
    r, pop = _e2e("position_biased_judge", None, tmp_path)
    pw = r["metrics"]["pairwise"]
    n = pw["n"]
    for key, got in (("position_consistency", pw["position_consistency"]["estimate"]),
                     ("first_position_win_rate", pw["first_position_win_rate"])):
        assert abs(got - pop[key]) <= 3 * math.sqrt(pop[key] * (1 - pop[key]) / n), key
    assert pw["position_consistency"]["biased_to_first"] > 0


def test_sequential_runs_keep_alpha_stop_early_and_never_license_a_trap(monkeypatch):
    """validity_sim --sequential, small: monitored at every look of 20 groups, no null run
    is licensed, the issue's true effect at N = 400 is licensed using about a third of the
    fixture, and a selective refuser is stopped unlicensed (docs/CLAIM_STATISTICS.md §11)."""
    import validity_sim_sequential as S
    from abtest import stats

    # MDE figures are report text, never a condition of the claim (as the script skips them)
    monkeypatch.setattr(stats, "mde_paired_t", lambda n, sd_d=None, alpha=0.05, power=0.8,
                        alternative="two-sided": stats.MDEResult(n, float("nan"), None, sd_d,
                                                                 alpha, power))
    cfg = Config()
    null = [S.experiment(SC["null"], 200, 70_000 + i, cfg, 20, fixed=False, peek=False)
            for i in range(60)]
    assert sum(r["licensed"] for r in null) == 0
    alt = [S.experiment(SC["true_effect"], 400, 80_000 + i, cfg, 20, fixed=False, peek=False)
           for i in range(30)]
    assert sum(r["licensed"] for r in alt) >= 27
    assert sorted(r["fraction"] for r in alt)[15] <= 0.5
    trap = [S.experiment(SC["selective_refusal"], 200, 90_000 + i, cfg, 20, fixed=False,
                         peek=False) for i in range(20)]
    assert not any(r["licensed"] for r in trap)
    assert sum(r["stop"] == "decision" for r in trap) >= 18   # stopped: refusals rose
