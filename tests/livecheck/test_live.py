"""`abtest live` end to end against real HTTP demo servers on loopback (fake model + judge)."""

from __future__ import annotations

import html as ihtml
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from abtest.cli import cli
from support.livetools import (CORPUS, GOLDEN, HAND_PRECISION, HAND_RECALL, RETRIEVED, frozen_run_id,
                       frozen_then_live, invoke_live, open_store, servers)


def test_live_captures_scores_and_reports_beside_frozen(live_project, brain):
    from abtest.reporting.gate import evaluate_gate
    from abtest.core.models import Gates
    from abtest.reporting.live import build_live_report, render_live, render_live_markdown

    fid, (code, out, err) = frozen_then_live()
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    assert "[4/4] q4 B" in err  # progress on stderr, run id alone on stdout
    with open_store() as s:
        run = s.get_run(run_id)
        items = {(r["case_id"], r["variant"]): r for r in s.live_items(run_id)}
        rep = build_live_report(s, run_id).as_dict()
    assert run["kind"] == "live" and run["status"] == "complete"
    assert len(items) == 8
    for (cid, v), it in items.items():
        chunks = json.loads(it["retrieved_json"])
        assert [c["id"] for c in chunks] == RETRIEVED[cid]
        assert [c["text"] for c in chunks] == [next(x["text"] for x in CORPUS if x["id"] == i)
                                               for i in RETRIEVED[cid]]
        scores = json.loads(it["scores_json"])
        assert len(scores) == len(chunks) and all(isinstance(x, float) and x > 0 for x in scores)
        assert scores == sorted(scores, reverse=True)
        assert it["latency_ms"] > 0 and it["latency_kind"] == "total" and it["error"] is None
        assert it["assistant_version"].startswith("plain@" if v == "A" else "grounded@")
    # the fake model: grounded cites the first retrieved chunk, plain does not
    assert items[("q1", "B")]["answer"] == "Normandy is a region in France. [c1]"
    assert items[("q1", "A")]["answer"] == "Normandy is a region in France."
    assert items[("q4", "B")]["answer"].startswith("I don't know")

    # the report keeps the frozen report's top-level keys
    for key in ("schema_version", "run_id", "kind", "status", "n_cases", "metrics", "claim",
                "incidents", "per_case", "gate", "frozen_comparison"):
        assert key in rep, key
    assert rep["kind"] == "live" and rep["status"] == "complete" and rep["n_cases"] == 4
    m = rep["metrics"]
    for k in ("pairwise", "faithfulness", "coverage", "abstention", "checks", "retrieval", "latency"):
        assert k in m, k
    for k in ("context_precision", "context_recall"):
        assert m["retrieval"][k]["n_excluded_no_relevant_ids"] == 1
        assert m["retrieval"][k]["excluded_no_relevant_ids"] == ["q4"]
    assert m["retrieval"]["context_precision"]["a"] == pytest.approx(HAND_PRECISION)
    assert m["retrieval"]["context_precision"]["b"] == pytest.approx(HAND_PRECISION)
    assert m["retrieval"]["context_recall"]["b"] == pytest.approx(HAND_RECALL)
    assert m["retrieval"]["context_recall"]["difference"] == pytest.approx(0.0)
    lat = m["latency"]
    bl = sorted(items[(c, "B")]["latency_ms"] for c in RETRIEVED)
    assert lat["p50_ms_b"] == pytest.approx((bl[1] + bl[2]) / 2)
    assert bl[2] <= lat["p95_ms_b"] <= bl[3] and lat["p95_ms_a"] >= lat["p50_ms_a"] > 0
    assert m["abstention"]["unanswerable"]["b"] == 1.0 and m["abstention"]["unanswerable"]["a"] == 0.0
    ca = m["checks"]["citation_accuracy"]
    assert (ca["n"], ca["pass_rate_a"], ca["pass_rate_b"]) == (2, 0.0, 1.0)
    assert (m["pairwise"]["b_wins"], m["pairwise"]["a_wins"], m["pairwise"]["no_preference"]) == (3, 0, 1)
    assert [i["case_id"] + i["variant"] for i in rep["incidents"]] == ["q4A"]

    # two separate claim sentences, the frozen one taken from the frozen run's report
    frozen_c, live_c = rep["claims"]["frozen"], rep["claims"]["live"]
    assert frozen_c["run_id"] == fid and frozen_c["statement"].startswith("Given these contexts")
    assert live_c["statement"].startswith("End to end, with retriever bm25@k=2 on corpus tiny-v1")
    assert rep["claim"] == live_c and frozen_c["statement"] != live_c["statement"]
    rows = {r["metric"]: r for r in rep["frozen_comparison"]}
    pw = rows["pairwise"]
    assert pw["frozen_difference"] == pytest.approx(0.75) and pw["live_difference"] == pytest.approx(0.75)
    assert pw["ratio"] == pytest.approx(1.0) and pw["survival"] == "survived"
    assert rows["abstention_unanswerable"]["ratio"] == pytest.approx(1.0)
    assert rows["faithfulness"]["ratio"] is None  # no frozen effect: no ratio is invented
    md = render_live_markdown(rep)
    assert "Given these contexts" in md and "End to end, with retriever" in md
    assert "Frozen vs live" in md
    # what the live run measured of the system, in the same words in Markdown and on the page
    al = sorted(items[(c, "A")]["latency_ms"] for c in RETRIEVED)
    said = ["Retrieval metrics exclude 1 question(s) without relevant_chunk_ids; A and B "
            "retrieved the same chunks for 1.00 of questions.",  # one retriever for both
            "Citation accuracy (expected citations all cited): A 0.000, B 1.000 over 2 "
            "question(s).",
            f"Latency (total): p50 A {(al[1] + al[2]) / 2:.0f} ms, p95 A {lat['p95_ms_a']:.0f} "
            f"ms; p50 B {(bl[1] + bl[2]) / 2:.0f} ms, p95 B {lat['p95_ms_b']:.0f} ms."]
    page = ihtml.unescape(re.sub(r"<[^>]+>", "", render_live(rep, "html")))
    for line in said:
        assert line in md, line
        assert line in page, line

    # the gate reads the live-only metrics
    assert rep["gate"]["decision"] == "PASS" and rep["gate"]["exit_code"] == 0
    rules = {r["name"]: r for r in rep["gate"]["rules"]}
    assert rules["context_precision"]["status"] == "pass"
    assert rules["p95_latency_ms"]["status"] == "pass"
    strict = evaluate_gate(rep, Gates(context_recall=0.9))
    assert strict["decision"] == "FAIL" and strict["exit_code"] == 1


