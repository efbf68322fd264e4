"""The verdict of real runs (the CLI, the store, the scripted provider) against values
computed independently with scipy and statsmodels from answers whose truth the test sets.

World: 16 answerable and 8 unanswerable cases. A hallucinates on answerable cases 0, 4, 8
and 12 and on odd unanswerable ones, refusing the even ones; B answers every answerable
case from the context except case 5, which it refuses, and refuses every unanswerable one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from scipy import stats as st

from support import betting_reference as ref
from statsmodels.stats.multitest import multipletests

from abtest.cli import cli
from abtest.core.models import Case, Chunk
from support.fakes import Brain, install, make_project

N_ANS, N_UN = 16, 8
ALPHA = 0.05


def _cases() -> list[Case]:
    base = dict(corpus_version="v1", retriever="test")
    out = [Case(id=f"a{i:02d}", question=f"What about fact {i}?", answerable=True,
                context=[Chunk(id=f"c{i}", text=f"Fact {i} is true.")],
                key_points=[f"fact {i} is true"], **base) for i in range(N_ANS)]
    out += [Case(id=f"u{j:02d}", question=f"What about missing {j}?", answerable=False,
                 context=[Chunk(id=f"x{j}", text=f"Something unrelated {j}.")], **base)
            for j in range(N_UN)]
    return out


def _answer(question: str, variant: str) -> str:
    n = int(question.rstrip("?").split()[-1])
    if "fact" in question:
        if variant == "A":
            return f"Fact {n} is false." if n % 4 == 0 else f"Fact {n} is true. [c{n}]"
        return "I don't know." if n == 5 else f"Fact {n} is true. [c{n}]"
    if variant == "A" and n % 2:
        return f"Missing {n} is blue."
    return "I don't know."


def _question(messages) -> str:
    q = messages[-1]["content"].split("<question>")[-1].split("</question>")[0].strip()
    return q


def _override(messages, req, lie: dict | None = None):
    """The world's generator and a coverage judge that checks the key point is stated;
    `lie` maps a question to B's answer instead."""
    name = ((req.get("response_format") or {}).get("json_schema") or {}).get("name")
    if name is None:
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        variant = "B" if "Answer only from the context" in system else "A"
        q = _question(messages) if variant == "B" else \
            messages[-1]["content"].split("Question:")[-1].strip()
        if variant == "B" and lie and q in lie:
            return lie[q]
        return _answer(q, variant)
    if name == "coverage":
        prompt = messages[-1]["content"]
        ans = prompt.split("<answer>")[1].split("</answer>")[0].lower()
        pts = prompt.split("<key_points>")[1].split("</key_points>")[0].strip().splitlines()
        return {"points": {p.split(". ", 1)[0]: p.split(". ", 1)[1] in ans for p in pts}}
    return None


@pytest.fixture
def world(tmp_path, monkeypatch):
    p = make_project(tmp_path, cases=_cases())
    monkeypatch.chdir(p)
    brain = install(Brain())
    brain.override = _override
    return brain


def _run() -> tuple[dict, int]:
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    run_id = r.stdout.strip().splitlines()[-1]
    rep = json.loads(CliRunner().invoke(cli, ["report", run_id, "--format", "json"]).stdout)
    gate = CliRunner().invoke(cli, ["gate", run_id])
    return rep, gate.exit_code


def _midp(b: int, c: int) -> float:
    """McNemar mid-p from the binomial, as docs/STATS_SPEC.md §4 writes it."""
    k, n = min(b, c), b + c
    return min(1.0, st.binomtest(k, n, 0.5).pvalue - st.binom.pmf(k, n, 0.5))


