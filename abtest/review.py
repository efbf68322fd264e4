"""Human review of the LLM judges: a blind review pack, label import, judge–human
agreement, and prediction-powered inference (PPI) for the headline differences.

What goes into a pack (`export_pack`)
  Each judge the claim rests on is validated on its own items, so about ``n`` items are
  drawn per judge, stratified by the judge's verdict (both kinds must be there for an
  agreement to mean anything): pairwise cases (agreed A / B / tie, plus up to ``n``
  cases whose two orders disagreed, "flagged"), faithfulness claims (supported /
  unsupported), coverage key points (covered / not covered) and abstention verdicts
  (abstained / answered). Within a stratum the draw is a seeded uniform sample.

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
abstention items "abstained"/"answered".

PPI (Angelopoulos et al. 2023, "Prediction-powered inference", mean estimation):
``theta_pp = mean(judge on all N) - mean(judge - human on the labelled n)`` with a
normal-approximation CI from the variances of the two terms. Because a review pack is
stratified (all flagged cases, a random sample of the rest), the headline estimates
use the stratified form of the rectifier (see `ppi_stratified_ci`).
"""

from __future__ import annotations

import csv
import getpass
import hashlib
import io
import json
import math
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from .errors import UserError

__all__ = [
    "PAIRWISE_LABELS", "CLAIM_LABELS", "DOWNLOAD_FORMAT", "PPIResult",
    "export_pack", "import_labels", "agreement", "status", "render_status",
    "ppi_mean_ci", "ppi_difference", "ppi_stratified_ci", "mean_ci", "ppi_headlines",
]

PAIRWISE_LABELS = ("1", "2", "tie")
CLAIM_LABELS = ("supported", "unsupported")
COVERAGE_LABELS = ("covered", "not_covered")
ABSTENTION_LABELS = ("abstained", "answered")
LABELS = {"pairwise": PAIRWISE_LABELS, "faithfulness": CLAIM_LABELS,
          "coverage": COVERAGE_LABELS, "abstention": ABSTENTION_LABELS}
_ITEM_LETTER = {"pairwise": "p", "faithfulness": "c", "coverage": "k", "abstention": "s"}
DOWNLOAD_FORMAT = "abtest-review-labels"
PACK_FILES = ("items.jsonl", "labels.csv", "review.html")

PAIRWISE_TASK = ("Read the question and the retrieved context, then both answers. Which answer "
                 "is better overall (correct, grounded in the context, complete, clear)? "
                 "Label 1, 2 or tie.")
CLAIM_TASK = ("Is the claim supported by the retrieved context? Label supported only when the "
              "context states it; anything contradicted by or absent from the context is "
              "unsupported.")

COVERAGE_TASK = ("Does the answer state this key point (in any wording)? Label covered only "
                 "when it does; a point the answer omits or contradicts is not_covered.")
ABSTENTION_TASK = ("Does the answer abstain: decline to answer, or say only that it does not "
                   "know or that the documents do not contain the answer? Label answered when it "
                   "states an answer in any way, even after a hedge (\"I'm not sure, but …\").")

_SCORE = {"A": 0.0, "tie": 0.5, "B": 1.0}   # win-rate score of a pairwise outcome (B wins = 1)


# --------------------------------------------------------------------------- helpers

def _run_tag(run_id: str) -> str:
    return hashlib.sha256(f"abtest-review:{run_id}".encode()).hexdigest()[:6]


def _sha(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode()).hexdigest()


def _load_run(store, run_id: str) -> dict:
    from .report.build import load_run

    return load_run(store, run_id)


def _run_config(run: dict):
    from .models import Config

    try:
        return Config.model_validate(json.loads(run.get("config_json") or "{}"))
    except Exception:
        return Config()


def _fixture_cases(run: dict) -> dict[str, Any]:
    """The run's cases, verified: reviewers must see the contexts the judges saw, so a fixture
    edited, or re-captured at the same path, since the run is refused."""
    from .fixtures import load_fixture

    raw = run.get("fixture_path")
    p = Path(raw or "")
    if not raw or not p.exists():
        raise UserError("fixture not found; the review pack shows each case's question and "
                        "retrieved context from it", file=str(raw or "(no fixture path recorded)"))
    fx = load_fixture(p)
    want = run.get("fixture_sha256")
    if want and fx.cases_sha256 != want:
        raise UserError(f"fixture changed since run {run['run_id']} (cases sha256 {want[:12]}… "
                        f"then, {fx.cases_sha256[:12]}… now); the review pack must show the "
                        "contexts the judges saw: restore that version of the fixture",
                        file=str(p / "manifest.json"))
    return {c.id: c for c in fx.cases}


def _pairwise_verdicts(store, run_id: str) -> dict[str, tuple[str | None, str | None]]:
    by: dict[str, dict[str, str | None]] = defaultdict(dict)
    for j in store.judgments(run_id, judge="pairwise"):
        if j["sample"] == 0 and j["subject"] in ("AB", "BA"):
            by[j["case_id"]][j["subject"]] = None if j["error"] else j["verdict"]
    return {cid: (d.get("AB"), d.get("BA")) for cid, d in by.items() if "AB" in d and "BA" in d}


def _flagged(ab: str | None, ba: str | None) -> bool:
    """The two orders disagreed: the judge's own disagreement, always worth a human look."""
    return ab != ba


def _pairwise_stratum(ab: str | None, ba: str | None) -> str:
    """'flagged' when the orders disagreed, else the agreed outcome (A, B or tie)."""
    return "flagged" if _flagged(ab, ba) else str(ab)


def _outcome(ab: str | None, ba: str | None) -> str:
    from .stats import pairwise_outcome

    return pairwise_outcome(ab, ba)


def _claim_label(verdict: str | None) -> str | None:
    if verdict is None:
        return None
    return "supported" if verdict == "supported" else "unsupported"


def _finished_cases(store, run_id: str) -> set[str]:
    """Cases the report scores: both answers generated and no generation/judge error."""
    gens = store.generations(run_id, exclude=("messages_json",))
    have: dict[str, set[str]] = defaultdict(set)
    bad: set[str] = set()
    for g in gens:
        have[g["case_id"]].add(g["variant"])
        if g["error"]:
            bad.add(g["case_id"])
    for j in store.judgments(run_id):
        if j["sample"] == 0 and j["error"]:
            bad.add(j["case_id"])
    return {cid for cid, vs in have.items() if {"A", "B"} <= vs and cid not in bad}


def _prefix(pool: list, k: int, seed_key: str) -> list:
    """The first k of a seeded permutation: a bigger n gives a superset of a smaller one."""
    pool = list(pool)
    random.Random(seed_key).shuffle(pool)
    return pool[:k]


def _item_number(item_id: str) -> int:
    tail = item_id.rsplit("-", 1)[-1]
    digits = "".join(ch for ch in tail if ch.isdigit())
    return int(digits) if digits else 0


