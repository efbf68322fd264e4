"""The blind review pack: items.jsonl, labels.csv and a self-contained review page.

Blinding: the pack never names a variant, a variant file or the judge's verdict. A
pairwise item shows "Answer 1" and "Answer 2"; which variant is which is drawn per
item with a seeded RNG and kept only in the store (`review_items.mapping_json`).
Item ids and the order of the pack carry no side information either (they follow a
seeded shuffle). The run id is not in the pack (users may name runs after variants);
item ids carry a short hash of it instead, so labels cannot land on another run.

Labels are stored in the variant space: a pairwise "1"/"2" is mapped through the
item's side mapping to "A"/"B" at import time ("tie" stays "tie"), so
`review_items.judge_label` (the judge's combined outcome "A"/"B"/"tie", the value the
report's pairwise statistics use) and `human_labels.label` are directly comparable.
Claim items use "supported"/"unsupported" (the judge's contradicted and
not_in_context both count as unsupported), coverage items "covered"/"not_covered",
abstention items "abstained"/"answered" (does the answer respond to the question asked).

The judge's reasoning stays with the verdict, out of the pack: an abstention item's secret
record keeps the judge's one-sentence rationale (`judge_rationale`) for whoever adjudicates
a disagreement after labelling. Shown beside the answer it would tell the reviewer the
verdict, and the labels that validate the judge would lean towards it.

The page is the Jinja template `assets/review_page.html` with its CSS and JS files inlined: no
network, no external resource; data is rendered with textContent only.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any


from abtest.errors import UserError
from abtest.core.records import write_jsonl
from abtest.store.runs import load_run, pairwise_verdicts, verified_cases
from abtest.review.items import (ABSTENTION_TASK, CLAIM_TASK, COVERAGE_TASK, DOWNLOAD_FORMAT, ITEM_LETTER, LABELS, PACK_FILES, PAIRWISE_TASK, claim_label, item_number, item_sha, outcome, pairwise_stratum, run_tag, seeded_prefix, stratified, write_rows)
from markupsafe import Markup
from abtest.core.pages import environment
from abtest.core.progress import step


def review_page(pack: dict) -> str:
    """The review page (assets/review_page.html) with its CSS, JS and the pack inlined: one
    self-contained file."""


    page = environment().get_template("review_page.html").render(pack_json=Markup(_script_json(pack)))
    return page + "\n"   # Jinja drops the template's final newline


def _script_json(obj: Any) -> str:
    """JSON safe to embed in the page's JSON script element (no closing tag, no comment opener);
    '/' is escaped too so data (e.g. a URL in an answer) never reads as a resource reference."""
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True)
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("/", "\\/"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text



class Sources:
    """What items are drawn from and shown with: the run's verified cases, its answers, and
    (read on first use) its claims and judgments. One instance serves a whole export or page."""

    def __init__(self, store, run_id: str):
        self.store, self.run_id = store, run_id
        self.run = load_run(store, run_id)
        self.cases = verified_cases(self.run)
        self.gens = {(g["case_id"], g["variant"]): g
                     for g in store.generations(run_id, exclude=("messages_json",))}
        self._claims: list[dict] | None = None
        self._judgments: list[dict] | None = None

    def answer(self, cid: str, v: str) -> str | None:
        g = self.gens.get((cid, v))
        return g["answer"] if g and not g["error"] and g["answer"] else None

    @property
    def claims(self) -> list[dict]:
        if self._claims is None:
            self._claims = self.store.claims(self.run_id)
        return self._claims

    @property
    def judgments(self) -> list[dict]:
        if self._judgments is None:
            self._judgments = self.store.judgments(self.run_id)
        return self._judgments

    def coverage_points(self) -> dict[tuple[str, str], list[str]]:
        out = {}
        for j in self.judgments:
            if (j["judge"] == "coverage" and j["sample"] == 0 and not j["error"]
                    and j["result_json"]):
                out[(j["case_id"], j["subject"])] = list(json.loads(j["result_json"]).get("points") or [])
        return out


def item_content(src: Sources, rows: list[dict]) -> list[dict]:
    """The blind, public content of stored review items, in the order given: what the pack
    files and `abtest view`'s review page show. Rebuilt from the store and the fixture by the
    item's secret mapping, so the two can never show an item differently. An item whose answer
    or claim is no longer in the store is left out."""
    claim_text = {(c["case_id"], c["variant"], c["idx"]): c["claim"] for c in src.claims}
    points = src.coverage_points() if any(r["judge"] == "coverage" for r in rows) else {}
    out = []
    for r in rows:
        m = json.loads(r["mapping_json"] or "{}")
        cid, v, case = r["case_id"], m.get("variant"), src.cases.get(r["case_id"])
        if case is None:
            continue
        pub: dict[str, Any] = {"item_id": r["item_id"], "case_id": cid, "question": case.question,
                               "context": [{"id": ch.id, "text": ch.text} for ch in case.context]}
        if r["judge"] == "pairwise":
            sides = m.get("sides") or {}
            a1, a2 = src.answer(cid, sides.get("1", "")), src.answer(cid, sides.get("2", ""))
            if a1 is None or a2 is None:
                continue
            pub.update({"kind": "pairwise", "task": PAIRWISE_TASK, "answer_1": a1, "answer_2": a2})
        else:
            answer = src.answer(cid, v)
            if answer is None:
                continue
            if r["judge"] == "faithfulness":
                claim = claim_text.get((cid, v, m.get("idx")))
                if claim is None:
                    continue
                pub.update({"kind": "claim", "task": CLAIM_TASK, "claim": claim, "answer": answer})
            elif r["judge"] == "coverage":
                pts = points.get((cid, v)) or []
                i = m.get("idx")
                if not isinstance(i, int) or not 0 <= i < len(pts):
                    continue
                pub.update({"kind": "coverage", "task": COVERAGE_TASK, "key_point": pts[i],
                            "answer": answer})
            else:
                pub.update({"kind": "abstention", "task": ABSTENTION_TASK, "answer": answer})
        pub.update({"allowed_labels": list(LABELS[r["judge"]]), "label": "", "note": ""})
        out.append(pub)
    return out


def export_pack(store, run_id: str, out_dir, n: int = 40, seed: int = 0,
                progress: Any = None) -> dict:
    """Write a blind review pack (items.jsonl, labels.csv, review.html) into `out_dir` and
    record each item's secret side mapping and the judge's label in `review_items`.

    Each judge is validated on its own items (docs/CLAIM_STATISTICS.md), so ``n`` items are drawn
    per judge, stratified by the judge's verdict so both kinds are there to agree on:
    pairwise (A / B / tie, plus up to ``n`` cases whose two orders disagreed), faithfulness
    claims (supported / unsupported), coverage key points (covered / not covered) and
    abstention (abstained / answered). The store must be open read-write. Re-exporting
    keeps the item id and side mapping of every item already in the store, so labels
    imported earlier stay valid; the same seed and a bigger n gives a superset.
    """
    if int(n) != n or n < 0:
        raise UserError(f"--n must be a non-negative integer, got {n!r}", field="n")
    n = int(n)
    src = Sources(store, run_id)
    cases, answer = src.cases, src.answer

    base = f"abtest-review:{run_id}:{seed}"
    verdicts = pairwise_verdicts(store, run_id)
    pw_pools: dict[str, list] = defaultdict(list)
    for cid in sorted(verdicts):
        ab, ba = verdicts[cid]
        if ab is None or ba is None or cid not in cases or not (answer(cid, "A") and answer(cid, "B")):
            continue
        pw_pools[pairwise_stratum(ab, ba)].append(cid)
    flagged = seeded_prefix(pw_pools.pop("flagged", []), n, f"{base}:pairwise-flagged")
    pw_sample = stratified(pw_pools, n, f"{base}:pairwise")
    claim_pools: dict[str, list] = defaultdict(list)
    for c in src.claims:
        if (c["verdict"] is None or not (c["claim"] or "").strip() or c["case_id"] not in cases
                or not answer(c["case_id"], c["variant"])):
            continue
        claim_pools[claim_label(c["verdict"]) or ""].append(c)
    cl_sample = stratified(claim_pools, n, f"{base}:claims")
    cov_pools: dict[str, list] = defaultdict(list)
    abs_pools: dict[str, list] = defaultdict(list)
    abs_why: dict[tuple[str, str], str] = {}       # the abstention judge's reason, per answer
    for j in src.judgments:
        cid, v = j["case_id"], j["subject"]
        if (j["sample"] != 0 or j["error"] or j["verdict"] is None or cid not in cases
                or v not in ("A", "B") or not answer(cid, v)):
            continue
        if j["judge"] == "abstention":
            abs_pools[j["verdict"]].append((cid, v))
            if j["rationale"]:
                abs_why[(cid, v)] = j["rationale"]
        elif j["judge"] == "coverage" and j["result_json"]:
            res = json.loads(j["result_json"])
            covered = set(res.get("covered") or [])
            for i, point in enumerate(res.get("points") or []):
                label = "covered" if point in covered else "not_covered"
                cov_pools[label].append((cid, v, i, point))
    cov_sample = stratified(cov_pools, n, f"{base}:coverage")
    abs_sample = stratified(abs_pools, n, f"{base}:abstention")
    if not (flagged or pw_sample or cl_sample or cov_sample or abs_sample):
        raise UserError(f"nothing to review in run {run_id!r}: no judgment with its answers and "
                        "fixture case", file=str(store.path))

    # selected items: key, judge, case_id, secret, judge_label, fingerprint
    selected: list[dict] = []
    for cid in flagged + pw_sample:
        ab, ba = verdicts[cid]
        a, b = answer(cid, "A"), answer(cid, "B")
        selected.append({
            "key": f"pairwise|{cid}", "judge": "pairwise", "case_id": cid,
            "fingerprint": item_sha(a, b), "judge_label": outcome(ab, ba),
            "secret": {"kind": "pairwise", "verdict_ab": ab, "verdict_ba": ba,
                       "position_inconsistent": ab != ba, "stratum": pairwise_stratum(ab, ba)}})
    for c in cl_sample:
        cid, v = c["case_id"], c["variant"]
        selected.append({
            "key": f"claim|{cid}|{v}|{c['idx']}", "judge": "faithfulness", "case_id": cid,
            "fingerprint": item_sha(c["claim"], answer(cid, v)), "judge_label": claim_label(c["verdict"]),
            "secret": {"kind": "claim", "variant": v, "idx": c["idx"], "judge_verdict": c["verdict"],
                       "stratum": claim_label(c["verdict"])}})
    for cid, v, i, point in cov_sample:
        label = "covered" if (cid, v, i, point) in cov_pools["covered"] else "not_covered"
        selected.append({
            "key": f"coverage|{cid}|{v}|{i}", "judge": "coverage", "case_id": cid,
            "fingerprint": item_sha(point, answer(cid, v)), "judge_label": label,
            "secret": {"kind": "coverage", "variant": v, "idx": i, "stratum": label}})
    for cid, v in abs_sample:
        label = "abstained" if (cid, v) in abs_pools["abstained"] else "answered"
        selected.append({
            "key": f"abstention|{cid}|{v}", "judge": "abstention", "case_id": cid,
            "fingerprint": item_sha(answer(cid, v)), "judge_label": label,
            "secret": {"kind": "abstention", "variant": v, "stratum": label,
                       **({"judge_rationale": abs_why[(cid, v)]} if (cid, v) in abs_why
                          else {})}})

    # reuse ids and sides of items already exported for this run
    existing: dict[str, dict] = {}
    max_num = 0
    for r in store.review_items(run_id):
        max_num = max(max_num, item_number(r["item_id"]))
        try:
            m = json.loads(r["mapping_json"] or "{}")
        except ValueError:
            continue
        key = m.get("key")
        if key and (key not in existing
                    or item_number(r["item_id"]) > item_number(existing[key]["item_id"])):
            existing[key] = {"item_id": r["item_id"], **m}
    order = sorted(selected, key=lambda s: s["key"])
    random.Random(f"{base}:order").shuffle(order)
    tag = run_tag(run_id)
    rows = []
    for s in order:
        old = existing.get(s["key"])
        if old is not None and old.get("fingerprint") == s["fingerprint"]:
            item_id, sides = old["item_id"], old.get("sides")
        else:
            max_num += 1
            item_id = f"{tag}-{ITEM_LETTER[s['judge']]}{max_num:04d}"
            sides = None
        secret = dict(s["secret"])
        if s["judge"] == "pairwise":
            if sides not in ({"1": "A", "2": "B"}, {"1": "B", "2": "A"}):
                first = "A" if random.Random(f"{base}:sides:{s['key']}").random() < 0.5 else "B"
                sides = {"1": first, "2": "B" if first == "A" else "A"}
            secret["sides"] = sides
        secret.update({"key": s["key"], "fingerprint": s["fingerprint"], "seed": seed})
        rows.append({"run_id": run_id, "item_id": item_id, "judge": s["judge"],
                     "case_id": s["case_id"], "mapping_json": json.dumps(secret, sort_keys=True),
                     "judge_label": s["judge_label"]})
    public = item_content(src, rows)
    assert len(public) == len(rows), "an item drawn just now must have its content"

    write_rows(store, store.put_review_items, rows)
    _stage(progress, 1, f"{len(public)} items drawn and recorded")

    pack_id = f"{tag}-{item_sha(seed, *sorted(p['item_id'] for p in public))[:8]}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    p_items, p_csv, p_html = (out / f for f in PACK_FILES)
    write_jsonl(p_items, public)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["item_id", "kind", "case_id", "allowed_labels", "label", "note"])
    for p in public:
        w.writerow([p["item_id"], p["kind"], p["case_id"], "|".join(p["allowed_labels"]), "", ""])
    p_csv.write_text(buf.getvalue(), encoding="utf-8")
    pack = {"format": "abtest-review-pack", "version": 1, "pack_id": pack_id,
            "download_format": DOWNLOAD_FORMAT, "items": public}
    p_html.write_text(review_page(pack), encoding="utf-8")
    _stage(progress, 2, f"pack written to {out}")
    counts = {"pairwise_flagged": len(flagged), "pairwise_sampled": len(pw_sample),
              "claims": len(cl_sample), "coverage_points": len(cov_sample),
              "abstention_answers": len(abs_sample)}
    return {"paths": [str(p_items), str(p_csv), str(p_html)], "n_items": len(public),
            "pack_id": pack_id, "out_dir": str(out), "counts": counts, "run_id": run_id}


def _stage(progress: Any, done: int, what: str) -> None:
    """Two stages (items drawn and recorded, files written): a bar for the Python API, the
    "[i/2]" line for a callable."""

    step(progress, "review export", done, 2, f"[{done}/2] {what}")

