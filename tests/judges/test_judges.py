"""Each judge through its real prompt path with a scripted fake provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.fakes import ROOT, shared_data_dir
from support.fakes import Brain


def gateway(tmp_path):
    from abtest.llm import Gateway
    from abtest.store import Store

    store = Store(tmp_path / "s.duckdb")
    return store, Gateway(store, concurrency=2, timeout_s=5, max_retries=1, backoff_base_s=0.0)


def case():
    from support.fakes import small_cases

    return small_cases()[0]


def judge_spec():
    from abtest.core.models import ModelSpec

    return ModelSpec(model="fake/judge")


def test_invalid_json_is_repaired_once(tmp_path, brain):
    from abtest import judges as J

    seen = []

    def override(messages, req):
        if (req.get("response_format") or {}).get("json_schema", {}).get("name") == "pairwiseverdict":
            seen.append(len(messages))
            if len(messages) == 1:
                return '{"winner": "1", "margin": 0.7'  # truncated JSON
        return None

    brain.override = override
    store, gw = gateway(tmp_path)
    rows = J.pairwise(gw, judge_spec(), case(), "answer a", "answer b [c1]")
    assert [r["error"] for r in rows] == [None, None]
    assert seen == [1, 3, 1, 3]  # each order: first try, then one repair with the bad reply shown
    assert all(len(r["call_hashes"].split(",")) == 2 for r in rows)


def test_still_invalid_after_repair_is_an_error_not_a_score(tmp_path, brain):
    from abtest import judges as J

    brain.override = lambda m, r: "not json at all" if r.get("response_format") else None
    store, gw = gateway(tmp_path)
    row, claims = J.faithfulness(gw, judge_spec(), case(), "Normandy is in France.", "A")
    assert row["error"].startswith("judge output invalid after one repair")
    assert row["score"] is None and row["verdict"] is None and claims == []


def test_schema_violation_is_repaired(tmp_path, brain):
    from abtest import judges as J

    calls = []

    def override(messages, req):
        if (req.get("response_format") or {}).get("json_schema", {}).get("name") == "score":
            calls.append(1)
            return {"score": 7} if len(calls) == 1 else {"score": 0.7, "explanation": "ok"}
        return None

    brain.override = override
    store, gw = gateway(tmp_path)
    row = J.rubric(gw, judge_spec(), case(), "quality", "A",
                   {"question": "q", "context": "c", "answer": "a"})
    assert row["score"] == 0.7 and row["error"] is None and len(calls) == 2


def test_refusal_has_no_faithfulness_score(tmp_path, brain):
    from abtest import judges as J

    store, gw = gateway(tmp_path)
    row, claims = J.faithfulness(gw, judge_spec(), case(), "I don't know based on the provided "
                                 "documents.", "B")
    assert row["verdict"] == "no_claims" and row["score"] is None and claims == []
    # the extractor decided there is no claim: a phrase list never skips the judge
    assert [c["req"]["response_format"]["json_schema"]["name"] for c in brain.calls] == ["claims"]


def test_hedged_hallucination_is_extracted_and_scored(tmp_path, brain):
    """"I do not know for certain." in front of a false statement is not a refusal."""
    from abtest import judges as J

    store, gw = gateway(tmp_path)
    row, claims = J.faithfulness(gw, judge_spec(), case(), "I do not know for certain. Normandy "
                                 "is in Spain.", "B")
    assert row["verdict"] == "scored" and row["score"] == 0.0
    assert claims == [{"claim": "Normandy is in Spain.", "verdict": "not_in_context",
                       "chunk_id": None}]
    hedged = "I do not know for certain. Normandy is in Spain."
    n_calls = len(brain.calls)
    rows = J.claims_and_abstention(gw, judge_spec(), case(), hedged + " ", "B",
                                   ["faithfulness", "abstention"])
    ab = rows[1][0]
    assert ab["verdict"] == "answered" and ab["score"] == 0.0
    assert json.loads(ab["result_json"]) == {
        "method": "asked with the claim extraction", "judge_said": "answered",
        "answers_question": True, "rationale": "it states an answer", "n_claims": 1}
    assert ab["rationale"] == "it states an answer"
    assert rows[0][0]["verdict"] == "scored" and rows[0][0]["score"] == 0.0
    # abstention asked in the extraction call: no call of its own (the verification of the
    # same claim comes from the response cache)
    assert [c["req"]["response_format"]["json_schema"]["name"] for c in brain.calls[n_calls:]] \
        == ["claims"]


def test_abstention_has_its_own_call_when_the_extractor_leaves_it_out(tmp_path, brain):
    from abtest import judges as J

    plain = brain.j_claims
    brain.j_claims = lambda prompt: {"claims": plain(prompt)["claims"]}  # no answers_question
    store, gw = gateway(tmp_path)
    rows = J.claims_and_abstention(gw, judge_spec(), case(), "I don't know.", "B",
                                   ["faithfulness", "abstention"])
    assert [c["req"]["response_format"]["json_schema"]["name"] for c in brain.calls] == [
        "claims", "abstention"]
    assert rows[1][0]["verdict"] == "abstained"
    assert json.loads(rows[1][0]["result_json"])["method"] == "llm"


def test_claims_stored_with_supporting_chunk(tmp_path, brain):
    from abtest import judges as J

    store, gw = gateway(tmp_path)
    row, claims = J.faithfulness(gw, judge_spec(), case(), "Normandy is a region in France.", "A")
    assert row["score"] == 1.0 and claims == [{"claim": "Normandy is a region in France.",
                                               "verdict": "supported", "chunk_id": "c1"}]
    row, claims = J.faithfulness(gw, judge_spec(), case(), "Normandy is in Spain.", "B")
    assert row["score"] == 0.0 and claims[0]["verdict"] == "not_in_context"


def test_support_must_point_at_a_real_chunk(tmp_path, brain):
    from abtest import judges as J

    def override(messages, req):
        if (req.get("response_format") or {}).get("json_schema", {}).get("name") == "claimverdicts":
            return {"verdicts": {"1": {"verdict": "supported", "chunk_id": "invented"}}}
        return None

    brain.override = override
    store, gw = gateway(tmp_path)
    row, claims = J.faithfulness(gw, judge_spec(), case(), "Normandy is a region in France.", "A")
    assert claims[0]["verdict"] == "not_in_context" and row["score"] == 0.0


def test_position_bias_counted(project, brain):
    """A judge that always picks the first position: every case is position-inconsistent."""
    def first(messages, req):
        if (req.get("response_format") or {}).get("json_schema", {}).get("name") == "pairwiseverdict":
            return {"winner": "1", "margin": 0.9, "rationale": "first"}
        return None

    brain.override = first
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    rep = json.loads(CliRunner().invoke(cli, ["report", r.stdout.strip().splitlines()[-1],
                                              "--format", "json"]).stdout)
    pw = rep["metrics"]["pairwise"]
    assert (pw["b_wins"], pw["a_wins"], pw["no_preference"], pw["position_inconsistent"]) == (0, 0, 4, 4)
    assert pw["first_position_win_rate"] == 1.0
    assert pw["position_consistency"]["estimate"] == 0.0
    assert pw["position_consistency"]["biased_to_first"] == 4
    assert pw["p_value"] == 1.0  # no decisive pair
    # and where people read: all 4 inconsistent pairs went to the first-shown answer
    said = ("of the 4 position-inconsistent pairs, 4 picked the answer shown first both times, 0 "
            "the one shown second")
    assert said in CliRunner().invoke(cli, ["report", "latest"]).stdout
    page = CliRunner().invoke(cli, ["report", "latest", "--format", "html"]).stdout
    assert said in page


@pytest.mark.parametrize("said", [True, False])
def test_abstention_verdict_is_the_judges(tmp_path, brain, said):
    """No phrase list decides: the judge is asked every time and its verdict is the verdict,
    whatever the answer's wording."""
    from abtest import judges as J

    def override(messages, req):
        if (req.get("response_format") or {}).get("json_schema", {}).get("name") == "abstention":
            return {"rationale": "why", "answers_question": not said}
        return None

    brain.override = override
    store, gw = gateway(tmp_path)
    for text in ("I don't know.", "Normandy is in France."):
        row = J.abstention(gw, judge_spec(), case(), text, "A")
        assert row["verdict"] == ("abstained" if said else "answered")
        assert row["score"] == (1.0 if said else 0.0)
        assert json.loads(row["result_json"])["method"] == "llm"
    assert len(brain.calls) == 2
    # the answer's claims are recorded beside the verdict, never overrule it: a soft refusal's
    # side facts are claims too
    row = J.abstention(gw, judge_spec(), case(), "I don't know.", "B", n_claims=2)
    assert row["verdict"] == ("abstained" if said else "answered")
    assert json.loads(row["result_json"])["n_claims"] == 2