def test_streamed_answers_measure_time_to_first_token(live_project, brain):
    a, b = servers()
    with a, b:
        code, out, err = invoke_live("--golden", "golden.jsonl", "--a", a.url, "--b", b.url,
                                     "--stream")
    assert code == 0, err
    with open_store() as s:
        items = {(r["case_id"], r["variant"]): r for r in s.live_items(out.strip())}
    assert {it["latency_kind"] for it in items.values()} == {"ttft"}
    assert items[("q2", "B")]["answer"] == "Rollo was a Viking leader who founded Normandy. [c2]"
    assert [c["id"] for c in json.loads(items[("q1", "A")]["retrieved_json"])] == ["c1", "c2"]


def test_endpoint_stopped_mid_run_saves_finished_and_exits_3(live_project, brain):
    from abtest.reporting.live import build_live_report

    a, b = servers(max_requests=3)  # A answers q1..q3, then closes its socket
    with a, b:
        code, out, err = invoke_live("--golden", "golden.jsonl", "--a", a.url, "--b", b.url)
    assert code == 3, err
    assert "incomplete — endpoint unreachable" in err
    run_id = out.strip().splitlines()[-1]
    with open_store() as s:
        items = {(r["case_id"], r["variant"]): r for r in s.live_items(run_id)}
        judged = {j["case_id"] for j in s.judgments(run_id)}
        checked = {c["case_id"] for c in s.checks(run_id)}
        run = s.get_run(run_id)
        rep = build_live_report(s, run_id).as_dict()
    ok = {k for k, r in items.items() if r["error"] is None}
    assert ok == {(c, v) for c in ("q1", "q2", "q3") for v in "AB"}
    assert items[("q4", "A")]["answer"] is None and "unreachable" in items[("q4", "A")]["error"]
    assert ("q4", "B") not in items  # never asked: nothing fabricated
    assert judged == checked == {"q1", "q2", "q3"}  # finished questions scored, q4 not
    assert run["status"] == "incomplete"
    assert rep["status"] == "incomplete" and rep["unfinished_cases"] == ["q4"]
    assert rep["n_finished"] == 3 and "endpoint unreachable" in rep["incomplete_reason"]
    assert rep["metrics"] == {} and "no metric" in rep["estimates_withheld"]  # nothing estimated
    assert rep["gate"]["decision"] == "INCOMPLETE" and rep["gate"]["exit_code"] == 3
    assert rep["claim"]["licensed"] is False and "incomplete live run" in rep["claim"]["statement"]
    q4 = next(r for r in rep["per_case"] if r["case_id"] == "q4")
    assert q4["finished"] is False and "faithfulness_a" not in q4
    # the report and the command's last line name the run to resume, not a generic hint
    assert f"--run-id {run_id} --resume" in err
    md = CliRunner().invoke(cli, ["report", run_id, "--format", "md"])
    assert f"--run-id {run_id} --resume" in md.output, md.output


