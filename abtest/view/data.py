"""What the view's pages show, read from the store: plain dicts, no HTML.

Reports are built by the same code as `abtest report` and kept per state of the run (status,
finish time, its review labels), so a finished run's page is built once, a running run's is
rebuilt as it moves, and a label given in the review page shows in the run's agreement.
"""

from __future__ import annotations

import difflib
import json
import threading
from typing import Any

from ..errors import UserError

_CACHE: dict[tuple, dict] = {}
_SUMMARIES: dict[tuple, dict] = {}
_LOCK = threading.Lock()


def _state(store, run: dict) -> str:
    """The run's state as its stored summary records it; a running run's also counts its
    answered cases, so its page moves as the run does."""
    from ..reporting.summary import state_of

    st = state_of(run, store.labels_state(run["run_id"]))
    if run["status"] == "running":
        st += f"|{store.answered_counts([run['run_id']]).get(run['run_id'], 0)}"
    return st


def report_of(store, run: dict, state: str | None = None) -> dict:
    """The run's report (frozen or live), built once per state of the run."""
    from ..reporting.summary import build_any

    key = (str(store.path), run["run_id"], state or _state(store, run))
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    rep = build_any(store, run)
    with _LOCK:
        _CACHE[key] = rep
    return rep


def summary_of(store, run: dict) -> dict:
    """A finished run's summary for the runs page, built from its report when the store has
    none for its current state (the view opens the store read-only: it keeps it in memory)."""
    from ..reporting.summary import summarize

    state = _state(store, run)
    key = (str(store.path), run["run_id"], state)
    with _LOCK:
        hit = _SUMMARIES.get(key)
    if hit is None:
        hit = summarize(report_of(store, run, state))
        with _LOCK:
            _SUMMARIES[key] = hit
    return hit


def claim_line(rep: dict) -> tuple[bool, str]:
    from ..reporting.summary import summarize

    s = summarize(rep)
    return s["licensed"], s["claim"]


def runs_overview(store) -> list[dict]:
    """Every run, newest first, with its claim line and gate decision: from the summaries the
    store keeps, else from this process's memory; a run with neither is marked pending and
    the page asks for it (/runs/ID/summary) after it has rendered."""
    from ..reporting.summary import state_of

    runs = list(reversed(store.list_runs()))
    stored, labels = store.run_summaries(), store.labels_states()
    answered = store.answered_counts(r["run_id"] for r in runs if r["status"] == "running")
    out = []
    for run in runs:
        rid = run["run_id"]
        row = {"run_id": rid, "kind": run["kind"], "status": run["status"],
               "created_at": str(run["created_at"])[:19], "fixture": run["fixture_name"],
               "corpus_version": run["corpus_version"], "a": run["variant_a_name"],
               "b": run["variant_b_name"], "generator": run["generator_model"],
               "judge": run["judge_model"], "n_cases": run["n_cases"], "pending": False,
               "licensed": False, "resolved": "", "gate": "—"}
        if run["status"] == "running":
            row.update(claim="running: no claim until every case is finished",
                       n_finished=answered.get(rid, 0))
            out.append(row)
            continue
        state = state_of(run, labels.get(rid))
        summary = stored.get(rid)
        if summary is None or summary["state"] != state:
            with _LOCK:
                summary = _SUMMARIES.get((str(store.path), rid, state))
        if summary is None:
            row.update(pending=True, claim="…", gate="…")
        else:
            row.update({k: summary[k] for k in ("licensed", "claim", "gate", "resolved",
                                                 "n_finished")})
        out.append(row)
    return out


def word_diff(a: str, b: str) -> list[tuple[str, str]]:
    """(kind, text) spans of B against A, word by word: 'same', 'del' (only in A), 'ins'."""
    wa, wb = (a or "").split(" "), (b or "").split(" ")
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("same", " ".join(wa[i1:i2])))
            continue
        if i2 > i1:
            out.append(("del", " ".join(wa[i1:i2])))
        if j2 > j1:
            out.append(("ins", " ".join(wb[j1:j2])))
    return out


