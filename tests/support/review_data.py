"""A run with ten cases judged pairwise in both orders and claim by claim, whose review
items these tests draw, label and check against agreement computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

from abtest import review as R

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
