"""Scenarios an adversary would choose, put through the real report, claim and gate (stores
written by hand: tests/support/adversary.py). Each was found printing a verdict that was wrong:
the gate passed a B that refuses most answerable questions or is significantly worse than
A, and the claim was licensed while the pairwise judge significantly preferred A, or while
B's answers said more than the claim extractor keeps (max_claims). The first
test is the control: the same harness does license a genuine gain, so the others cannot
pass by never licensing anything."""

from __future__ import annotations

import json
import random
import re

from support.adversary import C, Side, build, report


def _out_of_scope(n=35):
    return [C(f"u{i:03d}", answerable=False, a=Side(faith=None, abstained=True, cov=None),
              b=Side(faith=None, abstained=True, cov=None)) for i in range(n)]


def test_control_a_genuine_gain_with_validated_judges_is_licensed(tmp_path):
    rnd = random.Random(0)
    cases = []
    for i in range(70):
        fa = rnd.choice([0.9, 0.95, 1.0])
        cases.append(C(f"q{i:03d}", a=Side(faith=fa, cov=1.0),
                       b=Side(faith=min(1.0, fa + rnd.choice([0.0, 0.05, 0.1])), cov=1.0),
                       key_points=["k"], pairwise=("B", "B") if i % 3 else ("tie", "tie")))
    rep = report(build(tmp_path / "s", cases + _out_of_scope()))
    assert rep["claim"]["licensed"], rep["claim"]["reasons"]
    assert rep["gate"]["decision"] == "PASS", rep["gate"]["reasons"]
    rule = next(r for r in rep["gate"]["rules"] if r["name"] == "no_regression")
    assert rule["status"] == "pass" and rule["value"] == 0.0


def test_the_gate_fails_a_b_that_refuses_most_answerable_questions(tmp_path):
    """B refuses 50 of 60 answerable questions and is faithful on the other 10: every
    absolute bar passes (faithfulness 1.0 on what it answered); the refusals are
    significantly worse for B, so the gate fails and names them."""
    cases = [C(f"q{i:03d}", a=Side(faith=1.0, cov=1.0), key_points=["k"],
               b=Side(answer="I don't know based on the provided documents.", faith=None,
                      cov=0.0, abstained=True) if i >= 10 else Side(faith=1.0, cov=1.0))
             for i in range(60)]
    rep = report(build(tmp_path / "s", cases + _out_of_scope()))
    g = rep["gate"]
    assert g["decision"] == "FAIL" and g["exit_code"] == 1
    assert next(r for r in g["rules"] if r["name"] == "faithfulness")["status"] == "pass"
    regression = next(r for r in g["reasons"] if r.startswith("no_regression"))
    assert "abstention_answerable B − A +0.833" in regression and "coverage B − A" in regression


def test_the_gate_fails_a_b_significantly_worse_than_a_validated_or_not(tmp_path):
    cases = [C(f"q{i:03d}", a=Side(faith=1.0, cov=1.0), b=Side(faith=0.92 if i % 2 else 0.7,
                                                               cov=0.5),
               key_points=["k1", "k2"]) for i in range(60)] + _out_of_scope()
    for validation in (None, ([], [])):  # judges validated, then no human label at all
        rep = report(build(tmp_path / "s", cases, validation=validation))
        g = rep["gate"]
        assert g["decision"] == "FAIL", g
        regression = next(r for r in g["reasons"] if r.startswith("no_regression"))
        assert "faithfulness B − A -0.190" in regression
        assert "coverage B − A -0.500" in regression


def test_no_claim_while_the_pairwise_judge_significantly_prefers_a(tmp_path):
    """B pastes the retrieved chunks: every claim supported, every key point in it, so B is
    'more faithful and no less complete'; the pairwise judge prefers A in 50 of 70 in both
    orders. Without the pairwise reason the claim was licensed."""
    ctx = [("c1", "Returns are accepted within 30 days."),
           ("c2", "Damaged goods are refunded in full."), ("c3", "Gift cards cannot be returned.")]
    dump = " ".join(t for _, t in ctx)
    cases = [C(f"q{i:03d}", chunks=ctx, key_points=["30 days"],
               a=Side(answer="You have 30 days [c1].", faith=0.9 if i % 2 else 1.0, cov=1.0),
               b=Side(answer=dump, faith=1.0, cov=1.0),
               pairwise=("A", "A") if i < 50 else ("tie", "tie")) for i in range(70)]
    rep = report(build(tmp_path / "s", cases + _out_of_scope()))
    pw = rep["metrics"]["pairwise"]
    assert (pw["a_wins"], pw["b_wins"], pw["direction"]) == (50, 0, "A")
    c = rep["claim"]
    # every other condition holds (the faithfulness gain is real): this is the one reason
    assert not c["licensed"] and len(c["reasons"]) == 1, c["reasons"]
    assert c["reasons"][0].startswith("the pairwise judge significantly prefers A: A won 50, "
                                      "B won 0 (Holm p = ")
    assert rep["metrics"]["faithfulness"]["direction"] == "B"