def _messages_text(messages_json: str | None) -> str:
    if not messages_json:
        return ""
    from ..variants import messages_text

    return messages_text(json.loads(messages_json))


def case_detail(store, run: dict, rep: dict, case_id: str) -> dict[str, Any]:
    """One case, side by side: its frozen context, both answers, their claims and the chunk
    each claim was checked against, coverage, abstention, checks and both pairwise orders."""
    from ..variants import unified_diff

    row = next((r for r in rep.get("per_case") or [] if r["case_id"] == case_id), None)
    if row is None:
        raise UserError(f"case {case_id!r} is not in run {run['run_id']}")
    live = run["kind"] == "live"
    rows = store.case_rows(run["run_id"], case_id, live=live)
    if live:  # each variant's answer and the chunks its own retrieval returned
        gens = {it["variant"]: it for it in rows["live_items"]}
        case = {"question": row.get("question"), "context": []}
        seen: dict[str, dict] = {}
        for v in ("A", "B"):
            try:
                got = json.loads((gens.get(v) or {}).get("retrieved_json") or "[]")
            except ValueError:
                got = []
            for ch in got if isinstance(got, list) else []:
                if isinstance(ch, dict) and ch.get("id") is not None:
                    cid = str(ch["id"])
                    if cid not in seen:
                        seen[cid] = {"id": cid, "text": ch.get("text"), "by": []}
                        case["context"].append(seen[cid])
                    seen[cid]["by"].append(v)
    else:
        case = _fixture_case(run, case_id)
        gens = {g["variant"]: g for g in rows["generations"]}
    claims = {"A": [], "B": []}
    for c in rows["claims"]:
        claims.setdefault(c["variant"], []).append(
            {"text": c["claim"], "verdict": c["verdict"] or "unjudged", "chunk": c["chunk_id"]})
    judg: dict[tuple[str, str], dict] = {}
    for j in rows["judgments"]:
        if j["sample"] == 0:
            judg[(j["judge"], j["subject"])] = j
    coverage = {}
    for v in ("A", "B"):
        j = judg.get(("coverage", v))
        res = _result(j)
        covered = set(res.get("covered") or [])
        coverage[v] = {"score": j.get("score") if j else None,
                       "points": [{"point": p, "covered": p in covered}
                                  for p in res.get("points") or [] if isinstance(p, str)]}
    pairwise = []
    for order in ("AB", "BA"):
        j = judg.get(("pairwise", order))
        if j:
            pairwise.append({"order": order, "verdict": j["verdict"], "margin": j.get("margin"),
                             "rationale": j.get("rationale") or _result(j).get("rationale") or "",
                             "error": j.get("error")})
    checks = {"A": [], "B": []}
    for c in rows["checks"]:
        checks.setdefault(c["variant"], []).append(
            {"name": c["name"], "passed": c["passed"], "detail": c.get("detail") or ""})
    prompt = {v: _messages_text((gens.get(v) or {}).get("messages_json")) for v in ("A", "B")}
    chunks = [{"id": ch.get("id"), "text": ch.get("text"), "by": ch.get("by") or []}
              for ch in (case or {}).get("context", [])]
    cited = {ch["id"]: [] for ch in chunks}
    for v in ("A", "B"):
        for i, c in enumerate(claims.get(v, [])):
            if c["chunk"] in cited:
                cited[c["chunk"]].append(f"{v}{i}")
    return {
        "run_id": run["run_id"], "case_id": case_id, "row": row,
        "question": row.get("question") or (case or {}).get("question"),
        "answerable": row.get("answerable"), "chunks": chunks, "cited": cited,
        "answers": {v: (gens.get(v) or {}).get("answer") for v in ("A", "B")},
        "errors": {v: (gens.get(v) or {}).get("error") for v in ("A", "B")},
        "diff": word_diff((gens.get("A") or {}).get("answer") or "",
                          (gens.get("B") or {}).get("answer") or ""),
        "claims": claims, "coverage": coverage,
        "abstention": {v: (judg.get(("abstention", v)) or {}).get("verdict") for v in ("A", "B")},
        "faithfulness": {v: (judg.get(("faithfulness", v)) or {}).get("score") for v in ("A", "B")},
        "pairwise": pairwise, "outcome": row.get("pairwise"), "checks": checks,
        "prompts": prompt, "prompt_diff": unified_diff(prompt["A"], prompt["B"], "A", "B"),
        "live": live,
    }


