"""Importing human labels: CSV, JSONL and the page's download round-trip; bad labels import
nothing and name the line and item."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from abtest import review as R
from abtest.errors import UserError
from abtest.review.items import run_tag
from abtest.store import Store
from support.review_data import (PAIRWISE, RUN)
from support.review_data import _blind, _items
from support.review_data import _write_jsonl


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


def test_read_only_store_is_a_user_error(review_template, tmp_path):
    shutil.copy(review_template, tmp_path / "ro.duckdb")
    with Store(tmp_path / "ro.duckdb", read_only=True) as ro:
        with pytest.raises(UserError, match="read-only"):
            R.export_pack(ro, RUN, tmp_path / "pack", n=2)