_DECLINES = re.compile(r"\bdo(es)? not say\b|\bnot sure\b|\bknow\b", re.I)


class _HonestJudge:
    """A judge gateway that extracts every sentence of an answer as a claim (citations left
    out; skipping what the prompt says to skip: statements that the documents do not say or the
    answer does not know), supports a claim exactly when a chunk says it (chunk id given), and
    says the answer answers the question unless it says the documents do not give the answer,
    as the prompt asks: honest on everything it is shown."""

    def __init__(self, chunks):
        self.chunks, self.n = chunks, 0

    def complete(self, spec, messages, *, purpose, case_id=None, sample=0, response_format=None,
                 max_tokens=None):
        from types import SimpleNamespace

        self.n += 1
        text = messages[-1]["content"]
        if purpose.startswith("judge:claims"):
            ans = re.sub(r"\s*\[[^\]]+\]", "", text.split("<answer>")[1].split("</answer>")[0])
            sents = [s for s in re.split(r"(?<=\.)\s+", ans.strip()) if s]
            declines = bool(re.search(r"\bdo(es)? not say\b", ans))
            out: dict = {"claims": [s for s in sents if not _DECLINES.search(s)],
                         "rationale": ("it says the documents do not give the answer" if declines
                                       else "it states an answer"),
                         "answers_question": not declines}
        else:
            out = {"verdicts": {}}
            for line in text.split("<claims>")[1].split("</claims>")[0].strip().splitlines():
                n, claim = line.split(". ", 1)
                hit = next((c.id for c in self.chunks if c.text == claim.strip()), None)
                out["verdicts"][n] = ({"verdict": "supported", "chunk_id": hit} if hit else
                                      {"verdict": "not_in_context", "chunk_id": None})
        return SimpleNamespace(ok=True, content=json.dumps(out), call_hash=f"h{self.n}",
                               model_resolved="judge", error=None)


def test_no_claim_when_b_fills_the_claim_extractors_cap(tmp_path):
    """The extractor keeps at most max_claims claims, so a B that opens with eight sentences
    copied from the context and ends with four invented ones scored 1.0 from an honest judge,
    and the claim was licensed. B's answers filled the cap: the claim is withheld and says
    why; A's shorter answers (one invention in three sentences) are checked whole."""
    from abtest import judges as J
    from abtest.core.models import Case, Chunk, ModelSpec

    chunks = [Chunk(id=f"c{i}", text=t) for i, t in enumerate([
        "Returns are accepted within 30 days.", "Damaged goods are refunded in full.",
        "Refunds go to the original payment method.", "A receipt is required.",
        "Store credit is offered without a receipt.", "Sale items can be returned.",
        "Gift cards cannot be returned.", "Returns are free by mail."])]
    case = Case(id="q", question="What is the return policy?", answerable=True,
                corpus_version="v1", retriever="t", context=chunks)
    long_b = " ".join(c.text for c in chunks) + (" Electronics can be returned within 90 days."
                                                 " Refunds take one hour. No receipt is ever "
                                                 "needed. Shipping labels cost nothing.")
    short_a = ("Returns are accepted within 30 days. A receipt is required. Refunds take one "
               "hour.")
    judged = {}
    for v, answer in (("A", short_a), ("B", long_b), ("A1", chunks[0].text)):
        row, claims = J.faithfulness(_HonestJudge(chunks), ModelSpec(model="judge"), case,
                                     answer, v[0], max_claims=8)
        judged[v] = (row["score"], json.loads(row["result_json"]))
    assert judged["B"][0] == 1.0 and judged["B"][1]["n_claims"] == 8  # 12 sentences, 8 kept
    assert judged["A"][0] == 2 / 3 and judged["A"][1]["n_claims"] == 3
    cases = [C(f"q{i:03d}", chunks=[(c.id, c.text) for c in chunks], key_points=["30 days"],
               a=Side(answer=short_a if i % 2 else chunks[0].text, cov=1.0,
                      faith=judged["A" if i % 2 else "A1"][0],
                      result=judged["A" if i % 2 else "A1"][1]),
               b=Side(answer=long_b, faith=judged["B"][0], cov=1.0, result=judged["B"][1]))
             for i in range(70)]
    rep = report(build(tmp_path / "s", cases + _out_of_scope()))
    f = rep["metrics"]["faithfulness"]
    assert f["direction"] == "B" and f["max_claims"] == 8
    assert len(f["at_claim_cap"]["B"]) == 70 and f["at_claim_cap"]["A"] == []
    c = rep["claim"]
    assert not c["licensed"] and len(c["reasons"]) == 1, c["reasons"]
    assert c["reasons"][0].startswith("70 of B's answers gave the claim extractor the most "
                                      "claims it keeps (max_claims 8)")