def _script_json(obj: Any) -> str:
    """JSON safe to embed in <script type="application/json"> (no '</script>', no '<!--');
    '/' is escaped too so data (e.g. a URL in an answer) never reads as a resource reference."""
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True)
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("/", "\\/"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _write(store, fn, rows) -> None:
    import duckdb

    try:
        fn(rows)
    except duckdb.Error as exc:
        if "read-only" in str(exc) or "read only" in str(exc):
            raise UserError("results store is open read-only; review export/import must open "
                            "it read-write", file=str(store.path)) from None
        raise


# --------------------------------------------------------------------------- export

def _stratified(pools: dict[str, list], total: int, seed_key: str) -> list:
    """About `total` items spread evenly over the strata (a stratum that runs short gives its
    share to the others); within a stratum, the first k of a seeded permutation, so a bigger
    total gives a superset."""
    keys = sorted(k for k in pools if pools[k])
    quota = {k: 0 for k in keys}
    left = total
    while left > 0:
        open_ = [k for k in keys if quota[k] < len(pools[k])]
        if not open_:
            break
        for k in open_:
            if left == 0:
                break
            quota[k] += 1
            left -= 1
    out = []
    for k in keys:
        out += _prefix(pools[k], quota[k], f"{seed_key}:{k}")
    return out


def export_pack(store, run_id: str, out_dir, n: int = 40, seed: int = 0) -> dict:
    """Write a blind review pack (items.jsonl, labels.csv, review.html) into `out_dir` and
    record each item's secret side mapping and the judge's label in `review_items`.

    Each judge is validated on its own items (docs/STATISTICS.md), so ``n`` items are drawn
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
    run = _load_run(store, run_id)
    cases = _fixture_cases(run)
    gens = {(g["case_id"], g["variant"]): g
            for g in store.generations(run_id, exclude=("messages_json",))}

    def answer(cid: str, v: str) -> str | None:
        g = gens.get((cid, v))
        return g["answer"] if g and not g["error"] and g["answer"] else None

    base = f"abtest-review:{run_id}:{seed}"
    verdicts = _pairwise_verdicts(store, run_id)
    pw_pools: dict[str, list] = defaultdict(list)
    for cid in sorted(verdicts):
        ab, ba = verdicts[cid]
        if ab is None or ba is None or cid not in cases or not (answer(cid, "A") and answer(cid, "B")):
            continue
        pw_pools[_pairwise_stratum(ab, ba)].append(cid)
    flagged = _prefix(pw_pools.pop("flagged", []), n, f"{base}:pairwise-flagged")
    pw_sample = _stratified(pw_pools, n, f"{base}:pairwise")
    claim_pools: dict[str, list] = defaultdict(list)
    for c in store.claims(run_id):
        if (c["verdict"] is None or not (c["claim"] or "").strip() or c["case_id"] not in cases
                or not answer(c["case_id"], c["variant"])):
            continue
        claim_pools[_claim_label(c["verdict"])].append(c)
    cl_sample = _stratified(claim_pools, n, f"{base}:claims")
    cov_pools: dict[str, list] = defaultdict(list)
    abs_pools: dict[str, list] = defaultdict(list)
    for j in store.judgments(run_id):
        cid, v = j["case_id"], j["subject"]
        if (j["sample"] != 0 or j["error"] or j["verdict"] is None or cid not in cases
                or v not in ("A", "B") or not answer(cid, v)):
            continue
        if j["judge"] == "abstention":
            abs_pools[j["verdict"]].append((cid, v))
        elif j["judge"] == "coverage" and j["result_json"]:
            res = json.loads(j["result_json"])
            covered = set(res.get("covered") or [])
            for i, point in enumerate(res.get("points") or []):
                label = "covered" if point in covered else "not_covered"
                cov_pools[label].append((cid, v, i, point))
    cov_sample = _stratified(cov_pools, n, f"{base}:coverage")
    abs_sample = _stratified(abs_pools, n, f"{base}:abstention")
    if not (flagged or pw_sample or cl_sample or cov_sample or abs_sample):
        raise UserError(f"nothing to review in run {run_id!r}: no judgment with its answers and "
                        "fixture case", file=str(store.path))

    # selected items: key, judge, case_id, secret, public fields, judge_label, fingerprint
    selected: list[dict] = []
    for cid in flagged + pw_sample:
        ab, ba = verdicts[cid]
        a, b = answer(cid, "A"), answer(cid, "B")
        selected.append({
            "key": f"pairwise|{cid}", "judge": "pairwise", "case_id": cid,
            "fingerprint": _sha(a, b), "judge_label": _outcome(ab, ba),
            "secret": {"kind": "pairwise", "verdict_ab": ab, "verdict_ba": ba,
                       "position_inconsistent": ab != ba, "stratum": _pairwise_stratum(ab, ba)},
            "answers": {"A": a, "B": b}})
    for c in cl_sample:
        cid, v = c["case_id"], c["variant"]
        selected.append({
            "key": f"claim|{cid}|{v}|{c['idx']}", "judge": "faithfulness", "case_id": cid,
            "fingerprint": _sha(c["claim"], answer(cid, v)), "judge_label": _claim_label(c["verdict"]),
            "secret": {"kind": "claim", "variant": v, "idx": c["idx"], "judge_verdict": c["verdict"],
                       "stratum": _claim_label(c["verdict"])},
            "public": {"kind": "claim", "task": CLAIM_TASK, "claim": c["claim"],
                       "answer": answer(cid, v)}})
    for cid, v, i, point in cov_sample:
        label = "covered" if (cid, v, i, point) in cov_pools["covered"] else "not_covered"
        selected.append({
            "key": f"coverage|{cid}|{v}|{i}", "judge": "coverage", "case_id": cid,
            "fingerprint": _sha(point, answer(cid, v)), "judge_label": label,
            "secret": {"kind": "coverage", "variant": v, "idx": i, "stratum": label},
            "public": {"kind": "coverage", "task": COVERAGE_TASK, "key_point": point,
                       "answer": answer(cid, v)}})
    for cid, v in abs_sample:
        label = "abstained" if (cid, v) in abs_pools["abstained"] else "answered"
        selected.append({
            "key": f"abstention|{cid}|{v}", "judge": "abstention", "case_id": cid,
            "fingerprint": _sha(answer(cid, v)), "judge_label": label,
            "secret": {"kind": "abstention", "variant": v, "stratum": label},
            "public": {"kind": "abstention", "task": ABSTENTION_TASK, "answer": answer(cid, v)}})

    # reuse ids and sides of items already exported for this run
    existing: dict[str, dict] = {}
    max_num = 0
    for r in store.review_items(run_id):
        max_num = max(max_num, _item_number(r["item_id"]))
        try:
            m = json.loads(r["mapping_json"] or "{}")
        except ValueError:
            continue
        key = m.get("key")
        if key and (key not in existing
                    or _item_number(r["item_id"]) > _item_number(existing[key]["item_id"])):
            existing[key] = {"item_id": r["item_id"], **m}
    order = sorted(selected, key=lambda s: s["key"])
    random.Random(f"{base}:order").shuffle(order)
    tag = _run_tag(run_id)
    rows, public = [], []
    for s in order:
        old = existing.get(s["key"])
        if old is not None and old.get("fingerprint") == s["fingerprint"]:
            item_id, sides = old["item_id"], old.get("sides")
        else:
            max_num += 1
            item_id = f"{tag}-{_ITEM_LETTER[s['judge']]}{max_num:04d}"
            sides = None
        case = cases[s["case_id"]]
        pub: dict[str, Any] = {"item_id": item_id, "case_id": s["case_id"],
                               "question": case.question,
                               "context": [{"id": ch.id, "text": ch.text} for ch in case.context]}
        if s["judge"] == "pairwise":
            if sides not in ({"1": "A", "2": "B"}, {"1": "B", "2": "A"}):
                first = "A" if random.Random(f"{base}:sides:{s['key']}").random() < 0.5 else "B"
                sides = {"1": first, "2": "B" if first == "A" else "A"}
            pub.update({"kind": "pairwise", "task": PAIRWISE_TASK,
                        "answer_1": s["answers"][sides["1"]], "answer_2": s["answers"][sides["2"]]})
            secret = {**s["secret"], "sides": sides}
        else:
            pub.update(s["public"])
            secret = dict(s["secret"])
        pub.update({"allowed_labels": list(LABELS[s["judge"]]), "label": "", "note": ""})
        secret.update({"key": s["key"], "fingerprint": s["fingerprint"], "seed": seed})
        rows.append({"run_id": run_id, "item_id": item_id, "judge": s["judge"],
                     "case_id": s["case_id"], "mapping_json": json.dumps(secret, sort_keys=True),
                     "judge_label": s["judge_label"]})
        public.append(pub)

    _write(store, store.put_review_items, rows)

    pack_id = f"{tag}-{_sha(seed, *sorted(p['item_id'] for p in public))[:8]}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    p_items, p_csv, p_html = (out / f for f in PACK_FILES)
    p_items.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in public),
                       encoding="utf-8")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["item_id", "kind", "case_id", "allowed_labels", "label", "note"])
    for p in public:
        w.writerow([p["item_id"], p["kind"], p["case_id"], "|".join(p["allowed_labels"]), "", ""])
    p_csv.write_text(buf.getvalue(), encoding="utf-8")
    pack = {"format": "abtest-review-pack", "version": 1, "pack_id": pack_id,
            "download_format": DOWNLOAD_FORMAT, "items": public}
    p_html.write_text(_HTML.replace("/*__PACK_JSON__*/null", _script_json(pack)), encoding="utf-8")
    counts = {"pairwise_flagged": len(flagged), "pairwise_sampled": len(pw_sample),
              "claims": len(cl_sample), "coverage_points": len(cov_sample),
              "abstention_answers": len(abs_sample)}
    return {"paths": [str(p_items), str(p_csv), str(p_html)], "n_items": len(public),
            "pack_id": pack_id, "out_dir": str(out), "counts": counts}


# --------------------------------------------------------------------------- import

class _Row(NamedTuple):
    where: str
    item_id: Any
    label: Any
    reviewer: Any
    note: Any


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _parse_labels(path: Path, text: str) -> tuple[list[_Row], str | None]:
    """Rows of a labels file (CSV, JSONL, or the review page's JSON download) and the
    file-level reviewer, if any."""
    head = text.lstrip()
    if head.startswith("{") or head.startswith("["):
        doc = None
        try:
            doc = json.loads(text)
        except ValueError:
            pass  # several JSON lines: JSONL
        if isinstance(doc, list) or (isinstance(doc, dict) and "labels" in doc):
            reviewer = None
            if isinstance(doc, dict):
                fmt = doc.get("format")
                if fmt is not None and fmt != DOWNLOAD_FORMAT:
                    raise UserError(f"unknown labels format {fmt!r} (expected {DOWNLOAD_FORMAT!r})",
                                    file=str(path), field="format")
                reviewer = doc.get("reviewer")
                entries = doc["labels"]
                if not isinstance(entries, list):
                    raise UserError("'labels' must be a list", file=str(path), field="labels")
            else:
                entries = doc
            rows = []
            for i, e in enumerate(entries):
                where = f"labels[{i}]"
                if not isinstance(e, dict):
                    raise UserError("expected an object with item_id and label", file=str(path),
                                    where=where)
                rows.append(_Row(where, e.get("item_id"), e.get("label"), e.get("reviewer"),
                                 e.get("note")))
            return rows, reviewer if isinstance(reviewer, str) else None
        rows = []
        for ln, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
            except ValueError as exc:
                raise UserError(f"not valid JSON: {exc.msg}", file=str(path), where=f"line {ln}") from None
            if not isinstance(e, dict):
                raise UserError("expected a JSON object with item_id and label", file=str(path),
                                where=f"line {ln}")
            rows.append(_Row(f"line {ln}", e.get("item_id"), e.get("label"), e.get("reviewer"),
                             e.get("note")))
        return rows, None
    # CSV (comma, semicolon or tab separated, as spreadsheets save it)
    first = text.splitlines()[0] if text.strip() else ""
    delim = max((",", ";", "\t"), key=first.count)
    reader = csv.reader(io.StringIO(text), delimiter=delim)
    try:
        header = next(reader)
    except StopIteration:
        raise UserError("empty labels file", file=str(path)) from None
    cols = [h.strip().lower() for h in header]
    if "item_id" not in cols or "label" not in cols:
        raise UserError("CSV header must have item_id and label columns (use the pack's "
                        "labels.csv)", file=str(path), where="line 1")
    ix = {c: cols.index(c) for c in ("item_id", "label", "reviewer", "note") if c in cols}
    rows = []
    try:
        for rec in reader:
            if not any(cell.strip() for cell in rec):
                continue
            get = (lambda c: rec[ix[c]] if c in ix and ix[c] < len(rec) else None)
            rows.append(_Row(f"line {reader.line_num}", get("item_id"), get("label"),
                             get("reviewer"), get("note")))
    except csv.Error as exc:
        raise UserError(f"malformed CSV: {exc}", file=str(path), where=f"line {reader.line_num}") from None
    return rows, None


def _default_reviewer() -> str:
    try:
        return getpass.getuser() or "unknown"
    except Exception:
        return "unknown"


def import_labels(store, run_id: str, file, reviewer: str | None = None) -> int:
    """Validate a labels file and store its labels in `human_labels`; all or nothing.

    Accepts the pack's labels.csv, items.jsonl (filled in) and the review page's JSON
    download. Rows with a blank label are skipped (not yet labelled). An unknown item,
    a value outside the item's allowed labels, or the same item twice for the same
    reviewer raises UserError naming the file, line and item, and nothing is stored.
    ``reviewer`` overrides any reviewer named in the file; the default is the file's
    reviewer, else the OS user. Re-importing a reviewer's label for an item replaces it.
    Returns the number of labels stored.
    """
    path = Path(file)
    if not path.is_file():
        raise UserError("labels file not found", file=str(path))
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise UserError("labels file is not UTF-8 text", file=str(path)) from None
    _load_run(store, run_id)
    items = {r["item_id"]: r for r in store.review_items(run_id)}
    if not items:
        raise UserError(f"run {run_id!r} has no review pack; run `abtest review export {run_id}` "
                        "first", file=str(path))
    rows, file_reviewer = _parse_labels(path, text)
    fallback = (file_reviewer or "").strip() or _default_reviewer()
    forced = (reviewer or "").strip() or None
    problems: list[tuple[str, str]] = []
    seen: dict[tuple[str, str], str] = {}
    out = []
    for r in rows:
        if _blank(r.label):
            continue
        if _blank(r.item_id):
            problems.append((r.where, "missing item_id"))
            continue
        item_id = str(r.item_id).strip()
        item = items.get(item_id)
        if item is None:
            problems.append((r.where, f"unknown item {item_id!r} (not in run {run_id}'s review pack)"))
            continue
        label = str(r.label).strip().lower()
        allowed = LABELS.get(item["judge"], CLAIM_LABELS)
        if label not in allowed:
            problems.append((r.where, f"item {item_id!r}: label {str(r.label).strip()!r} is not "
                                      f"one of {', '.join(allowed)}"))
            continue
        who = forced or (None if _blank(r.reviewer) else str(r.reviewer).strip()) or fallback
        if (item_id, who) in seen:
            problems.append((r.where, f"item {item_id!r} labelled twice by {who!r} (first at "
                                      f"{seen[(item_id, who)]})"))
            continue
        seen[(item_id, who)] = r.where
        if item["judge"] == "pairwise" and label != "tie":
            sides = json.loads(item["mapping_json"] or "{}").get("sides") or {}
            if label not in sides:
                problems.append((r.where, f"item {item_id!r} has no side mapping in the store "
                                          "(re-export the pack)"))
                continue
            label = sides[label]
        out.append({"run_id": run_id, "item_id": item_id, "judge": item["judge"],
                    "case_id": item["case_id"], "label": label, "reviewer": who})
    if problems:
        where, msg = problems[0]
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise UserError(f"{msg}{more}; nothing imported", file=str(path), where=where)
    if not out:
        raise UserError("no labels in the file (every label is blank); nothing imported",
                        file=str(path))
    _write(store, store.put_human_labels, out)
    return len(out)


# --------------------------------------------------------------------------- agreement

def _kappa_block(judge: Sequence, human: Sequence, conf_level: float) -> dict:
    from .stats import cohen_kappa

    n = len(judge)
    conf: dict[str, dict[str, int]] = {}
    for j, h in zip(judge, human):
        conf.setdefault(j, {}).setdefault(h, 0)
        conf[j][h] += 1
    out = {"n": n, "agreement": None, "kappa": None, "ci_low": None, "ci_high": None,
           "confusion": conf}
    if n:
        k = cohen_kappa(list(judge), list(human), conf_level=conf_level)
        out.update({"agreement": k.p_observed, "kappa": k.kappa, "ci_low": k.ci_low,
                    "ci_high": k.ci_high})
        if k.note:
            out["note"] = k.note
    return out


def _labelled_pairs(store, run_id: str):
    items = {r["item_id"]: r for r in store.review_items(run_id)}
    for lab in store.human_labels(run_id):
        item = items.get(lab["item_id"])
        if item is not None:
            yield item, lab


def agreement(store, run_id: str, alpha: float = 0.05) -> dict:
    """Judge vs human per judge type: raw agreement and Cohen's kappa with a (1 − alpha)
    CI. Pairwise items whose two judge orders disagreed are left out of the pairwise
    kappa and reported under ``position_inconsistent`` (the judge's combined outcome
    for them is "tie"); ``all_items`` is the pairwise kappa with them counted as tie.
    Labels are never pooled across judges: a judge at chance would hide behind another."""
    conf_level = 1.0 - alpha
    by: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    all_j, all_h, incons = [], [], []
    items_by_judge: dict[str, set[str]] = defaultdict(set)
    reviewers = set()
    for item, lab in _labelled_pairs(store, run_id):
        reviewers.add(lab["reviewer"])
        if item["judge_label"] is None:
            continue
        items_by_judge[item["judge"]].add(item["item_id"])
        m = json.loads(item["mapping_json"] or "{}")
        if item["judge"] == "pairwise":
            all_j.append(item["judge_label"])
            all_h.append(lab["label"])
            if m.get("position_inconsistent"):
                incons.append((lab["label"], m.get("verdict_ab"), m.get("verdict_ba")))
                continue
        by[item["judge"]][0].append(item["judge_label"])
        by[item["judge"]][1].append(lab["label"])
    out: dict[str, Any] = {}
    if all_j:
        pw = _kappa_block(*by["pairwise"], conf_level)
        k = len(incons)
        pw["position_inconsistent"] = {
            "n": k,
            "human_labels": dict(Counter(h for h, _, _ in incons)),
            "agree_with_ab_order": (sum(h == ab for h, ab, _ in incons) / k) if k else None,
            "agree_with_ba_order": (sum(h == ba for h, _, ba in incons) / k) if k else None,
            "human_tie_share": (sum(h == "tie" for h, _, _ in incons) / k) if k else None,
            "note": "the two judge orders disagreed; the judge's outcome counts as tie",
        }
        pw["all_items"] = _kappa_block(all_j, all_h, conf_level)
        pw["n_items"] = len(items_by_judge["pairwise"])
        out["pairwise"] = pw
    for judge in ("faithfulness", "coverage", "abstention"):
        if by[judge][0]:
            blk = _kappa_block(*by[judge], conf_level)
            blk["n_items"] = len(items_by_judge[judge])
            out[judge] = blk
    out["reviewers"] = sorted(reviewers)
    out["conf_level"] = conf_level
    return out


# --------------------------------------------------------------------------- status

def status(store, run_id: str, min_labels: int | None = None, min_kappa: float | None = None,
           alpha: float | None = None) -> dict:
    """How far each judge is from validated (the report's rule, per judge on its own items:
    at least min_labels human labels and the lower (1 − alpha) limit of kappa ≥ min_kappa).
    Thresholds and alpha default to the run's stored config. Includes `agreement` and the
    PPI headlines."""
    from .report.build import _judge_validation

    run = _load_run(store, run_id)
    cfg = _run_config(run)
    upd: dict[str, Any] = {}
    if min_labels is not None:
        upd["min_labels"] = int(min_labels)
    if min_kappa is not None:
        upd["min_kappa"] = float(min_kappa)
    cfg = cfg.model_copy(update={"review": cfg.review.model_copy(update=upd),
                                 **({"alpha": float(alpha)} if alpha is not None else {})})
    items = store.review_items(run_id)
    labels = store.human_labels(run_id)
    by_id = {r["item_id"]: r for r in items}
    by_judge: dict[str, dict[str, int]] = {}
    for r in items:
        by_judge.setdefault(r["judge"], {"items": 0, "labelled_items": 0, "labels": 0})
        by_judge[r["judge"]]["items"] += 1
    labelled_items: set[str] = set()
    for lab in labels:
        it = by_id.get(lab["item_id"])
        if it is None:
            continue
        by_judge[it["judge"]]["labels"] += 1
        if lab["item_id"] not in labelled_items:
            by_judge[it["judge"]]["labelled_items"] += 1
            labelled_items.add(lab["item_id"])
    val = _judge_validation(store, run_id, cfg)
    unlabelled = len(items) - len(labelled_items)
    claim_judges = val["claim_judges"]
    if not items:
        msg = f"no review pack yet: run `abtest review export {run_id}`"
    elif val["validated"]:
        msg = "every judge the claim rests on is validated: " + ", ".join(
            f"{j} kappa {val[j]['kappa']:.3f} (lower limit {val[j]['ci_low']:.3f})"
            for j in claim_judges)
    else:
        parts = [f"{j}: {val[j]['reason']}" for j in claim_judges if not val[j]["validated"]]
        msg = "not validated — " + "; ".join(parts)
        short = [j for j in claim_judges if val[j]["n_labels"] < cfg.review.min_labels]
        if short and unlabelled == 0:
            msg += (f"; every item is labelled: export a bigger pack (`abtest review export "
                    f"{run_id} --n …`) or add a second reviewer")
    return {"run_id": run_id, "n_items": len(items), "n_labelled_items": len(labelled_items),
            "n_unlabelled_items": unlabelled, "min_labels": cfg.review.min_labels,
            "min_kappa": cfg.review.min_kappa, "validated": val["validated"],
            "validation": val, "by_judge": by_judge,
            "reviewers": sorted({lab["reviewer"] for lab in labels if lab["reviewer"]}),
            "message": msg, "alpha": cfg.alpha,
            "judges": agreement(store, run_id, alpha=cfg.alpha),
            "ppi": ppi_headlines(store, run_id, alpha=cfg.alpha)}


def _fmt(x: Any, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def render_status(st: dict) -> str:
    """Plain-text rendering of `status()` for the CLI."""
    lines = [f"run {st['run_id']}: {st['n_items']} review item(s), {st['n_labelled_items']} "
             f"labelled, {st['n_unlabelled_items']} unlabelled; reviewers: "
             f"{', '.join(st['reviewers']) or '-'}"]
    for j, c in sorted(st["by_judge"].items()):
        lines.append(f"  {j:<13} items {c['items']:>4}  labelled {c['labelled_items']:>4}  "
                     f"labels {c['labels']:>4}")
    val = st["validation"]
    lines.append(f"validation rule: {val['rule']}")
    for j in ("pairwise", *val["claim_judges"]):
        b = val[j]
        lines.append(f"  {j:<13} {b['n_labels']:>4} labels, kappa {_fmt(b['kappa'])} "
                     f"[{_fmt(b['ci_low'])}, {_fmt(b['ci_high'])}] → "
                     + ("VALIDATED" if b["validated"] else f"not validated ({b.get('reason')})")
                     + ("" if j in val["claim_judges"] else "  (not part of the claim)"))
    lines.append(f"  {st['message']}")
    conf = f"{100 * (1 - st['alpha']):.10g}"
    for j in ("pairwise", "faithfulness", "coverage", "abstention"):
        a = st["judges"].get(j)
        if not a:
            continue
        lines.append(f"agreement {j}: n {a['n']}, raw {_fmt(a['agreement'])}, kappa "
                     f"{_fmt(a['kappa'])} [{conf}% CI {_fmt(a['ci_low'])}, {_fmt(a['ci_high'])}]")
        pi = a.get("position_inconsistent") or {}
        if pi.get("n"):
            lines.append(f"  position-inconsistent items: {pi['n']} (human labels "
                         f"{pi['human_labels']}; human sides with the A-first order "
                         f"{_fmt(pi['agree_with_ab_order'], 2)}, B-first order "
                         f"{_fmt(pi['agree_with_ba_order'], 2)})")
    for j in ("pairwise", "faithfulness"):
        p = (st.get("ppi") or {}).get(j)
        if not p:
            continue
        jo, pp = p["judge_only"], p["ppi"]
        lines.append(f"PPI {j} ({p['estimand']}): judge-only {_fmt(jo['estimate'])} "
                     f"[{_fmt(jo['ci_low'])}, {_fmt(jo['ci_high'])}]; prediction-powered "
                     f"{_fmt(pp['estimate'])} [{_fmt(pp['ci_low'])}, {_fmt(pp['ci_high'])}] "
                     f"(N {p['N']}, human-labelled {p['n_labelled']})"
                     + (f" — {p['note']}" if p.get("note") else ""))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- PPI

class PPIResult(NamedTuple):
    estimate: float | None
    ci_low: float | None
    ci_high: float | None


def _z(alpha: float) -> float:
    from scipy import stats as st

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return float(st.norm.ppf(1.0 - alpha / 2.0))


def _vec(name: str, x: Iterable[float]) -> np.ndarray:
    a = np.asarray(list(x) if not isinstance(x, np.ndarray) else x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-d")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    return a


def _interval(est: float, var: float | None, alpha: float) -> PPIResult:
    if var is None or not math.isfinite(var):
        return PPIResult(float(est), None, None)
    half = _z(alpha) * math.sqrt(max(var, 0.0))
    return PPIResult(float(est), float(est - half), float(est + half))


def mean_ci(x: Sequence[float], alpha: float = 0.05) -> PPIResult:
    """Judge-only (classical) mean with a normal-approximation CI, the comparator of PPI."""
    a = _vec("x", x)
    if a.size == 0:
        raise ValueError("x is empty")
    var = float(a.var(ddof=1)) / a.size if a.size >= 2 else None
    return _interval(float(a.mean()), var, alpha)


def ppi_mean_ci(judge_all: Sequence[float], judge_labelled: Sequence[float],
                human_labelled: Sequence[float], alpha: float = 0.05) -> PPIResult:
    """Prediction-powered mean (Angelopoulos et al. 2023):

        theta_pp = mean(judge_all) − mean(judge_labelled − human_labelled)
        se^2     = var(judge_all) / N + var(judge_labelled − human_labelled) / n

    (sample variances, ddof = 1), CI = theta_pp ± z_{1−alpha/2}·se. ``judge_all`` is the
    judge's score on every case (N, labelled ones included); the labelled subset must be
    a uniform random sample. alpha is abtest's 0.05 (ppi_py's default is 0.1). The CI is
    None when N < 2 or n < 2."""
    f = _vec("judge_all", judge_all)
    fl = _vec("judge_labelled", judge_labelled)
    y = _vec("human_labelled", human_labelled)
    if fl.shape != y.shape:
        raise ValueError("judge_labelled and human_labelled must be paired (same length)")
    if f.size == 0 or y.size == 0:
        raise ValueError("need at least one case and one human label")
    rect = fl - y
    est = float(f.mean() - rect.mean())
    if f.size < 2 or rect.size < 2:
        return PPIResult(est, None, None)
    var = float(f.var(ddof=1)) / f.size + float(rect.var(ddof=1)) / rect.size
    return _interval(est, var, alpha)


def ppi_difference(judge_a_all: Sequence[float], judge_b_all: Sequence[float],
                   judge_a_labelled: Sequence[float], judge_b_labelled: Sequence[float],
                   human_a_labelled: Sequence[float], human_b_labelled: Sequence[float],
                   alpha: float = 0.05) -> PPIResult:
    """Paired B − A difference by PPI: the per-case difference is the score, i.e.
    ``ppi_mean_ci(b_all − a_all, b_lab − a_lab (judge), b_lab − a_lab (human))``."""
    ja, jb = _vec("judge_a_all", judge_a_all), _vec("judge_b_all", judge_b_all)
    la, lb = _vec("judge_a_labelled", judge_a_labelled), _vec("judge_b_labelled", judge_b_labelled)
    ha, hb = _vec("human_a_labelled", human_a_labelled), _vec("human_b_labelled", human_b_labelled)
    if ja.shape != jb.shape or la.shape != lb.shape or ha.shape != hb.shape:
        raise ValueError("A and B scores must be paired (same length)")
    return ppi_mean_ci(jb - ja, lb - la, hb - ha, alpha=alpha)


def _ppi_core(judge_est: float, judge_var: float | None,
              strata: dict[Any, tuple[int, Sequence[float]]], alpha: float
              ) -> tuple[PPIResult, str | None]:
    """judge_est − Σ_h N_h·mean(r_h), with r already on the estimand's scale (so that the
    judge's total bias is Σ over all units of r). Var: judge_var + Σ_h N_h²·(1 − n_h/N_h)·
    s²_h/n_h (stratified sampling of the rectifier; a fully labelled stratum adds 0)."""
    corr, var, note = 0.0, judge_var, None
    for h, (big_n, r) in sorted(strata.items(), key=lambda kv: str(kv[0])):
        r = np.asarray(r, dtype=float)
        if big_n == 0:
            continue
        if r.size == 0:
            return PPIResult(None, None, None), f"no human label in stratum {h!r}"
        if r.size > big_n:
            raise ValueError(f"stratum {h!r}: more labelled units ({r.size}) than units ({big_n})")
        corr += big_n * float(r.mean())
        if r.size == big_n:
            continue
        if r.size < 2:
            var, note = None, f"one human label in stratum {h!r}: CI undefined"
            continue
        if var is not None:
            var += big_n ** 2 * (1.0 - r.size / big_n) * float(r.var(ddof=1)) / r.size
    return _interval(judge_est - corr, var, alpha), note


def ppi_stratified_ci(judge_all: Sequence[float], strata_all: Sequence[Any],
                      labelled_index: Sequence[int], human_labelled: Sequence[float],
                      alpha: float = 0.05) -> PPIResult:
    """PPI mean when the labelled cases were drawn per stratum (a review pack takes every
    flagged case and a random sample of the rest): within each stratum h the labelled
    cases must be a uniform random sample.

        theta = mean(judge_all) − Σ_h (N_h/N)·mean_{labelled in h}(judge − human)
        se^2  = var(judge_all)/N + Σ_h (N_h/N)²·(1 − n_h/N_h)·var_h(judge − human)/n_h

    With one stratum and n ≪ N this is `ppi_mean_ci`. Estimate None when a stratum has
    no label; CI None when a partly labelled stratum has a single label."""
    f = _vec("judge_all", judge_all)
    strata_all = list(strata_all)
    if len(strata_all) != f.size:
        raise ValueError("strata_all must give one stratum per case")
    y = _vec("human_labelled", human_labelled)
    idx = [int(i) for i in labelled_index]
    if len(idx) != y.size or len(set(idx)) != len(idx):
        raise ValueError("labelled_index must be distinct and paired with human_labelled")
    if f.size == 0:
        raise ValueError("judge_all is empty")
    big = f.size
    r_by: dict[Any, list[float]] = defaultdict(list)
    for i, yi in zip(idx, y):
        r_by[strata_all[i]].append((f[i] - yi) / big)
    sizes = Counter(strata_all)
    judge_var = float(f.var(ddof=1)) / big if big >= 2 else None
    res, _ = _ppi_core(float(f.mean()), judge_var,
                       {h: (sizes[h], r_by.get(h, [])) for h in sizes}, alpha)
    return res


def _ppi_block(estimand: str, judge: PPIResult, ppi: PPIResult, big_n: int, n_lab: int,
               note: str | None, limits: tuple[float, float], shift: float = 0.0) -> dict:
    """Shifted onto the estimand's scale and clipped to the range it can take: a normal
    interval (or a rectified estimate) may otherwise leave it."""
    lo, hi = limits

    def d(r: PPIResult) -> dict:
        sh = (lambda v: None if v is None else min(hi, max(lo, v - shift)))
        return {"estimate": sh(r.estimate), "ci_low": sh(r.ci_low), "ci_high": sh(r.ci_high)}

    return {"estimand": estimand, "N": big_n, "n_labelled": n_lab, "judge_only": d(judge),
            "ppi": d(ppi), "ci_method": "normal approximation for both CIs", "note": note}


def ppi_headlines(store, run_id: str, alpha: float | None = None) -> dict:
    """Judge-only and prediction-powered estimates of the headline B − A differences.

    pairwise: win rate of B (B wins 1, tie ½, A wins 0) − 0.5 over the report's finished
      cases; the human label of an item is its score (mean over reviewers); strata =
      flagged (the orders disagree) and the agreed outcomes A, B and tie.
    faithfulness: mean over cases of (supported share of B's claims − A's); claim-level
      human labels correct the judge's claim verdicts, each weighted ±1/(N·m) for its
      answer's m claims; strata = judged supported / unsupported.
    A judge is absent from the result when the run has no such judgment; `ppi` values are
    None (with a note) until every stratum has a human label."""
    run = _load_run(store, run_id)
    alpha = _run_config(run).alpha if alpha is None else float(alpha)
    finished = _finished_cases(store, run_id)
    items = {r["item_id"]: r for r in store.review_items(run_id)}
    human: dict[str, list[str]] = defaultdict(list)
    for lab in store.human_labels(run_id):
        if lab["item_id"] in items:
            human[lab["item_id"]].append(lab["label"])
    out: dict[str, Any] = {"alpha": alpha}

    # pairwise
    verdicts = {cid: v for cid, v in _pairwise_verdicts(store, run_id).items() if cid in finished}
    if verdicts:
        ids = sorted(verdicts)
        f = np.array([_SCORE[_outcome(*verdicts[c])] for c in ids])
        strata = [_pairwise_stratum(*verdicts[c]) for c in ids]
        pos = {c: i for i, c in enumerate(ids)}
        y_by: dict[int, float] = {}
        for item_id, labs in human.items():
            it = items[item_id]
            if it["judge"] == "pairwise" and it["case_id"] in pos:
                sc = [_SCORE[lab] for lab in labs if lab in _SCORE]
                if sc:
                    y_by[pos[it["case_id"]]] = sum(sc) / len(sc)
        big = len(ids)
        r_by: dict[str, list[float]] = defaultdict(list)
        for i, y in y_by.items():
            r_by[strata[i]].append((f[i] - y) / big)
        sizes = Counter(strata)
        jvar = float(f.var(ddof=1)) / big if big >= 2 else None
        judge = _interval(float(f.mean()), jvar, alpha)
        if y_by:
            ppi, note = _ppi_core(float(f.mean()), jvar, {h: (sizes[h], r_by.get(h, []))
                                                          for h in sizes}, alpha)
        else:
            ppi, note = PPIResult(None, None, None), "no human labels"
        out["pairwise"] = _ppi_block("B win rate (ties ½) − 0.5", judge, ppi, big, len(y_by),
                                     note, (-0.5, 0.5), shift=0.5)

    # faithfulness
    score: dict[tuple[str, str], float] = {}
    for j in store.judgments(run_id, judge="faithfulness"):
        if j["sample"] == 0 and j["score"] is not None and j["subject"] in ("A", "B"):
            score[(j["case_id"], j["subject"])] = float(j["score"])
    fids = sorted(c for c in finished if (c, "A") in score and (c, "B") in score)
    if fids:
        big = len(fids)
        dj = np.array([score[(c, "B")] - score[(c, "A")] for c in fids])
        fset = set(fids)
        claims = [c for c in store.claims(run_id) if c["case_id"] in fset and c["verdict"]]
        m = Counter((c["case_id"], c["variant"]) for c in claims)
        sizes = Counter(_claim_label(c["verdict"]) for c in claims)
        by_key = {(c["case_id"], c["variant"], c["idx"]): c for c in claims}
        r_by = defaultdict(list)
        n_lab = 0
        for item_id, labs in human.items():
            it = items[item_id]
            if it["judge"] != "faithfulness":
                continue
            mp = json.loads(it["mapping_json"] or "{}")
            c = by_key.get((it["case_id"], mp.get("variant"), mp.get("idx")))
            if c is None:
                continue
            ys = [1.0 if lab == "supported" else 0.0 for lab in labs if lab in CLAIM_LABELS]
            if not ys:
                continue
            fi = 1.0 if c["verdict"] == "supported" else 0.0
            sign = 1.0 if c["variant"] == "B" else -1.0
            r_by[_claim_label(c["verdict"])].append(
                sign * (fi - sum(ys) / len(ys)) / (big * m[(c["case_id"], c["variant"])]))
            n_lab += 1
        jvar = float(dj.var(ddof=1)) / big if big >= 2 else None
        judge = _interval(float(dj.mean()), jvar, alpha)
        if n_lab:
            ppi, note = _ppi_core(float(dj.mean()), jvar, {h: (sizes[h], r_by.get(h, []))
                                                           for h in sizes}, alpha)
        else:
            ppi, note = PPIResult(None, None, None), "no human labels"
        out["faithfulness"] = _ppi_block("mean per-case supported-claim share, B − A", judge,
                                         ppi, big, n_lab, note, (-1.0, 1.0))
    return out


# --------------------------------------------------------------------------- the page

# Self-contained: inline CSS and JS, no network, no external resource. Data is rendered
# with textContent only. The page's download (a JSON document, format DOWNLOAD_FORMAT) is
# what `import_labels` reads. `abtestReview.buildPayload` is pure so tests can run it in node.
_HTML = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>abtest blind review</title>
<style>
  :root { --fg:#1b1f24; --muted:#5a6270; --bg:#fafbfc; --card:#fff; --line:#d8dde3; --acc:#2f5fb3; --ok:#2e7d32; }
  * { box-sizing: border-box; }
  body { margin:0; font:15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
  header { position:sticky; top:0; z-index:2; background:var(--card); border-bottom:1px solid var(--line); padding:8px 16px; display:flex; flex-wrap:wrap; gap:10px; align-items:center; }
  header h1 { font-size:16px; margin:0 12px 0 0; }
  header .grow { flex:1; }
  .progress { min-width:160px; height:8px; background:#e8ebef; border-radius:4px; overflow:hidden; }
  .progress > div { height:100%; background:var(--ok); width:0; }
  button { font:inherit; padding:5px 11px; border:1px solid var(--line); border-radius:6px; background:#fff; cursor:pointer; }
  button:hover { border-color:var(--acc); }
  button.primary { background:var(--acc); color:#fff; border-color:var(--acc); }
  button.chosen { background:var(--ok); color:#fff; border-color:var(--ok); }
  input[type=text] { font:inherit; padding:4px 8px; border:1px solid var(--line); border-radius:6px; }
  main { display:flex; gap:16px; padding:16px; align-items:flex-start; }
  nav { width:170px; flex:none; max-height:calc(100vh - 90px); overflow:auto; background:var(--card); border:1px solid var(--line); border-radius:8px; }
  nav a { display:block; padding:3px 10px; color:var(--fg); text-decoration:none; font-family:ui-monospace, monospace; font-size:13px; cursor:pointer; }
  nav a.cur { background:#e6eefb; }
  nav a.done::after { content:" \2713"; color:var(--ok); }
  section#item { flex:1; min-width:0; }
  .card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 14px; margin-bottom:12px; }
  .meta { color:var(--muted); font-size:13px; }
  .text { white-space:pre-wrap; overflow-wrap:anywhere; }
  .answers { display:flex; gap:12px; }
  .answers > .card { flex:1; min-width:0; }
  .claim { font-size:17px; border-left:4px solid var(--acc); }
  .chunk { border-top:1px dashed var(--line); padding:6px 0; }
  .chunk:first-child { border-top:0; }
  .chunk b { font-family:ui-monospace, monospace; font-size:12px; color:var(--muted); }
  .labels { display:flex; gap:8px; flex-wrap:wrap; align-items:center; }
  .labels .grow { flex:1; }
  textarea { width:100%; min-height:48px; font:inherit; border:1px solid var(--line); border-radius:6px; padding:6px; }
  kbd { border:1px solid var(--line); border-bottom-width:2px; border-radius:4px; padding:0 4px; font-size:12px; }
  #msg { color:#b3261e; }
  @media (max-width: 900px) { .answers { flex-direction:column; } nav { display:none; } }
</style>
</head>
<body>
<header>
  <h1>Blind review</h1>
  <span class="meta" id="packid"></span>
  <div class="progress" title="labelled items"><div id="bar"></div></div>
  <span id="count" class="meta"></span>
  <span class="grow"></span>
  <label>Reviewer <input type="text" id="reviewer" placeholder="your name" size="14"></label>
  <button id="next-open" title="next unlabelled item (n)">Next unlabelled</button>
  <button id="load" title="continue from a labels file downloaded earlier">Load labels…</button>
  <input type="file" id="file" accept=".json,application/json" hidden>
  <button id="download" class="primary" title="save your labels as a file for `abtest review import`">Download labels</button>
  <span id="msg"></span>
</header>
<main>
  <nav id="list" aria-label="items"></nav>
  <section id="item"></section>
</main>
<script id="abtest-pack" type="application/json">/*__PACK_JSON__*/null</script>
<script id="abtest-app">
(function (root) {
  "use strict";
  var FORMAT = "abtest-review-labels";

  function allowed(item) {
    return item.allowed_labels || (item.kind === "pairwise" ? ["1", "2", "tie"] : ["supported", "unsupported"]);
  }

  // The download: {format, version, pack_id, reviewer, exported_at, labels: [{item_id, label, note}]}
  function buildPayload(pack, state, reviewer, now) {
    var labels = [];
    pack.items.forEach(function (it) {
      var s = state[it.item_id];
      if (!s || !s.label || allowed(it).indexOf(s.label) < 0) { return; }
      labels.push({item_id: it.item_id, label: s.label, note: s.note || ""});
    });
    return {format: FORMAT, version: 1, pack_id: pack.pack_id, reviewer: String(reviewer || "").trim(),
            exported_at: now || new Date().toISOString(), labels: labels};
  }

  root.abtestReview = {buildPayload: buildPayload, allowed: allowed, FORMAT: FORMAT};
  if (typeof document === "undefined") { return; }

  var pack = JSON.parse(document.getElementById("abtest-pack").textContent);
  var items = pack.items;
  var KEY = "abtest-review:" + pack.pack_id;
  var state = {}, cur = 0, dirty = false;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function save() {
    try { localStorage.setItem(KEY, JSON.stringify({state: state, reviewer: reviewerBox.value, cur: cur})); } catch (e) { /* file:// without storage */ }
  }
  function restore() {
    try {
      var raw = localStorage.getItem(KEY);
      if (!raw) { return; }
      var saved = JSON.parse(raw);
      state = saved.state || {};
      reviewerBox.value = saved.reviewer || "";
      cur = Math.min(Math.max(0, saved.cur || 0), items.length - 1);
    } catch (e) { state = {}; }
  }
  function labelled() { return items.filter(function (it) { var s = state[it.item_id]; return s && s.label; }).length; }
  function flash(text) { var m = document.getElementById("msg"); m.textContent = text; setTimeout(function () { if (m.textContent === text) { m.textContent = ""; } }, 4000); }

  function setLabel(value) {
    var it = items[cur];
    var s = state[it.item_id] || (state[it.item_id] = {label: "", note: ""});
    s.label = (s.label === value) ? "" : value;
    dirty = true; save(); render();
    if (s.label) { setTimeout(function () { go(cur + 1); }, 150); }
  }
  function go(i) { if (i >= 0 && i < items.length) { cur = i; save(); render(); window.scrollTo(0, 0); } }
  function nextOpen() {
    for (var k = 1; k <= items.length; k++) {
      var i = (cur + k) % items.length, s = state[items[i].item_id];
      if (!s || !s.label) { go(i); return; }
    }
    flash("every item is labelled: download your labels");
  }

  function chunks(list) {
    var box = el("div");
    (list || []).forEach(function (c) {
      var d = el("div", "chunk");
      d.appendChild(el("b", null, "[" + c.id + "]"));
      d.appendChild(el("div", "text", c.text));
      box.appendChild(d);
    });
    return box;
  }

  function render() {
    var n = labelled();
    document.getElementById("bar").style.width = (items.length ? 100 * n / items.length : 0) + "%";
    document.getElementById("count").textContent = n + " / " + items.length + " labelled";
    var nav = document.getElementById("list");
    nav.textContent = "";
    items.forEach(function (it, i) {
      var a = el("a", (i === cur ? "cur " : "") + ((state[it.item_id] || {}).label ? "done" : ""), it.item_id);
      a.onclick = function () { go(i); };
      nav.appendChild(a);
    });
    var it = items[cur], s = state[it.item_id] || {label: "", note: ""};
    var sec = document.getElementById("item");
    sec.textContent = "";
    var head = el("div", "card");
    head.appendChild(el("div", "meta", "Item " + (cur + 1) + " of " + items.length + " · " + it.item_id +
                        " · " + ({pairwise: "which answer is better", claim: "is the claim supported",
                                  coverage: "is the key point covered", abstention: "did the answer abstain"}[it.kind] || it.kind) +
                        " · case " + it.case_id));
    head.appendChild(el("h2", "text", it.question));
    head.appendChild(el("div", "meta", it.task));
    sec.appendChild(head);
    if (it.kind === "pairwise") {
      var row = el("div", "answers");
      [["Answer 1", it.answer_1], ["Answer 2", it.answer_2]].forEach(function (p) {
        var c = el("div", "card"); c.appendChild(el("h3", null, p[0])); c.appendChild(el("div", "text", p[1])); row.appendChild(c);
      });
      sec.appendChild(row);
    } else if (it.kind === "claim") {
      var cl = el("div", "card claim"); cl.appendChild(el("div", "meta", "Claim")); cl.appendChild(el("div", "text", it.claim)); sec.appendChild(cl);
      var det = el("details", "card"); det.appendChild(el("summary", null, "The answer this claim was taken from"));
      det.appendChild(el("div", "text", it.answer)); sec.appendChild(det);
    } else {
      if (it.kind === "coverage") {
        var kp = el("div", "card claim"); kp.appendChild(el("div", "meta", "Key point")); kp.appendChild(el("div", "text", it.key_point)); sec.appendChild(kp);
      }
      var an = el("div", "card"); an.appendChild(el("h3", null, "Answer")); an.appendChild(el("div", "text", it.answer)); sec.appendChild(an);
    }
    var lab = el("div", "card");
    var btns = el("div", "labels");
    var names = {"1": "Answer 1 is better", "2": "Answer 2 is better", "tie": "Tie / no preference",
                 "supported": "Supported", "unsupported": "Unsupported",
                 "covered": "Covered", "not_covered": "Not covered",
                 "abstained": "Abstained", "answered": "Answered"};
    var keys = {"1": "1", "2": "2", "tie": "t", "supported": "s", "unsupported": "u",
                "covered": "c", "not_covered": "x", "abstained": "a", "answered": "w"};
    allowed(it).forEach(function (v) {
      var b = el("button", s.label === v ? "chosen" : "", (names[v] || v) + " ");
      b.appendChild(el("kbd", null, keys[v] || ""));
      b.onclick = function () { setLabel(v); };
      btns.appendChild(b);
    });
    var prev = el("button", null, "\u2190 Prev"); prev.onclick = function () { go(cur - 1); };
    var next = el("button", null, "Next \u2192"); next.onclick = function () { go(cur + 1); };
    btns.appendChild(el("span", "grow")); btns.appendChild(prev); btns.appendChild(next);
    lab.appendChild(btns);
    var note = el("textarea"); note.placeholder = "optional note (why?)"; note.value = s.note || "";
    note.oninput = function () {
      var st = state[it.item_id] || (state[it.item_id] = {label: "", note: ""});
      st.note = note.value; dirty = true; save();
    };
    lab.appendChild(note);
    sec.appendChild(lab);
    var ctx = el("details", "card"); ctx.open = true;
    ctx.appendChild(el("summary", null, "Retrieved context (" + (it.context || []).length + " chunks)"));
    ctx.appendChild(chunks(it.context));
    sec.appendChild(ctx);
  }

  function download() {
    var who = reviewerBox.value.trim();
    if (!who) { flash("enter your name as reviewer first"); reviewerBox.focus(); return; }
    var payload = buildPayload(pack, state, who);
    if (!payload.labels.length) { flash("nothing labelled yet"); return; }
    var blob = new Blob([JSON.stringify(payload, null, 1) + "\n"], {type: "application/json"});
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "labels-" + pack.pack_id + "-" + who.replace(/[^A-Za-z0-9_.-]+/g, "_") + ".json";
    document.body.appendChild(a); a.click(); document.body.removeChild(a);
    setTimeout(function () { URL.revokeObjectURL(a.href); }, 1000);
    dirty = false;
    flash("saved " + payload.labels.length + " label(s): run `abtest review import RUN_ID " + a.download + "`");
  }

  function load(file) {
    var rd = new FileReader();
    rd.onload = function () {
      try {
        var doc = JSON.parse(rd.result);
        if (doc.format !== FORMAT || !Array.isArray(doc.labels)) { throw new Error("not a labels file from this page"); }
        var known = {}, k = 0;
        items.forEach(function (it) { known[it.item_id] = it; });
        doc.labels.forEach(function (l) {
          var it = known[l.item_id];
          if (it && allowed(it).indexOf(l.label) >= 0) { state[l.item_id] = {label: l.label, note: l.note || ""}; k++; }
        });
        if (doc.reviewer && !reviewerBox.value) { reviewerBox.value = doc.reviewer; }
        save(); render(); flash("loaded " + k + " label(s)");
      } catch (e) { flash("could not load: " + e.message); }
    };
    rd.readAsText(file);
  }

  var reviewerBox = document.getElementById("reviewer");
  document.getElementById("packid").textContent = "pack " + pack.pack_id;
  reviewerBox.oninput = save;
  document.getElementById("download").onclick = download;
  document.getElementById("next-open").onclick = nextOpen;
  document.getElementById("load").onclick = function () { document.getElementById("file").click(); };
  document.getElementById("file").onchange = function (e) { if (e.target.files[0]) { load(e.target.files[0]); } e.target.value = ""; };
  document.addEventListener("keydown", function (e) {
    var t = e.target.tagName;
    if (t === "INPUT" || t === "TEXTAREA" || e.ctrlKey || e.metaKey || e.altKey) { return; }
    var it = items[cur], map = {"1": "1", "2": "2", "t": "tie", "s": "supported", "u": "unsupported",
                                 "c": "covered", "x": "not_covered", "a": "abstained", "w": "answered"};
    var v = map[e.key.toLowerCase()];
    if (v && allowed(it).indexOf(v) >= 0) { setLabel(v); e.preventDefault(); }
    else if (e.key === "ArrowRight" || e.key === "j") { go(cur + 1); }
    else if (e.key === "ArrowLeft" || e.key === "k") { go(cur - 1); }
    else if (e.key === "n") { nextOpen(); }
  });
  window.addEventListener("beforeunload", function (e) { if (dirty) { e.preventDefault(); e.returnValue = ""; } });
  restore();
  render();
})(typeof window !== "undefined" ? window : globalThis);
</script>
</body>
</html>
"""
