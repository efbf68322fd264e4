"""abtest.review: blind pack export, label import, agreement, status and PPI (hermetic)."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from abtest import review as R
from abtest.review.items import run_tag
from abtest.errors import UserError
from abtest.fixtures import load_fixture, write_fixture
from abtest.models import Case, Chunk, Config
from abtest.store import Store

RUN = "run-grounded-vs-plain"          # a run id named after the variants: must not leak
VARIANT_A, VARIANT_B = "plain-wording-v1", "grounded-citations-v2"
PATH_A, PATH_B = "variants/plain_wording.yaml", "variants/grounded_citations.yaml"
SHA_A, SHA_B = "a" * 64, "b" * 64

# case -> (verdict of the A-first order, verdict of the B-first order), mapped to variants
PAIRWISE = {
    "c01": ("B", "B"), "c02": ("A", "A"), "c03": ("B", "A"), "c04": ("tie", "tie"),
    "c05": ("B", "B"), "c06": ("A", "B"), "c07": ("B", "B"), "c08": ("B", "tie"),
    "c09": ("A", "A"), "c10": ("B", "B"),
}
FLAGGED = {"c03", "c06", "c08"}  # the two orders disagree
# claim verdicts per (case, variant): two claims each
CLAIMS = {
    (cid, v): [("supported", "x1") if (i + (v == "B")) % 3 else ("not_in_context", None),
               ("supported", "x2") if (i + (v == "A")) % 4 else ("contradicted", None)]
    for i, cid in enumerate(sorted(PAIRWISE)) for v in ("A", "B")
}


def _answer(cid: str, v: str) -> str:
    # a URL in the data must not count as a resource reference of the page
    return (f"Answer for {cid} by the {'first' if v == 'A' else 'second'} wording. "
            f"See https://example.org/{cid} </script><b>not markup</b>")


@pytest.fixture(scope="module")
def _template(tmp_path_factory):
    """Build the store once per module; each test gets its own copy of the file."""
    tmp_path = tmp_path_factory.mktemp("review")
    cases = [Case(id=cid, question=f"What about {cid}?", corpus_version="v1", retriever="bm25",
                  answerable=True, context=[Chunk(id="x1", text=f"Fact one about {cid}."),
                                            Chunk(id="x2", text=f"Fact two about {cid}.")])
             for cid in sorted(PAIRWISE)]
    fx = tmp_path / "fixtures" / "tiny"
    write_fixture(fx, cases, corpus_version="v1", retriever="bm25")
    s = Store(tmp_path / "s.duckdb")
    s.create_run({"run_id": RUN, "status": "complete", "fixture_name": "tiny",
                  "fixture_path": str(fx), "n_cases": len(cases),
                  "fixture_sha256": load_fixture(fx).cases_sha256,
                  "variant_a_name": VARIANT_A, "variant_a_sha256": SHA_A, "variant_a_path": PATH_A,
                  "variant_b_name": VARIANT_B, "variant_b_sha256": SHA_B, "variant_b_path": PATH_B,
                  "generator_model": "m", "judge_model": "j",
                  "config_json": Config().model_dump_json(), "info_json": "{}"})
    for cid, (ab, ba) in PAIRWISE.items():
        for v in ("A", "B"):
            s.put_generation({"run_id": RUN, "case_id": cid, "variant": v, "answer": _answer(cid, v),
                              "messages_json": json.dumps([{"role": "system",
                                                            "content": VARIANT_A if v == "A" else VARIANT_B}])})
        s.put_judgment({"run_id": RUN, "case_id": cid, "judge": "pairwise", "subject": "AB",
                        "verdict": ab, "rationale": "Response 1 is better"})
        s.put_judgment({"run_id": RUN, "case_id": cid, "judge": "pairwise", "subject": "BA",
                        "verdict": ba, "rationale": "Response 2 is better"})
        for v in ("A", "B"):
            cl = CLAIMS[(cid, v)]
            sup = sum(1 for verdict, _ in cl if verdict == "supported")
            s.put_judgment({"run_id": RUN, "case_id": cid, "judge": "faithfulness", "subject": v,
                            "verdict": "scored", "score": sup / len(cl)},
                           claims=[{"claim": f"{cid} {v} claim {k}", "verdict": verdict, "chunk_id": ch}
                                   for k, (verdict, ch) in enumerate(cl)])
    s.close()
    return tmp_path / "s.duckdb"


@pytest.fixture
def store(_template, tmp_path):
    shutil.copy(_template, tmp_path / "s.duckdb")
    s = Store(tmp_path / "s.duckdb")
    yield s
    s.close()


def _items(store):
    return {r["item_id"]: {**r, "m": json.loads(r["mapping_json"])} for r in store.review_items(RUN)}


def _blind(item, underlying: str) -> str:
    """The label a reviewer would give in the pack's blind space for an underlying A/B/tie."""
    if underlying == "tie" or item["judge"] != "pairwise":
        return underlying
    return next(k for k, v in item["m"]["sides"].items() if v == underlying)


def _by_key(store):
    return {it["m"]["key"]: it for it in _items(store).values()}