def test_judge_prompts_hashed_into_judgments(ran):
    from abtest.core.config import load_config
    from abtest.judges.common import load_prompt
    from abtest.store import Store

    s = Store(load_config().store_path, read_only=True)
    rows = s.judgments(ran, "pairwise")
    s.close()
    assert {x["prompt_sha256"] for x in rows} == {load_prompt("pairwise_v1").sha256}


def test_judge_check_pairwise_on_llmbar_sample(project, brain):
    def gold_like(messages, req):
        if (req.get("response_format") or {}).get("json_schema", {}).get("name") == "pairwiseverdict":
            return {"winner": "1", "margin": 0.5, "rationale": "x"}
        return None

    brain.override = gold_like
    data = ROOT / "tests" / "data" / "llmbar" / "pairs.jsonl"
    r = CliRunner().invoke(cli, ["judge-check", "pairwise", "--data", str(data), "--format", "json"])
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["n"] == 10
    # an always-first judge: every item position-inconsistent, so no preference anywhere
    assert res["position_consistency"] == 0.0 and res["no_preference"] == 10 and res["accuracy"] == 0.0
    gold1 = sum(json.loads(x)["label"] == 1 for x in data.read_text().splitlines())
    assert res["accuracy_first_order"] == pytest.approx(gold1 / 10)