def _result(j: dict | None) -> dict:
    try:
        out = json.loads(j["result_json"]) if j and j.get("result_json") else {}
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _fixture_case(run: dict, case_id: str) -> dict | None:
    """The frozen case as captured (context chunks in rank order), read from the fixture."""
    from pathlib import Path

    p = Path(run.get("fixture_path") or "") / "cases.jsonl"
    try:
        with open(p, encoding="utf-8") as fh:
            for line in fh:
                if f'"id":"{case_id}"' in line or f'"id": "{case_id}"' in line:
                    obj = json.loads(line)
                    if obj.get("id") == case_id:
                        return obj
    except OSError:
        return None
    return None


COMPARED = (("pairwise", "pairwise (B win rate)"), ("faithfulness", "faithfulness"),
            ("coverage", "coverage"), ("abstention_answerable", "refusals, answerable"),
            ("abstention_unanswerable", "abstention, unanswerable"), ("quality", "quality"),
            ("relevance", "relevance"))


def compare(store, run1: str, run2: str) -> dict:
    """Two runs of one fixture: per metric B − A in each and the change; the cases whose
    pairwise outcome or faithfulness verdict changed."""
    from ..history import compare_runs
    from ..reporting.metrics import metric_at
    from ..runs import load_run

    reps = [report_of(store, load_run(store, r)) for r in (run1, run2)]
    cmp = compare_runs(store, run1, run2, reports=(reps[0], reps[1]))
    rows = []
    for key, label in COMPARED:
        m1, m2 = (metric_at(r.get("metrics") or {}, key) or {} for r in reps)
        d1, d2 = m1.get("difference"), m2.get("difference")
        if d1 is None and d2 is None:
            continue
        rows.append({"metric": label, "d1": d1, "d2": d2,
                     "change": (d2 - d1) if d1 is not None and d2 is not None else None,
                     "sig1": m1.get("significant"), "sig2": m2.get("significant")})
    changed = [c for c in cmp["cases"] if c["flipped"] or (
        c["faithfulness_b_1"] is not None and c["faithfulness_b_2"] is not None
        and (c["faithfulness_b_1"] >= 0.85) != (c["faithfulness_b_2"] >= 0.85))]
    return {**cmp, "metrics": rows, "changed": changed,
            "claims": [claim_line(r) for r in reps]}


def review_items(store, run_id: str, reviewer: str) -> dict[str, Any]:
    """The run's blind review items as `review export` drew them (content rebuilt by the
    pack's own code), each with the label `reviewer` gave it, shown on the item's scale."""
    from ..review.items import item_number
    from ..review.pack import Sources, item_content

    rows = sorted(store.review_items(run_id), key=lambda r: item_number(r["item_id"]))  # pack order
    if not rows:
        return {"items": [], "n_labelled": 0, "labellers": []}
    content = item_content(Sources(store, run_id), rows)
    sides = {r["item_id"]: (json.loads(r["mapping_json"] or "{}").get("sides") or {}) for r in rows}
    mine, labellers = {}, set()
    for lab in store.human_labels(run_id):
        labellers.add(lab["reviewer"])
        if lab["reviewer"] == reviewer:
            shown = lab["label"]
            back = {v: k for k, v in sides.get(lab["item_id"], {}).items()}
            mine[lab["item_id"]] = back.get(shown, shown)   # "A"/"B" back to "1"/"2"
    for it in content:
        it["given"] = mine.get(it["item_id"])
    return {"items": content, "n_labelled": sum(1 for it in content if it["given"]),
            "labellers": sorted(x for x in labellers if x)}