def _write_jsonl(path: Path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- export

def test_export_refuses_a_fixture_changed_since_the_run(store, tmp_path):
    src = Path(store.get_run(RUN)["fixture_path"])
    fx = tmp_path / "edited"
    shutil.copytree(src, fx)
    store.update_run(RUN, fixture_path=str(fx))
    cases_jsonl = fx / "cases.jsonl"
    cases_jsonl.write_text(cases_jsonl.read_text(encoding="utf-8").replace("Fact one", "Fact 1", 1),
                           encoding="utf-8")
    with pytest.raises(UserError, match="does not match its sealed sha256") as e:
        R.export_pack(store, RUN, tmp_path / "pack", n=6, seed=1)
    assert e.value.file == str(cases_jsonl)
    # re-captured at the same kind of path: sealed and valid, but not what the judges saw
    cases = [c.model_copy(update={"context": [Chunk(id="x1", text="Another fact.")]})
             for c in load_fixture(src).cases]
    write_fixture(tmp_path / "recaptured", cases, corpus_version="v2", retriever="bm25")
    store.update_run(RUN, fixture_path=str(tmp_path / "recaptured"))
    with pytest.raises(UserError, match=f"fixture changed since run {RUN}"):
        R.export_pack(store, RUN, tmp_path / "pack", n=6, seed=1)
    assert store.review_items(RUN) == [] and not (tmp_path / "pack").exists()


def test_export_writes_pack_and_store_rows(store, tmp_path):
    res = R.export_pack(store, RUN, tmp_path / "pack", n=6, seed=1)
    assert [Path(p).name for p in res["paths"]] == ["items.jsonl", "labels.csv", "review.html"]
    items = _items(store)
    # per judge: every flagged pairwise case (3), n = 6 agreed pairwise cases spread over the
    # judge's outcomes A (c02 c09), B (c01 c05 c07 c10), tie (c04) -> 2 / 3 / 1, and n = 6
    # claims spread over supported / unsupported -> 3 / 3
    assert res["n_items"] == len(items) == 3 + 6 + 6
    pw_cases = {it["case_id"] for it in items.values() if it["judge"] == "pairwise"}
    assert FLAGGED <= pw_cases
    assert res["counts"] == {"pairwise_flagged": 3, "pairwise_sampled": 6, "claims": 6,
                             "coverage_points": 0, "abstention_answers": 0}
    from collections import Counter

    agreed = Counter(it["judge_label"] for it in items.values()
                     if it["judge"] == "pairwise" and it["case_id"] not in FLAGGED)
    assert agreed == {"A": 2, "B": 3, "tie": 1}
    assert Counter(it["judge_label"] for it in items.values()
                   if it["judge"] == "faithfulness") == {"supported": 3, "unsupported": 3}
    for it in items.values():
        if it["judge"] == "pairwise":
            ab, ba = PAIRWISE[it["case_id"]]
            assert it["judge_label"] == (ab if ab == ba else "tie")
            assert it["m"]["position_inconsistent"] == (ab != ba)
            assert sorted(it["m"]["sides"].values()) == ["A", "B"]
        else:
            assert it["judge_label"] in ("supported", "unsupported")
    pub = [json.loads(x) for x in (tmp_path / "pack" / "items.jsonl").read_text().splitlines()]
    assert {p["item_id"] for p in pub} == set(items)
    with open(tmp_path / "pack" / "labels.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["item_id"] for r in rows] == [p["item_id"] for p in pub]
    assert all(r["label"] == "" for r in rows)


def test_export_is_seeded_and_reexport_keeps_ids(store, tmp_path):
    R.export_pack(store, RUN, tmp_path / "p1", n=6, seed=3)
    first = {k: (it["item_id"], it["m"].get("sides")) for k, it in _by_key(store).items()}
    R.export_pack(store, RUN, tmp_path / "p2", n=6, seed=3)
    assert (tmp_path / "p1" / "items.jsonl").read_text() == (tmp_path / "p2" / "items.jsonl").read_text()
    R.export_pack(store, RUN, tmp_path / "p3", n=12, seed=3)     # a bigger pack: a superset
    again = {k: (it["item_id"], it["m"].get("sides")) for k, it in _by_key(store).items()}
    assert all(again[k] == v for k, v in first.items())
    p3 = {json.loads(x)["item_id"] for x in (tmp_path / "p3" / "items.jsonl").read_text().splitlines()}
    assert {v[0] for v in first.values()} <= p3


def test_pack_is_blind(store, tmp_path):
    R.export_pack(store, RUN, tmp_path / "pack", n=1000, seed=0)   # every item
    items = _items(store)
    secrets = [VARIANT_A, VARIANT_B, PATH_A, PATH_B, "plain_wording", "grounded_citations",
               SHA_A, SHA_B, RUN, "Response 1 is better", "Response 2 is better", "mapping",
               "judge_label", "sides", "verdict", '"variant"', '"not_in_context"', '"contradicted"']
    for f in ("items.jsonl", "labels.csv", "review.html"):
        text = (tmp_path / "pack" / f).read_text()
        for s in secrets:
            assert s not in text, (f, s)
    pub = [json.loads(x) for x in (tmp_path / "pack" / "items.jsonl").read_text().splitlines()]
    for p in pub:
        assert set(p) <= {"item_id", "kind", "case_id", "question", "context", "task", "answer_1",
                          "answer_2", "claim", "answer", "allowed_labels", "label", "note"}
        assert not any(str(v) in ("A", "B") for v in p.values())
    # sides really are randomised per item, and answers follow the secret mapping
    firsts = [items[p["item_id"]]["m"]["sides"]["1"] for p in pub if p["kind"] == "pairwise"]
    assert set(firsts) == {"A", "B"}
    for p in pub:
        if p["kind"] == "pairwise":
            sides = items[p["item_id"]]["m"]["sides"]
            assert p["answer_1"] == _answer(p["case_id"], sides["1"])
            assert p["answer_2"] == _answer(p["case_id"], sides["2"])
    # item numbering follows the shuffled pack order, not (case, variant, idx)
    claim_ids = [p["item_id"] for p in pub if p["kind"] == "claim"]
    keys = [items[i]["m"]["key"] for i in sorted(claim_ids)]
    assert keys != sorted(keys)


def test_html_is_self_contained(store, tmp_path):
    R.export_pack(store, RUN, tmp_path / "pack", n=10, seed=0)
    html = (tmp_path / "pack" / "review.html").read_text()
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"<(link|img|iframe|object|embed)\b", html, re.I)
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.I)
    assert not re.search(r"@import|\burl\(", html, re.I)
    assert "fetch(" not in html and "XMLHttpRequest" not in html
    # the data island cannot be closed early by the answers' "</script>"
    assert html.count("</script>") == 2
    data = re.search(r'<script id="abtest-pack" type="application/json">(.*?)</script>', html, re.S)
    pack = json.loads(data.group(1))
    assert len(pack["items"]) == len(store.review_items(RUN))
    assert any("https://example.org/" in (it.get("answer_1") or it.get("answer") or "")
               for it in pack["items"])


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_html_download_format_is_importable(store, tmp_path):
    """Run the page's own payload builder (node, no DOM) and import what it produces."""
    R.export_pack(store, RUN, tmp_path / "pack", n=4, seed=0)
    html = (tmp_path / "pack" / "review.html").read_text()
    pack = json.loads(re.search(r'<script id="abtest-pack" type="application/json">(.*?)</script>',
                                html, re.S).group(1))
    app = re.search(r'<script id="abtest-app">(.*?)</script>', html, re.S).group(1)
    state = {it["item_id"]: {"label": it["allowed_labels"][-1], "note": "n"} for it in pack["items"][:5]}
    js = (app + "\nconst pack = " + json.dumps(pack) + ";\nconst state = " + json.dumps(state)
          + ";\nprocess.stdout.write(JSON.stringify(globalThis.abtestReview.buildPayload("
          "pack, state, ' Ada ', '2024-01-01T00:00:00Z')));\n")
    (tmp_path / "run.js").write_text(js)
    out = subprocess.run(["node", str(tmp_path / "run.js")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["format"] == R.DOWNLOAD_FORMAT and payload["reviewer"] == "Ada"
    f = tmp_path / "labels.json"
    f.write_text(out.stdout)
    assert R.import_labels(store, RUN, f) == 5
    assert {lab["reviewer"] for lab in store.human_labels(RUN)} == {"Ada"}


# ----------------------------------------------------------------------------- import

def test_round_trip_csv_jsonl_and_download(store, tmp_path):
    R.export_pack(store, RUN, tmp_path / "pack", n=1000, seed=0)
    items = _items(store)
    truth = {}                                  # item -> underlying label the reviewer means
    for iid, it in items.items():
        if it["judge"] == "pairwise":
            ab, ba = PAIRWISE[it["case_id"]]
            truth[iid] = ab if ab == ba else "B"
        else:
            truth[iid] = it["judge_label"]
    ids = sorted(items)
    # CSV: fill the template, leave some blank (skipped)
    with open(tmp_path / "pack" / "labels.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows[:10]:
        r["label"] = _blind(items[r["item_id"]], truth[r["item_id"]]).upper()  # case-insensitive
    with open(tmp_path / "filled.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert R.import_labels(store, RUN, tmp_path / "filled.csv", reviewer="ann") == 10
    # JSONL: the pack's items.jsonl, filled in
    pub = [json.loads(x) for x in (tmp_path / "pack" / "items.jsonl").read_text().splitlines()]
    for p in pub:
        p["label"] = _blind(items[p["item_id"]], truth[p["item_id"]])
    assert R.import_labels(store, RUN, _write_jsonl(tmp_path / "f.jsonl", pub), reviewer="bob") == len(pub)
    # the page's download format, reviewer from the file
    doc = {"format": R.DOWNLOAD_FORMAT, "version": 1, "pack_id": "x", "reviewer": "cy",
           "labels": [{"item_id": i, "label": _blind(items[i], truth[i]), "note": ""} for i in ids[:3]]}
    (tmp_path / "dl.json").write_text(json.dumps(doc))
    assert R.import_labels(store, RUN, tmp_path / "dl.json") == 3
    labels = store.human_labels(RUN)
    assert len(labels) == 10 + len(pub) + 3
    assert {lab["reviewer"] for lab in labels} == {"ann", "bob", "cy"}
    for lab in labels:                          # stored in variant space, never "1"/"2"
        assert lab["label"] == truth[lab["item_id"]]
        assert lab["created_at"] is not None and lab["judge"] == items[lab["item_id"]]["judge"]
    # re-importing the same file replaces, it does not duplicate
    assert R.import_labels(store, RUN, tmp_path / "dl.json") == 3
    assert len(store.human_labels(RUN)) == len(labels)


@pytest.mark.parametrize("bad, where, needle", [
    ("unknown", "line 3", "unknown item 'nope'"),
    ("value", "line 3", "is not one of"),
    ("duplicate", "line 3", "labelled twice"),
])
def test_bad_labels_import_nothing(store, tmp_path, bad, where, needle):
    R.export_pack(store, RUN, tmp_path / "pack", n=10, seed=0)
    items = _items(store)
    ids = sorted(items)
    rows = [{"item_id": ids[0], "label": "tie" if items[ids[0]]["judge"] == "pairwise" else "supported"},
            {"item_id": ids[1], "label": "tie" if items[ids[1]]["judge"] == "pairwise" else "supported"}]
    if bad == "unknown":
        rows.append({"item_id": "nope", "label": "tie"})
    elif bad == "value":
        rows.append({"item_id": ids[2], "label": "maybe"})
    else:
        rows.append(dict(rows[0]))
    f = _write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(UserError) as ei:
        R.import_labels(store, RUN, f, reviewer="ann")
    e = ei.value
    assert e.file == str(f) and e.where == where and needle in e.message
    assert "nothing imported" in e.message
    assert store.human_labels(RUN) == []


def test_bad_labels_csv_names_line_and_item(store, tmp_path):
    R.export_pack(store, RUN, tmp_path / "pack", n=10, seed=0)
    items = _items(store)
    claim = next(i for i, it in items.items() if it["judge"] == "faithfulness")
    pw = next(i for i, it in items.items() if it["judge"] == "pairwise")
    f = tmp_path / "bad.csv"
    f.write_text(f"item_id,label\n{pw},1\n{claim},1\n")   # "1" is a pairwise label only
    with pytest.raises(UserError) as ei:
        R.import_labels(store, RUN, f, reviewer="ann")
    assert ei.value.where == "line 3" and claim in ei.value.message
    assert str(f) in ei.value.line()
    assert store.human_labels(RUN) == []
    # labels from another run's pack are unknown here (run-specific item ids)
    g = tmp_path / "other.csv"
    g.write_text(f"item_id,label\n{run_tag('other-run')}-p0001,1\n")
    with pytest.raises(UserError, match="unknown item"):
        R.import_labels(store, RUN, g)
    h = tmp_path / "blank.csv"
    h.write_text(f"item_id,label\n{pw},\n")
    with pytest.raises(UserError, match="no labels"):
        R.import_labels(store, RUN, h)
    assert store.human_labels(RUN) == []


def test_import_without_pack_is_a_user_error(store, tmp_path):
    f = _write_jsonl(tmp_path / "x.jsonl", [{"item_id": "a", "label": "tie"}])
    with pytest.raises(UserError, match="review export"):
        R.import_labels(store, RUN, f)


# ----------------------------------------------------------------------------- agreement

# underlying human labels (pairwise) chosen for a hand-computed kappa
HUMAN_PW = {"c01": "B", "c02": "A", "c05": "A", "c07": "B", "c09": "A", "c10": "tie", "c04": "tie",
            "c03": "B", "c06": "B", "c08": "tie"}


def _label_all_pairwise_and_10_claims(store, tmp_path):
    R.export_pack(store, RUN, tmp_path / "pack", n=1000, seed=0)
    items = _items(store)
    rows = []
    for iid, it in items.items():
        if it["judge"] == "pairwise":
            rows.append({"item_id": iid, "label": _blind(it, HUMAN_PW[it["case_id"]])})
    # claims: judge sup & human sup 4, sup/uns 1, uns/sup 2, uns/uns 3
    want = [("supported", "supported")] * 4 + [("supported", "unsupported")] + \
           [("unsupported", "supported")] * 2 + [("unsupported", "unsupported")] * 3
    claims = sorted((it["m"]["key"], iid) for iid, it in items.items() if it["judge"] == "faithfulness")
    pools = {"supported": [i for _, i in claims if items[i]["judge_label"] == "supported"],
             "unsupported": [i for _, i in claims if items[i]["judge_label"] == "unsupported"]}
    for j, h in want:
        rows.append({"item_id": pools[j].pop(0), "label": h})
    R.import_labels(store, RUN, _write_jsonl(tmp_path / "l.jsonl", rows), reviewer="ann")
    return items


def test_agreement_matches_hand_computed_kappa(store, tmp_path):
    _label_all_pairwise_and_10_claims(store, tmp_path)
    ag = R.agreement(store, RUN)
    # claims: po = 7/10, pe = (5*6 + 5*4)/100 = 0.5, kappa = (0.7 - 0.5)/(1 - 0.5) = 0.4
    fa = ag["faithfulness"]
    assert fa["n"] == 10
    assert fa["agreement"] == pytest.approx(0.7)
    assert fa["kappa"] == pytest.approx(0.4)
    assert fa["ci_low"] < 0.4 < fa["ci_high"]
    assert fa["confusion"] == {"supported": {"supported": 4, "unsupported": 1},
                               "unsupported": {"supported": 2, "unsupported": 3}}
    # pairwise, position-consistent items only (c01 c02 c04 c05 c07 c09 c10):
    # judge  B A tie B B A B ; human B A tie A B A tie -> po = 5/7
    # judge marginals A2 B4 tie1, human A3 B2 tie2 -> pe = (6 + 8 + 2)/49 = 16/49
    # kappa = (35/49 - 16/49) / (33/49) = 19/33
    pw = ag["pairwise"]
    assert pw["n"] == 7
    assert pw["agreement"] == pytest.approx(5 / 7)
    assert pw["kappa"] == pytest.approx(19 / 33)
    # position-inconsistent items reported separately: c03 (B,A) c06 (A,B) c08 (B,tie)
    pi = pw["position_inconsistent"]
    assert pi["n"] == 3
    assert pi["human_labels"] == {"B": 2, "tie": 1}
    assert pi["agree_with_ab_order"] == pytest.approx(1 / 3)
    assert pi["agree_with_ba_order"] == pytest.approx(2 / 3)
    assert pw["all_items"]["n"] == 10
    assert ag["reviewers"] == ["ann"]


def test_status_counts_and_report_compatibility(store, tmp_path):
    st = R.status(store, RUN)
    assert st["n_items"] == 0 and not st["validated"]
    assert "review export" in st["message"]
    _label_all_pairwise_and_10_claims(store, tmp_path)
    st = R.status(store, RUN)
    n_items = len(store.review_items(RUN))
    assert st["n_items"] == n_items == 10 + 40      # all pairwise cases + every claim
    assert st["n_labelled_items"] == 20 and st["n_unlabelled_items"] == 30
    assert st["min_labels"] == 30 and st["min_kappa"] == 0.6
    assert st["by_judge"] == {"pairwise": {"items": 10, "labelled_items": 10, "labels": 10},
                              "faithfulness": {"items": 40, "labelled_items": 10, "labels": 10}}
    val = st["validation"]
    # labels are never pooled: each judge has only its own
    assert val["pairwise"]["n_labels"] == 10 and val["faithfulness"]["n_labels"] == 10
    assert val["faithfulness"]["kappa"] == pytest.approx(0.4)  # hand computed below
    assert "10 human label(s) of its items (need 30)" in val["faithfulness"]["reason"]
    assert "faithfulness: 10 human label(s)" in st["message"] and not st["validated"]
    # the report's judge validation reads the same rows and gets the same kappas
    from abtest.reporting.build import build_report

    rep_val = build_report(store, RUN)["judge_validation"]
    for j in ("pairwise", "faithfulness", "coverage", "abstention"):
        assert rep_val[j] == pytest.approx(val[j])
    st2 = R.status(store, RUN, min_labels=10, min_kappa=0.3)
    assert st2["validation"]["faithfulness"]["n_labels"] == 10
    # kappa 0.4 > 0.3, but its lower 95% limit is not: still not validated
    assert st2["validation"]["faithfulness"]["ci_low"] < 0.3
    assert st2["validation"]["faithfulness"]["validated"] is False
    text = R.render_status(st)
    assert "faithfulness" in text and "not validated" in text
    assert "position-inconsistent items: 3" in text and "PPI" in text


# ----------------------------------------------------------------------------- PPI

def test_ppi_mean_ci_hand_computed():
    # judge on N = 6: mean 4/6; var(ddof=1) = (4*(1/3)^2 + 2*(2/3)^2)/5 = 4/15
    # labelled n = 3: judge - human = [0, -1, 0], mean -1/3; var(ddof=1) = 1/3
    # theta = 2/3 + 1/3 = 1; se^2 = (4/15)/6 + (1/3)/3 = 2/45 + 1/9 = 7/45
    est, lo, hi = R.ppi_mean_ci([1, 0, 1, 1, 0, 1], [1, 0, 1], [1, 1, 1], alpha=0.05)
    half = 1.959963984540054 * math.sqrt(7 / 45)
    assert est == pytest.approx(1.0)
    assert lo == pytest.approx(1.0 - half) and hi == pytest.approx(1.0 + half)
    assert (lo, hi) == pytest.approx((0.226980, 1.773020), abs=1e-6)
    # alpha is honoured (ppi_py's default would be 0.1)
    _, lo90, hi90 = R.ppi_mean_ci([1, 0, 1, 1, 0, 1], [1, 0, 1], [1, 1, 1], alpha=0.1)
    assert hi90 - lo90 == pytest.approx(2 * 1.6448536269514722 * math.sqrt(7 / 45))
    est1, lo1, hi1 = R.ppi_mean_ci([1, 0], [1], [0])
    assert est1 == pytest.approx(-0.5) and lo1 is None and hi1 is None
    with pytest.raises(ValueError):
        R.ppi_mean_ci([1, 0], [1, 0], [1])


def test_ppi_difference_uses_per_case_differences():
    ja, jb = [0.2, 0.4, 0.6, 0.8], [0.5, 0.5, 0.9, 0.9]
    r = R.ppi_difference(ja, jb, [0.2, 0.6], [0.5, 0.9], [0.0, 0.5], [0.5, 1.0])
    d = R.ppi_mean_ci(np.subtract(jb, ja), [0.3, 0.3], [0.5, 0.5])
    assert r == pytest.approx(d)
    # theta = mean([.3,.1,.3,.1]) - mean([.3-.5, .3-.5]) = 0.2 + 0.2
    assert r.estimate == pytest.approx(0.4)


def test_ppi_fixes_a_biased_judge_where_judge_only_ci_misses():
    rng = np.random.default_rng(7)
    truth = rng.binomial(1, 0.6, size=1000).astype(float)
    judge = truth + 0.2                          # noise-free bias on every case
    lab = rng.choice(1000, size=50, replace=False)
    est, lo, hi = R.ppi_mean_ci(judge, judge[lab], truth[lab], alpha=0.05)
    j_est, j_lo, j_hi = R.mean_ci(judge, alpha=0.05)
    for target in (truth.mean(), 0.6):           # the sample's and the population's mean
        assert lo <= target <= hi
        assert not (j_lo <= target <= j_hi)
    assert est == pytest.approx(truth.mean())
    assert j_est == pytest.approx(truth.mean() + 0.2)


def test_ppi_coverage_with_a_noisy_biased_judge():
    rng = np.random.default_rng(11)
    hits, reps = 0, 400
    for _ in range(reps):
        truth = rng.normal(0.5, 0.2, size=600)
        judge = truth + 0.15 + rng.normal(0, 0.1, size=600)
        lab = rng.choice(600, size=60, replace=False)
        _, lo, hi = R.ppi_mean_ci(judge, judge[lab], truth[lab])
        hits += lo <= 0.5 <= hi
    assert 0.91 <= hits / reps <= 0.985


def test_ppi_stratified_single_stratum_and_census():
    f = np.arange(20, dtype=float) % 3
    idx = [0, 4, 9, 13]
    y = f[idx] - np.array([0.5, 0.0, 0.25, 0.75])
    est, lo, hi = R.ppi_stratified_ci(f, ["s"] * 20, idx, y)
    est0, _, _ = R.ppi_mean_ci(f, f[idx], y)
    assert est == pytest.approx(est0)            # same point estimate; CI adds the fpc
    # every case labelled: the estimate is the human mean and only the judge term is left
    est_c, lo_c, hi_c = R.ppi_stratified_ci(f, ["s"] * 20, range(20), f - 1.0)
    assert est_c == pytest.approx((f - 1.0).mean())
    jm, jlo, jhi = R.mean_ci(f)
    assert hi_c - lo_c == pytest.approx(jhi - jlo)


def test_ppi_headlines_pairwise_hand_computed(store, tmp_path):
    R.export_pack(store, RUN, tmp_path / "pack", n=1000, seed=0)
    by_case = {it["case_id"]: it for it in _items(store).values() if it["judge"] == "pairwise"}
    chosen = {"c03": "B", "c06": "A", "c02": "A", "c09": "B", "c01": "B", "c05": "A", "c04": "tie"}
    rows = [{"item_id": by_case[c]["item_id"], "label": _blind(by_case[c], lab)}
            for c, lab in chosen.items()]
    R.import_labels(store, RUN, _write_jsonl(tmp_path / "l.jsonl", rows), reviewer="ann")
    h = R.ppi_headlines(store, RUN)["pairwise"]
    # judge scores (B=1, tie=.5, A=0) over c01..c10: 1 0 .5 .5 1 .5 1 .5 0 1 -> mean .6
    # var(ddof=1) = 1.4/9; judge term 1.4/90. Strata (r = (f - y)/10):
    # flagged c03 c06 c08 (N=3): c03 (.5-1)/10, c06 (.5-0)/10 -> mean 0; var .005;
    #   9 * (1 - 2/3) * .005 / 2 = .0075
    # agreed A: c02 c09 (N=2, all labelled): 0, (0-1)/10 -> mean -.05, x2 = -.1, var term 0
    # agreed B: c01 c05 c07 c10 (N=4): 0, .1 -> mean .05, x4 = .2; 16 * (1/2) * .005 / 2 = .02
    # agreed tie: c04 (N=1, labelled): 0
    # win rate = .6 - (0 - .1 + .2 + 0) = .5; difference = .5 - .5 = 0
    half = 1.959963984540054 * math.sqrt(1.4 / 90 + 0.0075 + 0.02)
    assert h["N"] == 10 and h["n_labelled"] == 7
    assert h["judge_only"]["estimate"] == pytest.approx(0.1)
    assert h["judge_only"]["ci_high"] - h["judge_only"]["ci_low"] == pytest.approx(
        2 * 1.959963984540054 * math.sqrt(1.4 / 90))
    assert h["ppi"]["estimate"] == pytest.approx(0.0, abs=1e-12)
    assert h["ppi"]["ci_low"] == pytest.approx(-half) and h["ppi"]["ci_high"] == pytest.approx(half)
    assert half == pytest.approx(0.406689, abs=1e-6)


def test_ppi_headlines_faithfulness(store, tmp_path):
    assert R.ppi_headlines(store, RUN)["faithfulness"]["ppi"]["estimate"] is None
    R.export_pack(store, RUN, tmp_path / "pack", n=1000, seed=0)
    items = _items(store)
    # humans agree with the judge on a few claims of each stratum: no correction
    rows, seen = [], {"supported": 0, "unsupported": 0}
    for iid in sorted(items):
        it = items[iid]
        if it["judge"] == "faithfulness" and seen[it["judge_label"]] < 3:
            seen[it["judge_label"]] += 1
            rows.append({"item_id": iid, "label": it["judge_label"]})
    R.import_labels(store, RUN, _write_jsonl(tmp_path / "l.jsonl", rows), reviewer="ann")
    fa = R.ppi_headlines(store, RUN)["faithfulness"]
    assert fa["N"] == 10 and fa["n_labelled"] == 6
    assert fa["ppi"]["estimate"] == pytest.approx(fa["judge_only"]["estimate"])
    assert fa["ppi"]["ci_low"] == pytest.approx(fa["judge_only"]["ci_low"])
    # judge-only = mean over cases of (supported share of B - of A)
    scores = {k: sum(v == "supported" for v, _ in cl) / 2 for k, cl in CLAIMS.items()}
    assert fa["judge_only"]["estimate"] == pytest.approx(
        np.mean([scores[(c, "B")] - scores[(c, "A")] for c in PAIRWISE]))
    # one human says a judged-supported claim of B is unsupported: B's share drops by
    # (1/2)/10 within that stratum's estimate, scaled up by N_h / n_h
    sup_b = next(r for r in rows if items[r["item_id"]]["judge_label"] == "supported")
    flip = [{"item_id": sup_b["item_id"], "label": "unsupported"}]
    R.import_labels(store, RUN, _write_jsonl(tmp_path / "flip.jsonl", flip), reviewer="bob")
    fb = R.ppi_headlines(store, RUN)["faithfulness"]
    sign = 1 if items[sup_b["item_id"]]["m"]["variant"] == "B" else -1
    n_sup = sum(1 for (c, v), cl in CLAIMS.items() for verdict, _ in cl if verdict == "supported")
    # the flipped item's y is the mean of two reviewers (1 and 0) -> r = sign*(1-.5)/(10*2)
    expect = fa["ppi"]["estimate"] - n_sup * (sign * 0.5 / 20) / 3
    assert fb["ppi"]["estimate"] == pytest.approx(expect)


def test_read_only_store_is_a_user_error(_template, tmp_path):
    shutil.copy(_template, tmp_path / "ro.duckdb")
    with Store(tmp_path / "ro.duckdb", read_only=True) as ro:
        with pytest.raises(UserError, match="read-only"):
            R.export_pack(ro, RUN, tmp_path / "pack", n=2)


# ----------------------------------------------------------------------------- CLI round trip

def _cli(*args):
    from click.testing import CliRunner

    from abtest.cli import cli

    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def _fill_labels_csv(src: Path, dst: Path, truth: dict[str, str], only=None) -> int:
    """Copy the pack's labels.csv with the blind label of each item (of `only`, if given)."""
    with open(src, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    k = 0
    for r in rows:
        if only is None or r["item_id"] in only:
            r["label"] = truth[r["item_id"]]
            k += 1
    with open(dst, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return k


def test_cli_review_round_trip_validates_the_judge(project):
    """run → review export → labels.csv filled with the judge's own verdicts (blind space)
    → review import → status → report: each judge's validation reason goes once enough of
    its own labels agree.

    The report (and `review status`) read review.min_labels from the run's stored config,
    so the threshold is set in abtest.yaml before `abtest run`."""
    from fakes import Brain, install

    brain = install(Brain())
    plain_cov = brain.j_coverage

    def coverage(prompt):  # A's answer to q2 (no citation) misses its key point
        out = plain_cov(prompt)
        if "Rollo" in prompt and "[c2]" not in prompt:
            out = {"points": {k: False for k in out["points"]}}
        return out

    brain.j_coverage = coverage
    n_min = 5
    cfg = project / "abtest.yaml"
    cfg.write_text(cfg.read_text() + f"review: {{min_labels: {n_min}}}\n")
    code, out, err = _cli("run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                          "--b", "variants/b.yaml")
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]

    code, out, err = _cli("review", "export", run_id, "--out", "pack")
    assert code == 0, err
    assert [Path(p).name for p in out.split()] == list(R.PACK_FILES)

    # the answer key: the judge's own label, mapped into the pack's blind space
    with Store(project / "results" / "abtest.duckdb", read_only=True) as s:
        items = {r["item_id"]: {**r, "m": json.loads(r["mapping_json"])} for r in s.review_items(run_id)}
    truth = {iid: _blind(it, it["judge_label"]) for iid, it in items.items()}
    from collections import Counter

    by_judge = Counter((it["judge"], it["judge_label"]) for it in items.values())
    # fake judge: B wins q1-q3 in both orders, q4 ties; q1-q3 claims supported, A's q4 not
    # (B's q4 is a refusal: no claim); key points of q1-q3 covered except A's q2; only B's
    # q4 answer abstains
    assert by_judge == {("pairwise", "B"): 3, ("pairwise", "tie"): 1,
                        ("faithfulness", "supported"): 6, ("faithfulness", "unsupported"): 1,
                        ("coverage", "covered"): 5, ("coverage", "not_covered"): 1,
                        ("abstention", "answered"): 7, ("abstention", "abstained"): 1}
    assert {truth[i] for i, it in items.items() if it["judge_label"] == "B"} <= {"1", "2"}

    # phase 1: fewer labels than review.min_labels for every judge
    first = {next(i for i, it in sorted(items.items()) if it["judge_label"] == lab)
             for lab in ("B", "tie", "supported", "unsupported", "covered", "not_covered",
                         "abstained", "answered")}
    few = _fill_labels_csv(project / "pack" / "labels.csv", project / "few.csv", truth, first)
    assert few == 8
    code, out, err = _cli("review", "import", run_id, "few.csv", "--reviewer", "alice")
    assert code == 0, err
    assert out.strip() == "imported 8 label(s)"
    code, out, err = _cli("review", "status", run_id, "--format", "json")
    assert code == 0, err
    st = json.loads(out)
    assert (st["n_items"], st["n_labelled_items"]) == (25, 8)
    assert (st["min_labels"], st["validated"]) == (n_min, False)
    for j in ("pairwise", "faithfulness", "coverage", "abstention"):
        assert st["validation"][j]["n_labels"] == 2 and st["validation"][j]["kappa"] == 1.0
        assert not st["validation"][j]["validated"]
    assert st["reviewers"] == ["alice"]
    code, out, err = _cli("report", run_id, "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["judge_validation"]["validated"] is False
    assert rep["judge_validation"]["faithfulness"]["n_labels"] == 2
    assert {r.split(":")[0] for r in rep["claim"]["reasons"] if "judge not validated" in r} == {
        "faithfulness judge not validated", "coverage judge not validated",
        "abstention judge not validated"}

    # phase 2: every item labelled (re-importing alice's eight replaces them)
    n_all = _fill_labels_csv(project / "pack" / "labels.csv", project / "all.csv", truth)
    assert n_all == len(items) == 25
    code, out, err = _cli("review", "import", run_id, "all.csv", "--reviewer", "alice")
    assert code == 0, err
    assert out.strip() == "imported 25 label(s)"
    code, out, err = _cli("review", "status", run_id, "--format", "json")
    assert code == 0, err
    st = json.loads(out)
    assert (st["n_labelled_items"], st["n_unlabelled_items"]) == (25, 0)
    assert st["by_judge"] == {"pairwise": {"items": 4, "labelled_items": 4, "labels": 4},
                              "faithfulness": {"items": 7, "labelled_items": 7, "labels": 7},
                              "coverage": {"items": 6, "labelled_items": 6, "labels": 6},
                              "abstention": {"items": 8, "labelled_items": 8, "labels": 8}}
    assert st["validated"] is True
    # pairwise has 4 < 5 labels: reported, not part of the claim
    assert st["validation"]["pairwise"]["validated"] is False
    code, out, err = _cli("report", run_id, "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    val = rep["judge_validation"]
    assert val["validated"] is True and val["min_labels"] == n_min
    for j, n in (("faithfulness", 7), ("coverage", 6), ("abstention", 8)):
        assert val[j]["validated"] and val[j]["n_labels"] == n and val[j]["kappa"] == 1.0
    assert not any("judge not validated" in r for r in rep["claim"]["reasons"])
    with Store(project / "results" / "abtest.duckdb", read_only=True) as s:
        stored = s.human_labels(run_id)
    assert len(stored) == 25 and {lab["reviewer"] for lab in stored} == {"alice"}
    assert all(lab["label"] == items[lab["item_id"]]["judge_label"] for lab in stored)


# ----------------------------------------------------------------------------- chromium

CHROMIUM = Path("/usr/bin/chromium")

# Appended after the page's own script: click through items with the page's own buttons
# and keyboard handler, then press "Download labels" with URL.createObjectURL and the
# anchor's click captured (no real download). Everything observed goes into <pre id=captured>.
_DRIVER = r"""
<script id="test-driver">
(function () {
  "use strict";
  var WANT = __WANT__;                       // item_id -> blind label to give
  var names = {"1": "Answer 1 is better", "2": "Answer 2 is better", "tie": "Tie / no preference",
               "supported": "Supported", "unsupported": "Unsupported"};
  var keys = {"1": "1", "2": "2", "tie": "t", "supported": "s", "unsupported": "u"};
  var log = {seen: [], msgs: [], counts: [], download_name: null, payload: null, errors: []};
  window.addEventListener("error", function (e) { log.errors.push(String(e.message)); });
  var blobs = [];
  var realCreate = URL.createObjectURL.bind(URL);
  URL.createObjectURL = function (b) { blobs.push(b); return realCreate(b); };
  var realClick = HTMLAnchorElement.prototype.click;
  HTMLAnchorElement.prototype.click = function () {     // the download link: record, do not save
    if (this.download) { log.download_name = this.download; return; }
    return realClick.call(this);
  };

  function curId() { return document.querySelector("section#item .meta").textContent.split(" \u00b7 ")[1]; }
  function buttons() { return Array.prototype.slice.call(document.querySelectorAll("section#item .labels button")); }
  function byText(t) { return buttons().filter(function (b) { return b.textContent.indexOf(t) === 0; })[0]; }
  function msg() { return document.getElementById("msg").textContent; }
  function finish() {
    var pre = document.createElement("pre");
    pre.id = "captured";
    pre.textContent = encodeURIComponent(JSON.stringify(log));
    document.body.appendChild(pre);
  }

  var steps = [], n = 0;
  // items 1..3 by clicking the label buttons, 4..5 with the keyboard; the page advances itself
  for (var i = 0; i < 5; i++) {
    (function (useKeys) {
      steps.push(function () {
        var id = curId(), v = WANT[id];
        log.seen.push(id);
        if (useKeys) {
          document.dispatchEvent(new KeyboardEvent("keydown", {key: keys[v], bubbles: true}));
        } else {
          byText(names[v]).click();
        }
        log.counts.push(document.getElementById("count").textContent);
      });
    })(i >= 3);
  }
  steps.push(function () {                 // a sixth item: label it, go back, clear it again
    var id = curId();
    log.seen.push(id);
    byText(names[WANT[id]]).click();
  });
  steps.push(function () {
    byText("\u2190 Prev").click();
    log.after_prev = curId();
    var b = document.querySelector("section#item .labels button.chosen");
    log.chosen_before_clear = b ? b.textContent : null;
    b.click();                              // clicking the chosen label clears it
    log.counts.push(document.getElementById("count").textContent);
  });
  steps.push(function () {
    document.getElementById("list").querySelectorAll("a")[0].click();   // nav: back to the first
    log.nav_first = curId();
    log.done_links = document.querySelectorAll("nav a.done").length;
    document.getElementById("next-open").click();
    log.next_open = curId();
    document.getElementById("download").click();                          // no reviewer yet
    log.msgs.push(msg());
    var box = document.getElementById("reviewer");
    box.value = "  Grace Hopper ";
    box.dispatchEvent(new Event("input", {bubbles: true}));
    document.getElementById("download").click();
    log.msgs.push(msg());
    if (!blobs.length) { log.errors.push("no blob"); finish(); return "stop"; }
    blobs[blobs.length - 1].text().then(function (t) { log.payload = t; finish(); },
                                        function (e) { log.errors.push(String(e)); finish(); });
    return "stop";
  });
  function run() {
    try {
      if (steps[n++]() === "stop") { return; }
    } catch (e) { log.errors.push("step " + (n - 1) + ": " + e); finish(); return; }
    if (n < steps.length) { setTimeout(run, 400); } else { finish(); }
  }
  setTimeout(run, 100);
})();
</script>
"""


@pytest.mark.chromium
@pytest.mark.skipif(not CHROMIUM.exists(),
                    reason="/usr/bin/chromium not installed (CI installs Debian 'chromium')")
def test_chromium_review_page_click_through_and_download(store, tmp_path):
    """The real page in headless Chromium: label items with its buttons and keys, navigate,
    download; the captured download imports with `import_labels`."""
    R.export_pack(store, RUN, tmp_path / "pack", n=6, seed=2)
    items = _items(store)
    want = {iid: _blind(it, it["judge_label"]) for iid, it in items.items()}
    html = (tmp_path / "pack" / "review.html").read_text(encoding="utf-8")
    pack = json.loads(re.search(r'<script id="abtest-pack" type="application/json">(.*?)</script>',
                                html, re.S).group(1))
    order = [it["item_id"] for it in pack["items"]]
    driver = _DRIVER.replace("__WANT__", json.dumps(want).replace("<", "\\u003c"))
    page = tmp_path / "driven.html"
    page.write_text(html.replace("</body>", driver + "</body>"), encoding="utf-8")
    # the driver's steps run on real timers; the test waits for its result, however long a
    # loaded machine takes (a virtual-time budget ran out under load)
    pw = pytest.importorskip("playwright.sync_api", reason="playwright not installed (the test "
                             "setup installs it)")
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            tab = browser.new_page()
            tab.goto(page.as_uri())
            tab.wait_for_selector("#captured", state="attached", timeout=90_000)
            captured = tab.locator("#captured").text_content()
        finally:
            browser.close()
    m = re.fullmatch(r"([^<]*)", captured or "")
    assert m and captured, "driver did not finish"
    from urllib.parse import unquote

    log = json.loads(unquote(m.group(1)))
    assert log["errors"] == []
    # the page showed the items in pack order and advanced by itself after each label
    assert log["seen"] == order[:6]
    assert log["counts"][:5] == [f"{k} / {len(order)} labelled" for k in range(1, 6)]
    assert log["after_prev"] == order[5] and log["chosen_before_clear"]
    assert log["counts"][5] == f"5 / {len(order)} labelled"       # the sixth label was cleared
    assert log["nav_first"] == order[0] and log["done_links"] == 5
    assert log["next_open"] == order[5]
    assert log["msgs"][0] == "enter your name as reviewer first"
    assert log["msgs"][1].startswith("saved 5 label(s)")
    assert re.fullmatch(r"labels-[0-9a-f]{6}-[0-9a-f]{8}-Grace_Hopper\.json", log["download_name"])
    payload = json.loads(log["payload"])
    assert payload["format"] == R.DOWNLOAD_FORMAT and payload["reviewer"] == "Grace Hopper"
    assert payload["pack_id"] == pack["pack_id"]
    assert [(lab["item_id"], lab["label"]) for lab in payload["labels"]] == \
        [(i, want[i]) for i in order[:5]]
    # what the page would have saved imports, and lands in variant space
    f = tmp_path / log["download_name"]
    f.write_text(log["payload"], encoding="utf-8")
    assert R.import_labels(store, RUN, f) == 5
    stored = store.human_labels(RUN)
    assert {lab["reviewer"] for lab in stored} == {"Grace Hopper"}
    assert sorted((lab["item_id"], lab["label"]) for lab in stored) == \
        sorted((i, items[i]["judge_label"]) for i in order[:5])
    ag = R.agreement(store, RUN)
    assert "overall" not in ag  # labels of different judges are never pooled
    assert all(ag[j]["agreement"] == pytest.approx(1.0) for j in ("pairwise", "faithfulness")
               if j in ag)