def test_every_family_member_matches_an_independent_computation(world):
    rep, _ = _run()
    m = rep["metrics"]
    ans = range(N_ANS)
    # faithfulness: good 1, hallucination 0, refusal unscored (pair dropped)
    fa = {i: 0.0 if i % 4 == 0 else 1.0 for i in ans}
    fb = {i: 1.0 for i in ans if i != 5}
    used = [i for i in ans if i in fb]  # unanswerable: B always refuses -> every pair dropped
    # 15 pairs, mostly ties: the betting interval (betting_reference: the paper's definition)
    t = ref.ci(ref.ordered([fb[i] - fa[i] for i in used]))
    # coverage: answerable only; a refusal covers nothing
    ca = [0.0 if i % 4 == 0 else 1.0 for i in ans]
    cb = [0.0 if i == 5 else 1.0 for i in ans]
    tc = ref.ci(ref.ordered([y - x for x, y in zip(ca, cb)]))
    # pairwise (the scripted judge prefers the citing answer): B wins 0 4 8 12, A wins 5
    p_pw = st.binomtest(4, 5, 0.5).pvalue
    p_ans = _midp(0, 1)             # answerable: B alone refuses case 5
    p_un = _midp(0, N_UN // 2)      # unanswerable: B alone refuses the odd ones
    ps = [p_pw, t[2], tc[2], p_ans, p_un]
    reject, holm, _, _ = multipletests(ps, alpha=ALPHA, method="holm")
    got = [m["pairwise"], m["faithfulness"], m["coverage"], m["abstention"]["answerable"],
           m["abstention"]["unanswerable"]]
    assert rep["holm"]["family"] == ["pairwise", "faithfulness", "coverage",
                                     "abstention_answerable", "abstention_unanswerable"]
    for g, p, ph, rj in zip(got, ps, holm, reject):
        assert g["p_value"] == pytest.approx(p, rel=1e-9), g["metric"]
        assert g["p_holm"] == pytest.approx(ph, rel=1e-9), g["metric"]
        assert g["significant"] is bool(rj), g["metric"]
    # the intervals: faithfulness and coverage the betting ones (to the reference's grid of
    # 1/2000), coverage's non-inferiority the one-sided betting limit; pairwise the t
    # interval on per-case scores {1, .5, 0} as B − A win rates
    f = m["faithfulness"]
    assert t[0] - 1e-3 <= f["ci_low"] <= t[0] and t[1] <= f["ci_high"] <= t[1] + 1e-3
    ni = m["coverage"]["noninferiority"]
    low, p_ni = ref.bound(ref.ordered([y - x for x, y in zip(ca, cb)]), 0.05, "lower", -0.05)
    assert ni["conf_level"] == pytest.approx(0.95)
    assert low - 1e-3 <= ni["ci_low"] <= low and ni["p_value"] == pytest.approx(p_ni)
    assert ni["holds"] is False      # 16 cases: below the 68 a 0.05 margin needs
    scores = [1.0] * 4 + [0.0] + [0.5] * (N_ANS + N_UN - 5)
    wr = st.ttest_1samp(scores, 0.5).confidence_interval(0.95)
    assert m["pairwise"]["ci_low"] == pytest.approx(2 * wr.low - 1)
    assert m["pairwise"]["ci_high"] == pytest.approx(2 * wr.high - 1)
    # the rates behind them (the gate reads B's)
    assert m["faithfulness"]["a"] == pytest.approx(sum(fa[i] for i in used) / len(used))
    assert m["faithfulness"]["b"] == pytest.approx(sum(fb[i] for i in used) / len(used))
    assert (m["coverage"]["a"], m["coverage"]["b"]) == pytest.approx((sum(ca) / N_ANS, sum(cb) / N_ANS))
    assert m["abstention"]["answerable"]["b"] == pytest.approx(1 / N_ANS)
    assert m["abstention"]["unanswerable"]["a"] == pytest.approx(0.5)
    # the counts behind them
    assert (m["pairwise"]["b_wins"], m["pairwise"]["a_wins"]) == (4, 1)
    assert m["faithfulness"]["n"] == len(used) and m["faithfulness"]["difference"] == pytest.approx(
        sum(fb[i] - fa[i] for i in used) / len(used))
    assert m["faithfulness"]["dropped"]["b_only"] == ["a05"] + [f"u{j:02d}" for j in range(1, N_UN, 2)]
    assert m["faithfulness"]["dropped"]["both"] == [f"u{j:02d}" for j in range(0, N_UN, 2)]
    assert m["faithfulness"]["dropped"]["reasons"]["B"] == {"abstained": 1 + N_UN}
    assert m["abstention"]["answerable"]["table"] == {"both": 0, "a_only": 0, "b_only": 1,
                                                      "neither": N_ANS - 1}
    assert m["abstention"]["unanswerable"]["table"] == {"both": N_UN // 2, "a_only": 0,
                                                        "b_only": N_UN // 2, "neither": 0}
    # the worst-case bound counts B's one answerable refusal as B = 0 against A's 1
    bound = m["faithfulness"]["drop_bound"]
    tb = ref.ci(ref.ordered([fb.get(i, 0.0) - fa[i] for i in ans]))
    assert bound["imputed_b"] == 1 and bound["p_value"] == pytest.approx(tb[2])


def test_hallucinating_b_is_an_incident_and_fails_the_gate(world):
    """A incidents alone never fail the gate; a B incident does, with its claim listed."""
    rep, code = _run()
    inc = {(i["case_id"], i["variant"]) for i in rep["incidents"]}
    assert inc == {(f"a{i:02d}", "A") for i in (0, 4, 8, 12)} | \
        {(f"u{j:02d}", "A") for j in range(1, N_UN, 2)}
    assert rep["gate"]["incidents_b"] == 0
    assert not any("incident" in r for r in rep["gate"]["reasons"])

    lie = {"What about fact 3?": "I do not know for certain. Fact 3 is false."}
    world.override = lambda m, r: _override(m, r, lie)
    shutil.rmtree("results")  # a fresh store: its response cache would replay B's old answer
    Path("results").mkdir()
    rep2, code2 = _run()
    inc_b = [i for i in rep2["incidents"] if i["variant"] == "B"]
    assert [(i["case_id"], i["faithfulness"]) for i in inc_b] == [("a03", 0.0)]
    assert inc_b[0]["unsupported"] == [{"claim": "Fact 3 is false.", "verdict": "not_in_context"}]
    assert code2 == 1 and rep2["gate"]["decision"] == "FAIL" and rep2["gate"]["incidents_b"] == 1
    assert "1 hallucination incident(s) in B" in " ".join(rep2["gate"]["reasons"])


@pytest.mark.parametrize("variant", ["A", "B"])
def test_a_case_missing_either_answer_is_unfinished(world, variant):
    """However the store lost it, a case without one variant's answer is never scored."""
    import duckdb

    import csv

    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml", "--judge-repeats", "1"])
    assert r.exit_code == 0, r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert rep["status"] == "complete" and "a05" not in rep["unfinished_cases"]
    assert rep["judge_noise"]["n_comparisons"] > 0
    # human labels, so a complete report shows prediction-powered estimates
    assert CliRunner().invoke(cli, ["review", "export", "latest", "--n", "5", "--out",
                                    "pack"]).exit_code == 0
    rows = list(csv.DictReader(open("pack/labels.csv", encoding="utf-8")))
    for r in rows:
        r["label"] = r["allowed_labels"].split("|")[0]
    with open("labels.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert CliRunner().invoke(cli, ["review", "import", "latest", "labels.csv"]).exit_code == 0
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert rep["ppi"] and rep["metrics"]
    con = duckdb.connect("results/abtest.duckdb")
    con.execute("DELETE FROM generations WHERE case_id = 'a05' AND variant = ?", [variant])
    con.close()
    rep2 = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert rep2["status"] == "incomplete" and rep2["unfinished_cases"] == ["a05"]
    assert rep2["metrics"] == {} and not rep2["claim"]["licensed"]
    # nothing is estimated for an incomplete run: no PPI, no judge-noise estimate
    assert "ppi" not in rep2 and rep2["judge_noise"] is None