def test_python_pipeline_targets(live_project, brain, tmp_path, monkeypatch):
    from abtest.core.config import load_config
    from abtest.livecheck import run_live
    from abtest.reporting.live import build_live_report

    mod = tmp_path / "pipes"
    mod.mkdir()
    (mod / "mypipe_live.py").write_text(
        "CHUNKS = {'q': [{'id': 'c1', 'text': 'Normandy is a region in France.', 'score': 2.0},\n"
        "                {'id': 'c4', 'text': 'Paris is the capital of France.', 'score': 0.5}]}\n"
        "def plain(question):\n"
        "    if 'Mars' in question:\n"
        "        return ('Olympus City.', [], 'plain-1')\n"
        "    return ('Normandy is a region in France.', CHUNKS['q'], 'plain-1')\n"
        "def grounded(question, conversation_id=None):\n"
        "    assert conversation_id.startswith('eval-')\n"
        "    if 'Mars' in question:\n"
        "        return {'answer': \"I don't know based on the provided documents.\", 'chunks': []}\n"
        "    return {'answer': 'Normandy is a region in France. [c1]', 'chunks': CHUNKS['q'],\n"
        "            'version': 'grounded-1'}\n")
    monkeypatch.syspath_prepend(str(mod))
    res = run_live(load_config(), "golden.jsonl", "python:mypipe_live:plain",
                   "python:mypipe_live:grounded", corpus_version="v9")
    assert res.status == "complete"
    with open_store() as s:
        items = {(r["case_id"], r["variant"]): r for r in s.live_items(res.run_id)}
        rep = build_live_report(s, res.run_id).as_dict()
    assert items[("q1", "A")]["assistant_version"] == "plain-1"
    assert items[("q1", "B")]["answer"].endswith("[c1]")
    assert json.loads(items[("q2", "B")]["scores_json"]) == [2.0, 0.5]
    assert json.loads(items[("q4", "B")]["retrieved_json"]) == []
    assert all(it["latency_ms"] >= 0 for it in items.values())
    # every answerable question retrieved [c1, c4]: q1 P=1/2 R=1; q2 P=0 R=0; q3 P=1/2 R=1/2
    assert rep["metrics"]["retrieval"]["context_precision"]["b"] == pytest.approx((0.5 + 0 + 0.5) / 3)
    assert rep["metrics"]["retrieval"]["context_recall"]["b"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert rep["claims"]["frozen"] is None and "frozen_comparison" not in rep
    assert rep["claim"]["statement"].startswith("End to end, with retriever as deployed on corpus v9")


def test_key_from_environment_is_sent_never_stored(live_project, brain, monkeypatch):
    from abtest.livecheck.demo_server import DemoChatServer

    key = "sk-live-test-7f3a9c1e55"
    monkeypatch.setenv("DEMO_CHAT_KEY", key)
    kw = dict(model="fake/gen", k=2, auth_token=key)
    a = DemoChatServer("results/index.duckdb", "variants/a.yaml", **kw)
    b = DemoChatServer("results/index.duckdb", "variants/b.yaml", **kw)
    with a, b:
        code, out, err = invoke_live("--golden", "golden.jsonl", "--a", a.url, "--b", b.url)
        assert code == 3 and "HTTP 401" in err  # no key: refused, stopped cleanly
        code, out2, err2 = invoke_live("--golden", "golden.jsonl", "--a", a.url, "--b", b.url,
                                       "--auth-env", "DEMO_CHAT_KEY")
    assert code == 0, err2
    assert key not in out + err + out2 + err2
    from abtest.core.config import load_config

    assert key.encode() not in Path(load_config().store_path).read_bytes()


def test_custom_template_paths_and_retry_on_429(live_project, brain):
    """A foreign API shape: template, dotted paths, header version; 429 then success."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []
    texts = {c["id"]: c["text"] for c in CORPUS}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "body": body})
            if sum(1 for s in seen if s["body"] == body) == 1:  # first try of each question
                self.send_response(429)
                self.send_header("Retry-After", "0")
                self.end_headers()
                return
            ids = RETRIEVED[body["case"]]
            out = json.dumps({"data": {"text": "I don't know." if body["case"] == "q4" else
                                       texts[ids[0]] + f" [{ids[0]}]",
                                       "sources": [{"doc": i, "content": texts[i]} for i in ids],
                                       "relevance": [0.9 - 0.1 * n for n in range(len(ids))]}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Assistant-Version", "foreign-7")
            self.end_headers()
            self.wfile.write(out.encode())

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        code, out, err = invoke_live(
            "--golden", "golden.jsonl", "--a", url, "--b", url, "--chat-path", "/api/ask",
            "--request-template", '{"q": "{question}", "case": "{id}", "n": "{index}", "v": "{variant}"}',
            "--answer-path", "data.text", "--chunks-path", "data.sources",
            "--chunk-id-field", "doc", "--chunk-text-field", "content",
            "--scores-path", "data.relevance")
    finally:
        srv.shutdown()
        srv.server_close()
    assert code == 0, err
    assert {s["path"] for s in seen} == {"/api/ask"}
    assert seen[0]["body"] == {"q": "Where is Normandy?", "case": "q1", "n": 1, "v": "A"}
    assert len(seen) == 16  # every item: one 429, then the answer
    with open_store() as s:
        items = {(r["case_id"], r["variant"]): r for r in s.live_items(out.strip())}
    it = items[("q1", "B")]
    assert all(r["attempts"] == 2 for r in items.values())
    assert it["assistant_version"] == "foreign-7"
    assert [c["id"] for c in json.loads(it["retrieved_json"])] == ["c1", "c2"]
    assert json.loads(it["scores_json"]) == pytest.approx([0.9, 0.8])
    assert it["answer"] == "Normandy is a region in France. [c1]"


def test_bad_input_exits_2_and_writes_nothing(live_project, brain, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    for args, msg in (
            (["--a", "ftp://x", "--b", "http://127.0.0.1:9"], "unknown target kind"),
            (["--a", "http://127.0.0.1:9", "--b", "http://127.0.0.1:9", "--auth-env",
              "NO_SUCH_KEY_VAR"], "NO_SUCH_KEY_VAR is not set"),
            (["--a", "python:no_such_mod_xyz:f", "--b", "http://127.0.0.1:9"], "cannot import"),
            (["--a", "http://127.0.0.1:9", "--b", "http://127.0.0.1:9", "--frozen-run", "nope"],
             "no run 'nope'"),
            (["--a", "http://127.0.0.1:9", "--b", "http://127.0.0.1:9", "--request-template",
              "{not json"], "not valid JSON")):
        code, out, err = invoke_live("--golden", "golden.jsonl", *args)
        assert code == 2, (args, err)
        assert msg in err and err.count("\n") == 1 and "Traceback" not in err
    if os.path.exists("results/abtest.duckdb"):
        with open_store() as s:
            assert s.query("SELECT count(*) AS n FROM runs")[0]["n"] == 0


def test_store_migration_adds_live_items(tmp_path):
    from abtest.store import Store

    with Store(tmp_path / "s.duckdb") as s:
        names = [r["name"] for r in s.query("SELECT name FROM _abtest_migrations ORDER BY name")]
        assert names[:2] == ["m001_initial", "m002_live"]
        assert "live_items" in s.RUN_TABLES


def test_live_claim_borrows_each_judge_validation_only_from_the_same_judge():
    """A judge validated on the frozen run stands for the live run when the judge model is
    the same — judge by judge; a different judge model must be validated on its own."""
    import copy

    from abtest.core.models import Config
    from abtest.reporting.live import live_claim
    from support.sample_reports import BASE_REPORT as _BASE
    from support.sample_reports import judge_validation as _val

    live = copy.deepcopy(_BASE)
    live.update(kind="live", retriever="http", corpus_version="v9",
                versions={"a": ["a1"], "b": ["b1"]})
    live["metrics"].update(retrieval={}, latency={})
    none = {"n_labels": 0, "kappa": None, "ci_low": None, "validated": False,
            "reason": "0 human label(s) of its items (need 30)"}
    live["judge_validation"] = {j: dict(none) for j in ("pairwise", "faithfulness", "coverage",
                                                         "abstention")}
    frozen = copy.deepcopy(_BASE)
    frozen["run_id"] = "frozen-1"
    frozen["judge_validation"]["coverage"] = _val(0.3, 0.1, ok=False)
    c = live_claim(live, Config(), frozen)
    # faithfulness and abstention come from the frozen run; coverage failed there too
    assert c["reasons"] == ["coverage judge not validated: 0 human label(s) of its items (need 30)"]
    frozen["judge_validation"]["coverage"] = _val(0.9, 0.8)
    c = live_claim(live, Config(), frozen)
    assert c["licensed"] and c["sentence"].startswith("End to end, with retriever http on corpus v9")
    frozen["models"]["judge"]["requested"] = "openai/another-judge"
    c = live_claim(live, Config(), frozen)
    assert [r.split(":")[0] for r in c["reasons"]] == [
        "faithfulness judge not validated", "coverage judge not validated",
        "abstention judge not validated"]


def test_frozen_and_live_runs_use_one_judge_plan(monkeypatch):
    """The same judges, on the same inputs per answer, in a frozen and a live run: relevance
    by embedding in both when an embedding model is configured (it was an LLM rating live)."""
    from abtest import judges as J
    from abtest.judges.plan import JudgeInputs, judge_tasks
    from abtest.livecheck.run import build_case, judge_question
    from abtest.core.models import Config

    seen: list[tuple] = []

    def rec(name):
        def fn(gw, spec, case, *args, **kw):
            variant = next((a for a in args if a in ("A", "B")), kw.get("orders"))
            seen.append((name, str(variant), tuple(c.id for c in case.context)))
            if name == "key_points":
                return ["a point"], None
            if name == "claims":
                return [({"case_id": case.id, "judge": "faithfulness", "subject": variant}, [])]
            if name == "pairwise":
                return [{"case_id": case.id, "judge": "pairwise", "subject": kw["orders"][0]}]
            return {"case_id": case.id, "judge": name, "subject": variant}
        return fn

    for name, attr in (("pairwise", "pairwise"), ("claims", "claims_and_abstention"),
                       ("key_points", "key_points_for"), ("coverage", "coverage"),
                       ("rubric", "rubric"), ("relevance_embedding", "relevance_by_embedding")):
        monkeypatch.setattr(J, attr, rec(name))
    cfg = Config(judges=["pairwise", "faithfulness", "coverage", "abstention", "quality",
                         "relevance"], embedding={"model": "fake/embedder"})
    q = {"id": "q1", "question": "When?", "answerable": True, "reference_answer": "at nine"}
    chunks = {"A": [{"id": "a1", "text": "x"}], "B": [{"id": "b1", "text": "y"}]}
    answers = {"A": "at nine [a1]", "B": "at ten [b1]"}

    for task in judge_tasks(None, cfg, JudgeInputs.frozen(build_case(q, chunks["A"],
                                                                      retriever="r",
                                                                      corpus_version="v"),
                                                           answers)):
        task()
    frozen, seen[:] = sorted((n, v) for n, v, _ in seen), []

    class Store:
        def put_checks(self, *a, **k):
            pass

        def put_judgment(self, *a, **k):
            pass

    items = {v: {"answer": answers[v], "retrieved_json": json.dumps(chunks[v])} for v in "AB"}
    assert judge_question(None, cfg, Store(), "run", q, items, citation_pattern=None,
                          corpus_version="v") == []
    live = sorted((n, v) for n, v, _ in seen)
    assert live == frozen
    assert ("relevance_embedding", "A") in live and ("rubric", "A") in live  # quality
    # live: each answer is judged against what its own system retrieved; pairwise sees both
    ctx = {(n, v): c for n, v, c in seen}
    assert ctx[("claims", "A")] == ("a1",) and ctx[("claims", "B")] == ("b1",)
    assert ctx[("pairwise", "('AB',)")] == ("a1", "b1")


def test_a_figure_measured_two_ways_is_not_divided():
    from abtest.reporting.live import frozen_comparison_rows

    def rep(method):
        return {"metrics": {"relevance": {"a": 0.5, "b": 0.7, "difference": 0.2,
                                          "method": method}},
                "per_case": [{"case_id": "q1", "finished": True, "relevance_a": 0.5,
                              "relevance_b": 0.7}]}

    same = frozen_comparison_rows(rep("embedding"), rep("embedding"))[0]
    assert same["ratio"] == pytest.approx(1.0) and same["survival"] == "survived"
    two = frozen_comparison_rows(rep("embedding"), rep("LLM 0-1 rating"))[0]
    assert two["ratio"] is None and two["survival"].startswith("not comparable")


def test_frozen_vs_live_uses_exactly_the_cases_both_runs_finished(live_project, brain):
    """The frozen run covers q1..q4; the live run asks q1, q2, q4 and a question the fixture
    does not have. Each frozen and live figure is the mean over the shared cases only."""
    from abtest.reporting.build import build_report
    from abtest.reporting.live import build_live_report, render_live

    fid = frozen_run_id()
    golden = [q for q in GOLDEN if q["id"] != "q3"] + [
        {"id": "q9", "question": "Who founded Normandy?", "reference_answer": "Rollo"}]
    Path("golden2.jsonl").write_text("\n".join(json.dumps(q) for q in golden) + "\n")
    a, b = servers()
    with a, b:
        code, out, err = invoke_live("--golden", "golden2.jsonl", "--a", a.url, "--b", b.url,
                                     "--frozen-run", fid)
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    with open_store() as s:
        rep = build_live_report(s, run_id).as_dict()
        frozen = build_report(s, fid).as_dict()
    cc = rep["frozen_comparison_cases"]
    assert (cc["n"], cc["frozen_only"], cc["live_only"]) == (3, 1, 1)
    shared = ["q1", "q2", "q4"]
    fr = {r["case_id"]: r for r in frozen["per_case"]}
    lr = {r["case_id"]: r for r in rep["per_case"]}
    score = {"B": 1.0, "A": 0.0, "tie": 0.5}
    rows = {r["metric"]: r for r in rep["frozen_comparison"]}
    # pairwise: B's win score (ties half) minus A's, over the three shared cases
    want_f = sum(2 * score[fr[c]["pairwise"]] - 1 for c in shared) / 3
    want_l = sum(2 * score[lr[c]["pairwise"]] - 1 for c in shared) / 3
    assert rows["pairwise"]["n"] == 3
    assert rows["pairwise"]["frozen_difference"] == pytest.approx(want_f)
    assert rows["pairwise"]["live_difference"] == pytest.approx(want_l)
    # the whole frozen run's figure (over q1..q4) is not what is compared
    assert frozen["metrics"]["pairwise"]["difference"] != pytest.approx(want_f)
    ids = [c for c in shared if fr[c].get("faithfulness_a") is not None and
           fr[c].get("faithfulness_b") is not None and lr[c].get("faithfulness_a") is not None
           and lr[c].get("faithfulness_b") is not None]
    f = rows["faithfulness"]
    assert f["n"] == len(ids) and f["frozen_b"] == pytest.approx(
        sum(fr[c]["faithfulness_b"] for c in ids) / len(ids))
    unans = rows["abstention_unanswerable"]
    assert unans["n"] == 1 and unans["frozen_b"] == 1.0 and unans["live_a"] == 0.0
    assert "citation_accuracy" not in rows  # no per-case value: not compared
    md = render_live(rep, "md")
    assert "Over the 3 case(s) both runs finished (1 only in the frozen run, 1 only in the live " \
           "run)" in md
    html = render_live(rep, "html")
    assert "<pre" not in html and '<section id="frozen-vs-live">' in html
    assert "Over the 3 case(s) both runs finished" in html


def live_beside_frozen(extra_question: str) -> tuple[str, dict]:
    """A live run of the golden questions plus one, beside a frozen run: (run id, report)."""
    from abtest.reporting.live import build_live_report

    golden = GOLDEN + [{"id": "q5", "question": extra_question, "reference_answer": "x"}]
    Path("golden-extra.jsonl").write_text("\n".join(json.dumps(q) for q in golden) + "\n")
    fid = frozen_run_id()
    a, b = servers()
    with a, b:
        code, out, err = invoke_live("--golden", "golden-extra.jsonl", "--a", a.url, "--b",
                                     b.url, "--frozen-run", fid)
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    with open_store() as s:
        return run_id, build_live_report(s, run_id).as_dict()


def test_the_live_html_report_is_a_page_with_escaped_text(live_project, brain):
    """A real page (sections, tables, the two claims apart), parsed as XML: model and question
    text with markup stays text."""
    import xml.etree.ElementTree as ET

    from abtest.reporting.live import render_live

    run_id, rep = live_beside_frozen("<script>alert(1)</script> & \"Normandy\"?")
    html = render_live(rep, "html")
    root = ET.fromstring(html.split("\n", 1)[1])
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    assert {"claims", "frozen-claim", "live-claim", "frozen-vs-live", "metrics", "gate",
            "cases"} <= ids
    assert not [e for e in root.iter("script")]
    assert "<script>alert(1)</script>" in "".join(root.itertext())
    r = CliRunner().invoke(cli, ["report", run_id, "--format", "html"])
    assert r.exit_code == 0 and 'id="live-claim"' in r.stdout and "<pre" not in r.stdout


@pytest.mark.chromium
def test_chromium_builds_the_live_page(live_project, brain, tmp_path):
    from support.browser import CHROMIUM, chromium_cli as _chromium

    from abtest.reporting.live import render_live

    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium not installed (scripts/test installs Debian 'chromium')")
    _, rep = live_beside_frozen("<img src=x onerror=alert(1)> Normandy?")
    page = tmp_path / "live.html"
    page.write_text(render_live(rep, "html"), encoding="utf-8")
    proc = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    for sid in ("frozen-claim", "live-claim", "frozen-vs-live", "forest-plot", "cases"):
        assert f'id="{sid}"' in dom, sid
    assert "<img" not in dom.lower() and "&lt;img src=x onerror=alert(1)&gt;" in dom
    assert dom.count("<details") == len(rep["per_case"]) + len(rep["incidents"])