def test_judge_check_faithfulness_synthetic(project, brain, tmp_path):
    rows = [{"id": "s1", "source": "Normandy is a region in France.",
             "claim_or_summary": "Normandy is a region in France.", "label": "consistent"},
            {"id": "s2", "source": "Normandy is a region in France.",
             "claim_or_summary": "Normandy is a region in Spain.", "label": "hallucinated"}]
    f = tmp_path / "fb.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = CliRunner().invoke(cli, ["judge-check", "faithfulness", "--data", str(f), "--format", "json"])
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["accuracy"] == 1.0 and res["hallucination_recall"] == 1.0


def test_judge_check_bad_label_exit_2(project, brain, tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps({"id": "x", "input": "i", "output_1": "a", "output_2": "b", "label": 3}) + "\n")
    r = CliRunner().invoke(cli, ["judge-check", "pairwise", "--data", str(f)])
    assert r.exit_code == 2 and "line 1" in r.stderr and "label" in r.stderr


@pytest.mark.skipif(shared_data_dir() is None, reason="../shared/data not present (fresh clone)")
def test_judge_check_faithfulness_on_faithbench(project, brain):
    data = shared_data_dir() / "faithbench" / "faithbench.jsonl"
    r = CliRunner().invoke(cli, ["judge-check", "faithfulness", "--data", str(data), "--limit", "20",
                                 "--format", "json"])
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["n"] == 20 and 0.0 <= res["accuracy"] <= 1.0


def test_judge_repeats_measure_test_retest(project, brain):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text() + "judge_repeats: 2\n")
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    assert r.exit_code == 0, r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", r.stdout.strip().splitlines()[-1],
                                              "--format", "json"]).stdout)
    tr = rep["judge_noise"]
    assert tr["repeats"] == 2 and tr["n_items"] > 0
    assert tr["agreement"] == 1.0  # the scripted judge is deterministic
    # shown where people read, not only in the JSON
    want = (f"Judge test-retest: the pairwise judge re-asked 2x on {tr['n_items']} case(s); "
            f"{tr['n_comparisons']} repeated verdicts agree with the first in 1.000 of them.")
    assert want in CliRunner().invoke(cli, ["report", "latest"]).stdout
    assert want in CliRunner().invoke(cli, ["report", "latest", "--format", "html"]).stdout
    # the dry run counts the re-asks: K × 2 orders × min(sample, N) more judge calls
    dry = json.loads(CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a",
                                              "variants/a.yaml", "--b", "variants/b.yaml",
                                              "--dry-run", "--judge-repeats", "3"]).stdout)
    assert dry["judge_repeat_calls"] == 3 * 2 * 4
    base = json.loads(CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a",
                                               "variants/a.yaml", "--b", "variants/b.yaml",
                                               "--dry-run", "--judge-repeats", "0"]).stdout)
    judge = next(iter(dry["provider_calls"]["judge"].values()))
    assert judge - next(iter(base["provider_calls"]["judge"].values())) == 24


