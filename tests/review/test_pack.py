"""The blind review pack: what export draws and writes, seeded and stable, blind to the
variants, a self-contained page whose download imports."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from abtest import review as R
from abtest.errors import UserError
from abtest.capturing import load_fixture, write_fixture
from abtest.core.models import Chunk
from support.review_data import (FLAGGED, PAIRWISE, PATH_A, PATH_B, RUN, SHA_A,
                         SHA_B, VARIANT_A, VARIANT_B)
from support.review_data import _answer, _by_key, _items


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
