"""Abstention review items (issue 43): humans label the question the judge is asked (does
the answer respond to the question asked?), and the judge's reasoning is kept with the item's
secret record, never shown in the blind pack."""

from __future__ import annotations

import json

from abtest import review as R
from abtest.review.items import ABSTENTION_TASK
from support.review_data import PAIRWISE, RUN, _items

WHY = {"A": "it states where the fact is", "B": "it declines the question; the rest is a side fact"}


def _judge_abstention(store):
    for cid in sorted(PAIRWISE):
        for v in ("A", "B"):
            ab = v == "B"
            store.put_judgment({"run_id": RUN, "case_id": cid, "judge": "abstention", "subject": v,
                                "verdict": "abstained" if ab else "answered",
                                "score": 1.0 if ab else 0.0, "rationale": WHY[v],
                                "result_json": json.dumps({"answers_question": not ab,
                                                           "rationale": WHY[v]})})


def test_abstention_items_ask_the_judges_question_and_keep_its_reason_secret(store, tmp_path):
    _judge_abstention(store)
    R.export_pack(store, RUN, tmp_path / "pack", n=1000, seed=0)
    pub = [json.loads(x) for x in (tmp_path / "pack" / "items.jsonl").read_text().splitlines()]
    shown = [p for p in pub if p["kind"] == "abstention"]
    assert len(shown) == 2 * len(PAIRWISE)
    assert all(p["task"] == ABSTENTION_TASK for p in shown)
    for said in ("respond to the question asked", "answers a different question",
                 "even when it adds other facts", "even a hedged, partial or wrong one"):
        assert said in ABSTENTION_TASK
    # the reasons would give the verdict away: not in any file of the pack
    for f in ("items.jsonl", "labels.csv", "review.html"):
        text = (tmp_path / "pack" / f).read_text()
        assert not any(w in text for w in WHY.values()), f
        assert "judge_rationale" not in text and "answers_question" not in text
    # the item's secret record keeps the judge's reason with its verdict
    items = _items(store)
    for p in shown:
        it = items[p["item_id"]]
        v = it["m"]["variant"]
        assert it["judge_label"] == ("abstained" if v == "B" else "answered")
        assert it["m"]["judge_rationale"] == WHY[v]