def test_relevance_llm_rating_is_labelled(project, brain):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text().replace(
        "judges: [pairwise, faithfulness, coverage, abstention]", "judges: [relevance, quality]"))
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    assert r.exit_code == 0, r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", r.stdout.strip().splitlines()[-1],
                                              "--format", "json"]).stdout)
    assert rep["metrics"]["relevance"]["method"].startswith("LLM 0-1 rating")
    assert rep["metrics"]["quality"]["a"] == 0.75 and rep["metrics"]["quality"]["n"] == 4


def test_relevance_by_embedding(project, brain):
    from fake_llm_server import FakeLLMServer

    srv = FakeLLMServer(max_seconds=60)
    url = srv.start()
    try:
        Path("abtest.yaml").write_text(Path("abtest.yaml").read_text().replace(
            "judges: [pairwise, faithfulness, coverage, abstention]", "judges: [relevance]")
            + f'embedding: {{model: openai/emb, api_base: "{url}"}}\n')
        r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                     "--b", "variants/b.yaml"])
        assert r.exit_code == 0, r.stderr
        rep = json.loads(CliRunner().invoke(cli, ["report", r.stdout.strip().splitlines()[-1],
                                                  "--format", "json"]).stdout)
        rel = rep["metrics"]["relevance"]
        assert rel["method"].startswith("embedding") and rel["n"] == 4
        assert 0.0 <= rel["a"] <= 1.0
        assert sum("/embeddings" in x["path"] for x in srv.requests) == 8  # one per answer
    finally:
        srv.stop()


def test_conformance_only_for_stylistic_variants(project, brain):
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text().replace(
        "judges: [pairwise, faithfulness, coverage, abstention]", "judges: [conformance]"))
    Path("variants/b.yaml").write_text(Path("variants/b.yaml").read_text()
                                       + "style: true\nrubric: Plain sentences, one citation per claim.\n")
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    assert r.exit_code == 0, r.stderr
    rep = json.loads(CliRunner().invoke(cli, ["report", r.stdout.strip().splitlines()[-1],
                                              "--format", "json"]).stdout)
    conf = [c for c in brain.calls if "<rubric>" in c["messages"][-1]["content"]]
    # only B declares a rubric: both answers are scored against it (a paired comparison)
    assert len(conf) == 8
    assert all("Plain sentences" in c["messages"][-1]["content"] for c in conf)
    m = rep["metrics"]["conformance"]
    assert m["n"] == 4 and m["n_dropped"] == 0
    assert m["rubric"]["from"] == "B" and "only B sets a rubric" in m["rubric"]["note"]
    md = CliRunner().invoke(cli, ["report", "latest"]).stdout
    assert "Conformance: only B sets a rubric" in md
    # both set one, differently: B's is used for both, and the report says A's is not used
    Path("variants/a.yaml").write_text(Path("variants/a.yaml").read_text()
                                       + "style: true\nrubric: Long flowing paragraphs.\n")
    brain.calls.clear()
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    assert r.exit_code == 0, r.stderr
    conf = [c for c in brain.calls if "<rubric>" in c["messages"][-1]["content"]]
    assert not any("Long flowing" in c["messages"][-1]["content"] for c in brain.calls)
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert "A's is not used" in rep["metrics"]["conformance"]["rubric"]["note"]