def test_the_gate_reads_b_over_all_its_scored_answers_not_only_the_pairs(tmp_path):
    """A refuses 40 answerable questions that B answers at faithfulness 0.86; on the other 20
    both score 0.95. Over the pairs B scores 0.95 and passed the 0.90 bar; over everything it
    answered B scores (40 × 0.86 + 20 × 0.95) / 60 = 0.89, below it."""
    cases = [C(f"q{i:03d}", key_points=["k"],
               a=Side(faith=None, cov=0.0, abstained=True) if i < 40 else Side(faith=0.95, cov=1.0),
               b=Side(faith=0.86 if i < 40 else 0.95, cov=1.0)) for i in range(60)]
    rep = report(build(tmp_path / "s", cases + _out_of_scope()))
    f = rep["metrics"]["faithfulness"]
    assert f["n"] == 20 and abs(f["b"] - 0.95) < 1e-12            # the paired mean
    want = (40 * 0.86 + 20 * 0.95) / 60
    assert abs(f["b_all"] - want) < 1e-12 and f["n_b_all"] == 60
    rule = next(r for r in rep["gate"]["rules"] if r["name"] == "faithfulness")
    assert rule["status"] == "fail" and abs(rule["value"] - want) < 1e-12
    assert rule["note"] == "over all 60 of B's scored answers (20 paired)"
    assert rep["gate"]["decision"] == "FAIL"
    assert "faithfulness: 0.890 vs threshold 0.9" in rep["gate"]["reasons"]


def test_judge_validation_counts_labelled_items_not_labels(tmp_path):
    """15 reviewers labelling the same 2 items per judge made "30 labels" and validated every
    judge (kappa 1.0), licensing the claim. An item counts once, with its reviewers'
    majority label; an even split counts against the judge."""
    from support.adversary import validation_rows

    rnd = random.Random(0)
    cases = []
    for i in range(70):
        fa = rnd.choice([0.9, 0.95, 1.0])
        cases.append(C(f"q{i:03d}", a=Side(faith=fa, cov=1.0),
                       b=Side(faith=min(1.0, fa + rnd.choice([0.0, 0.05, 0.1])), cov=1.0),
                       key_points=["k"], pairwise=("B", "B") if i % 3 else ("tie", "tie")))
    cases += _out_of_scope()
    few = validation_rows("r1", n_items=2, reviewers=[f"rev{k}" for k in range(15)])
    rep = report(build(tmp_path / "few", cases, validation=few))
    jv = rep["judge_validation"]
    for j in ("faithfulness", "coverage", "abstention"):
        assert jv[j]["n_labels"] == 2 and not jv[j]["validated"], jv[j]
        assert jv[j]["reason"] == "2 human label(s) of its items (need 30)"
    assert not rep["claim"]["licensed"]
    # 30 items, two reviewers each, who split on one item: that item is a disagreement
    items, labels = validation_rows("r1", n_items=30, reviewers=["ann", "bob"])
    split = next(x for x in labels if x["reviewer"] == "bob" and x["judge"] == "faithfulness")
    split["label"] = "unsupported" if split["label"] == "supported" else "supported"
    rep = report(build(tmp_path / "split", cases, validation=(items, labels)))
    f = rep["judge_validation"]["faithfulness"]
    assert f["n_labels"] == 30 and f["agreement"] == 29 / 30


def _depot_cases(n=80):
    """n answerable questions about depots; each context says when the depot opens and how many
    bays it has. A gets the opening hour of every fourth depot wrong."""
    from abtest.core.models import Case, Chunk

    return [Case(id=f"q{i:03d}", question=f"When does depot {i} open?", answerable=True,
                 corpus_version="v1", retriever="t", key_points=["9am"],
                 context=[Chunk(id="c1", text=f"Depot {i} opens at 9am."),
                          Chunk(id="c2", text=f"Depot {i} has 40 bays.")]) for i in range(n)]