def test_model_version_drift_stops_the_run(project, brain):
    n = {"k": 0}

    def drift(messages, req):
        if req.get("response_format"):
            return None
        n["k"] += 1
        out = Brain().generate(messages)
        if n["k"] > 3:  # the provider silently swaps the model under the run
            return {"id": "x", "object": "chat.completion", "created": 0, "model": "gen-v2",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": out}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        return out

    brain.override = drift
    Path("abtest.yaml").write_text(Path("abtest.yaml").read_text().replace("concurrency: 4",
                                                                           "concurrency: 1"))
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    # drift stops the run as incomplete (exit 3), naming both versions; no case starts after it
    assert r.exit_code == 3, r.stderr
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("abtest: incomplete:")]
    assert len(line) == 1 and "model version drift: fake/gen resolved to" in line[0]
    assert "'gen-v2'" in line[0] and "and then to" in line[0]
    first = line[0].split("resolved to '")[1].split("'")[0]
    assert first != "gen-v2" and first in line[0]
    rep = json.loads(CliRunner().invoke(cli, ["report", "latest", "--format", "json"]).stdout)
    assert rep["status"] == "incomplete"
    versions = rep["models"]["generator"]["drift"]["fake/gen"]
    assert len(versions) == 2 and any(v.startswith("gen-v2") for v in versions)
    assert f"model version drift: the generator resolved to {', '.join(versions)}" in \
        rep["claim"]["reasons"]
    assert rep["gate"]["exit_code"] == 3


def test_shipped_injection_fixture_is_neutralised(tmp_path, monkeypatch, brain):
    """fixtures/prompt-injection ships chunks that try to close judge delimiters."""
    import shutil

    from support.fakes import make_project

    p = make_project(tmp_path)
    shutil.copytree(ROOT / "fixtures" / "prompt-injection", p / "fixtures" / "inj")
    monkeypatch.chdir(p)
    r = CliRunner().invoke(cli, ["run", "--fixture", "fixtures/inj", "--a", "variants/a.yaml",
                                 "--b", "variants/b.yaml"])
    assert r.exit_code == 0, r.stderr
    judged = [c["messages"][-1]["content"] for c in brain.calls if c["req"].get("response_format")]
    assert judged
    for prompt in judged:
        for tag in ("context", "response_1", "response_2", "claims", "answer", "question"):
            assert prompt.count(f"<{tag}>") <= 1 and prompt.count(f"</{tag}>") <= 1, tag
    assert any("‹/response_1›" in p for p in judged)


@pytest.mark.parametrize("said", [True, False])
def test_abstention_asked_with_the_extraction_is_the_extractors_verdict(tmp_path, brain, said):
    """An answer with no claim is an abstention exactly when the judge says so."""
    from abtest import judges as J

    brain.j_claims = lambda prompt: {"claims": [], "rationale": "", "answers_question": not said}
    store, gw = gateway(tmp_path)
    rows = J.claims_and_abstention(gw, judge_spec(), case(), "Yes.", "A",
                                   ["faithfulness", "abstention"])
    assert rows[0][0]["verdict"] == "no_claims"
    assert rows[1][0]["verdict"] == ("abstained" if said else "answered")
    assert len(brain.calls) == 1


def test_faithfulness_is_the_supported_share_of_several_claims(tmp_path, brain):
    from abtest import judges as J

    plain = brain.j_claims
    brain.j_claims = lambda prompt: {**plain(prompt), "claims": plain(prompt)["claims"] + ["  "]}
    store, gw = gateway(tmp_path)
    row, claims = J.faithfulness(gw, judge_spec(), case(), "Normandy is a region in France. "
                                 "Normandy is in Spain. Rollo was a Viking leader.", "A")
    # the blank claim is dropped; 2 of 3 are in the context
    assert [c["verdict"] for c in claims] == ["supported", "not_in_context", "supported"]
    assert row["score"] == pytest.approx(2 / 3)
    assert json.loads(row["result_json"])["supported"] == 2


def test_separate_abstention_call_is_not_overruled_by_claims(tmp_path, brain):
    """The separate call's verdict stands even when the extraction found a claim (until
    issue 43 the claim made it "answered"); the claim is still scored."""
    from abtest import judges as J

    plain = brain.j_claims
    brain.j_claims = lambda prompt: {"claims": plain(prompt)["claims"]}  # no answers_question
    brain.j_abstention = lambda prompt: {"rationale": "it declines", "answers_question": False}
    store, gw = gateway(tmp_path)
    rows = J.claims_and_abstention(gw, judge_spec(), case(), "Normandy is in Spain.", "B",
                                   ["faithfulness", "abstention"])
    ab = rows[1][0]
    assert json.loads(ab["result_json"])["judge_said"] == "abstained"
    assert ab["verdict"] == "abstained" and ab["rationale"] == "it declines"
    assert json.loads(ab["result_json"])["n_claims"] == 1
    assert rows[0][0]["verdict"] == "scored" and rows[0][0]["score"] == 0.0