def _through_the_judges(case, answer, v):
    """The answer through the real claim and abstention judges (one extraction call asks both)
    with an honest judge: the Side the store holds, as a run would have written it."""
    from abtest import judges as J
    from abtest.core.models import ModelSpec

    (faith, _claims), (abst, _) = J.claims_and_abstention(
        _HonestJudge(case.context), ModelSpec(model="judge"), case, answer, v,
        ["faithfulness", "abstention"])
    assert faith["error"] is None and abst["error"] is None
    return Side(answer=answer, faith=faith["score"], result=json.loads(faith["result_json"]),
                cov=1.0 if "9am" in answer else 0.0, abstained=abst["verdict"] == "abstained",
                abstention=abst)


def _soft_refusal_world(b_hard):
    """80 answerable depot questions and 35 out of scope. On every fourth A states the wrong
    hour beside a true fact (faithfulness 0.5); B answers that one with `b_hard`, and every
    other one as A does, correctly."""
    cases = []
    for case in _depot_cases():
        i = int(case.id[1:])
        right = f"Depot {i} opens at 9am [c1]."
        hard = i % 4 == 0
        a = (f"Depot {i} opens at 5am [c1]. Depot {i} has 40 bays [c2]." if hard else right)
        b = b_hard(i) if hard else right
        cases.append(C(case.id, question=case.question, chunks=[(c.id, c.text) for c in case.context],
                       key_points=["9am"], a=_through_the_judges(case, a, "A"),
                       b=_through_the_judges(case, b, "B"),
                       pairwise=("B", "B") if hard else ("tie", "tie")))
    return cases + _out_of_scope()


def test_a_soft_refusal_is_an_abstention_and_the_claim_is_not_licensed(tmp_path):
    """Issue 43: "The documents do not say when depot 4 opens. Depot 4 has 40 bays [c2]."
    declines the question and adds a true, cited side fact. B answers so on the quarter of
    answerable questions A (and B) would get wrong: its faithfulness there is 1.0 against A's
    0.5, a significant gain. The claim extraction found a claim, and until issue 43 that
    overruled the judge's "abstained": B was reported with 0.000 answerable refusals and the
    claim licensed. The judge's verdict now stands: B refuses 0.250 of answerable questions,
    the refusal non-inferiority fails, and no claim is licensed; the side fact is still scored."""
    soft = _soft_refusal_world(lambda i: f"The documents do not say when depot {i} opens. "
                                         f"Depot {i} has 40 bays [c2].")
    b4 = soft[4].b
    assert b4.abstained and b4.faith == 1.0 and b4.result["n_claims"] == 1
    assert json.loads(b4.abstention["result_json"]) == {
        "method": "asked with the claim extraction", "judge_said": "abstained",
        "answers_question": False, "rationale": "it says the documents do not give the answer",
        "n_claims": 1}
    rep = report(build(tmp_path / "soft", soft))
    ab = rep["metrics"]["abstention"]["answerable"]
    assert (ab["n"], ab["a"], ab["b"]) == (80, 0.0, 0.25)
    f = rep["metrics"]["faithfulness"]
    assert f["direction"] == "B" and f["n"] == 80       # the side facts are scored: no pair dropped
    c = rep["claim"]
    assert not c["licensed"]
    assert any(r.startswith("refusals on answerable cases rose: B − A = +0.250")
               for r in c["reasons"]), c["reasons"]
    assert rep["gate"]["decision"] == "FAIL"            # and the regression fails the gate


def test_an_honest_b_with_the_same_gain_is_licensed(tmp_path):
    """The control: a B that gets those questions right, with the same faithfulness gain, is
    licensed, so the soft refusal is refused for its refusals and nothing else. A hedged
    answer ("I'm not sure, but ...") that states the hour answers the question."""
    honest = _soft_refusal_world(lambda i: f"Depot {i} opens at 9am [c1]. Depot {i} has 40 "
                                           f"bays [c2].")
    rep = report(build(tmp_path / "honest", honest))
    assert rep["metrics"]["abstention"]["answerable"]["b"] == 0.0
    assert rep["metrics"]["faithfulness"]["direction"] == "B"
    assert rep["claim"]["licensed"], rep["claim"]["reasons"]
    hedged = _soft_refusal_world(lambda i: f"I'm not sure. Depot {i} opens at 9am [c1].")
    assert not any(c.b.abstained for c in hedged if c.answerable)
    assert hedged[4].b.faith == 1.0 and hedged[4].b.result["n_claims"] == 1
