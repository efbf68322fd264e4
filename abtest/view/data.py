"""What the view's pages show, read from the store: plain dicts, no HTML.

Reports are built by the same code as `abtest report` and kept per state of the run (status,
finish time, its review labels), so a finished run's page is built once, a running run's is
rebuilt as it moves, and a label given in the review page shows in the run's agreement.
"""

from __future__ import annotations

import difflib
import json
import threading
from typing import TYPE_CHECKING, Any

from abtest.errors import UserError
from abtest.reporting.summary import state_of
from abtest.store.state import run_progress
from abtest.store.runs import resume_hint
from pathlib import Path
from abtest.reporting.model import json_shape
from abtest.reporting.summary import build_any
from abtest.reporting.summary import summarize
from abtest.reporting.summary import summarize_json
import re
from itertools import zip_longest
from abtest.prompts.variants import messages_text
from abtest.prompts.variants import unified_diff
from abtest.reporting.compare import compare_runs
from abtest.reporting.metrics import metric_at
from abtest.store.runs import load_run, run_config
from abtest.review.items import item_number
from abtest.review.pack import Sources, item_content

if TYPE_CHECKING:
    from abtest.reporting.model import LiveReport, Report

# per run and state: the typed report (what renders it) and its JSON shape (what the pages read)
_CACHE: dict[tuple, tuple[Report | LiveReport, dict]] = {}
_SUMMARIES: dict[tuple, dict] = {}
_LOCK = threading.Lock()


def _state(store, run: dict, p: dict[str, Any] | None = None,
           labels: tuple | None | bool = False) -> str:
    """The run's version: its state as its stored summary records it; a run stored as
    running also counts its cases (`p`, counted here when not given) and says whether a
    process still writes it. The pages ask for it (/runs/states, /runs/ID/progress) and
    redraw whatever shows a run whose version moved: a case finished, a look taken, the run
    ended, died, or was resumed by another process."""

    st = state_of(run, store.labels_state(run["run_id"]) if labels is False or labels is True
                  else labels)
    if run["status"] == "running":
        p = p or counts(store, run)
        st += (f"|{p['state']}|{p['started']}|{p['finished']}|{p['errored']}|{p['n_used']}"
               f"|{p['stop']}")
    return st


def versions(store) -> dict[str, str]:
    """Every run's version (`_state`), for the runs page to redraw the rows that moved."""
    labels = store.labels_states()
    out = {}
    for run in store.list_runs(columns=RUN_COLUMNS):
        rid = run["run_id"]
        if run["status"] == "running":
            run = store.get_run(rid) or run
        out[rid] = _state(store, run, labels=labels.get(rid))
    return out


def counts(store, run: dict) -> dict[str, Any]:
    """The run's state and case counts by the one rule (runstate.run_progress)."""

    full = run if "info_json" in run else (store.get_run(run["run_id"]) or run)
    return run_progress(store, full).as_dict()


def progress(store, run: dict) -> dict[str, Any]:
    """Where a run is, for the line every page of an unfinished run shows: its state
    (running, interrupted, stopped, incomplete, complete), cases finished of all, with an
    error, and how to continue it (never for a running run: that would start a second
    writer). The state is the one rule's (runstate), computed here once."""

    full = run if "info_json" in run else (store.get_run(run["run_id"]) or run)
    out = {**counts(store, full), "hint": None, "why": ""}
    state = out["state"]
    if state not in ("running", "interrupted") and full["status"] == "running":
        full = store.get_run(full["run_id"]) or full   # it ended between the reads
    out["version"] = _state(store, full, out if full["status"] == "running" else None)
    if state == "interrupted":
        out["why"] = ("No process is writing it: the process that ran it stopped before the "
                      "end (killed, or the machine restarted).")
    elif state == "stopped":
        out["why"] = ("It was stopped (Ctrl-C or SIGTERM) and recorded so; unfinished cases are "
                      "not scored until it is resumed and every case is finished.")
    elif state == "incomplete":
        out["why"] = ("Unfinished cases are not scored; the run page's and report's figures wait "
                      "until every case is finished.")
    if state in ("interrupted", "stopped", "incomplete"):
        batch = bool(store.has_table("batches") and store.batches(run["run_id"], pending=True))
        out["hint"] = resume_hint(run, batch=batch)
    return out


_FIXTURE_COUNTS: dict[tuple, dict] = {}


def fixture_counts(run: dict) -> dict[str, int] | None:
    """The fixture's cases, answerable and out of scope, read from its cases file (what a
    running run's page can say before any figure exists); None when it is not readable."""

    p = Path(run.get("fixture_path") or "") / "cases.jsonl"
    key = (str(p), run.get("fixture_sha256"))
    with _LOCK:
        hit = _FIXTURE_COUNTS.get(key)
    if hit is not None:
        return hit
    try:
        with open(p, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError):
        return None
    out = {"cases": len(rows), "answerable": sum(1 for r in rows if r.get("answerable", True)),
           "out_of_scope": sum(1 for r in rows if r.get("answerable", True) is False)}
    with _LOCK:
        _FIXTURE_COUNTS[key] = out
    return out


def report_of(store, run: dict, state: str | None = None) -> dict:
    """The run's report (frozen or live) as its JSON shape, built once per state of the run."""
    return _report(store, run, state)[1]


def typed_report_of(store, run: dict, state: str | None = None) -> Report | LiveReport:
    """The same report, typed: what the renderers take."""
    return _report(store, run, state)[0]


def _report(store, run: dict, state: str | None) -> tuple[Report | LiveReport, dict]:

    key = (str(store.path), run["run_id"], state or _state(store, run))
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    rep = build_any(store, run)
    pair = (rep, json_shape(rep))  # shared, read-only
    with _LOCK:
        _CACHE[key] = pair
    return pair


def summary_of(store, run: dict) -> dict:
    """A finished run's summary for the runs page, built from its report when the store has
    none for its current state (the view opens the store read-only: it keeps it in memory)."""

    state = _state(store, run)
    key = (str(store.path), run["run_id"], state)
    with _LOCK:
        hit = _SUMMARIES.get(key)
    if hit is None:
        hit = summarize(typed_report_of(store, run, state))
        with _LOCK:
            _SUMMARIES[key] = hit
    return hit


def claim_line(rep: dict) -> tuple[bool, str]:

    s = summarize_json(rep)
    return s["licensed"], s["claim"]


# what the runs page reads of each run (state_of needs status and finished_at)
RUN_COLUMNS = ("run_id", "kind", "status", "created_at", "finished_at", "fixture_name",
               "corpus_version", "variant_a_name", "variant_b_name", "generator_model",
               "judge_model", "n_cases")


def _run_row(run: dict) -> dict[str, Any]:
    return {"run_id": run["run_id"], "kind": run["kind"], "status": run["status"],
            "created_at": str(run["created_at"])[:19], "fixture": run["fixture_name"],
            "corpus_version": run["corpus_version"], "a": run["variant_a_name"],
            "b": run["variant_b_name"], "generator": run["generator_model"],
            "judge": run["judge_model"], "n_cases": run["n_cases"], "counts": None,
            "n_used": None, "n_not_needed": None, "resume": None, "pending": False,
            "licensed": False, "claim": "", "reasons": [], "resolved": "", "gate": "—",
            "pairwise": None, "faithfulness": None}


def _with_summary(row: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    row.update({k: summary.get(k) for k in ("licensed", "claim", "gate", "resolved",
                                             "n_finished", "pairwise", "faithfulness",
                                             "counts", "n_used", "n_not_needed", "resume")})
    if summary.get("status"):   # the report's state: the one rule's, not the stored word
        row["status"] = summary["status"]
    row["reasons"] = summary.get("reasons") or ([] if summary.get("licensed")
                                                else [summary.get("claim")])
    if row.get("resume"):   # the command sits beside the claim (whole, wrapping), not in it
        row["claim"] = unfinished_claim(row["status"], row.get("counts") or "")
        row["reasons"] = [row["claim"], *row["reasons"][1:]]
    return row


def unfinished_claim(state: str, counts: str) -> str:
    """The claim cell of an unfinished run: where it is, and that nothing is estimated."""
    if state == "running":
        return f"running: {counts}; no claim until every case is finished"
    why = {"interrupted": "its process stopped before the end",
           "stopped": "it was stopped (Ctrl-C or SIGTERM)"}.get(state, "cases are unfinished")
    return f"{state}: {counts} ({why}); nothing is estimated until every case is finished"


def _running_row(store, run: dict, row: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """A run stored as running: running while its writer lives, else interrupted (an
    INCOMPLETE gate, like a stopped run's, and the command that resumes it)."""

    state = p["state"]
    row.update(status=state, n_finished=p["finished"], counts=p["counts"], n_used=p["n_used"],
               n_not_needed=p["not_needed"], claim=unfinished_claim(state, p["counts"]))
    if state != "running":
        row.update(gate="INCOMPLETE", resume=resume_hint(run))
    row["reasons"] = [row["claim"]]
    return row


def runs_overview(store) -> list[dict]:
    """Every run, newest first, with its claim line, gate decision and who won: from the
    summaries the store keeps, else from this process's memory; a run with neither is marked
    pending and the page asks for its row (/runs/ID/row) after it has rendered."""

    runs = list(reversed(store.list_runs(columns=RUN_COLUMNS)))
    stored, labels = store.run_summaries(), store.labels_states()
    out = []
    for run in runs:
        rid = run["run_id"]
        row = _run_row(run)
        if run["status"] == "running":   # counted now: its state moves as it runs, or died
            full = store.get_run(rid) or run
            p = counts(store, full)
            if p["state"] in ("running", "interrupted"):
                row["version"] = _state(store, full, p, labels=labels.get(rid))
                out.append(_running_row(store, full, row, p))
                continue
            run = store.get_run(rid) or full   # it ended between the reads: as it ended
            row = _run_row(run)
        row["version"] = _state(store, run, labels=labels.get(rid))
        state = state_of(run, labels.get(rid))
        summary = stored.get(rid)
        if summary is None or summary["state"] != state or "reasons" not in summary:
            with _LOCK:
                summary = _SUMMARIES.get((str(store.path), rid, state))
        if summary is None:
            row.update(pending=True, claim="…", gate="…")
        else:
            _with_summary(row, summary)
        out.append(row)
    return out


# the runs page's filters: URL parameter → the row's text it searches (case-insensitive, a
# part of it); view.js applies the same rule as one types, on the rows' data-* attributes
RUN_FILTERS = {"fixture": lambda r: r.get("fixture") or "",
               "variant": lambda r: f"{r.get('a') or ''} {r.get('b') or ''}",
               "created": lambda r: str(r.get("created_at") or "")}


def filter_runs(rows: list[dict], query: dict[str, str]) -> int:
    """Mark each row shown or not by the filters in `query` (the page keeps every row, hidden,
    so a filter changed in the page needs no reload); the number shown."""
    wanted = {k: v.lower() for k, v in query.items() if v and k in RUN_FILTERS}
    for row in rows:
        row["shown"] = all(v in RUN_FILTERS[k](row).lower() for k, v in wanted.items())
    return sum(row["shown"] for row in rows)


def run_row(store, run: dict) -> dict[str, Any]:
    """One run's row of the runs page, its summary built now if need be."""
    row = _run_row(run)
    if run["status"] == "running":
        p = counts(store, run)
        if p["state"] in ("running", "interrupted"):
            row["version"] = _state(store, run, p)
            return _running_row(store, run, row, p)
        run = store.get_run(run["run_id"]) or run   # it ended between the reads: as it ended
        row = _run_row(run)
    row["version"] = _state(store, run)
    return _with_summary(row, summary_of(store, run))


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


# below this share of words in common (difflib's ratio over the two answers' words), a word
# diff is fragments of B in a wall of struck-through A: the page sets sentences side by side
DIFF_MIN_SHARED = 0.5


def _sentences(text: str) -> list[str]:

    return [x for x in (" ".join(p.split()) for p in
                        re.split(r"(?<=[.!?])\s+|\n+", text or "")) if x]


def answer_diff(a: str, b: str) -> dict[str, Any]:
    """B against A: a word diff when the answers share most of their words, else their
    sentences side by side (equal sentences on one row), with the share that decided it."""

    wa, wb = (a or "").split(), (b or "").split()
    shared = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).ratio() if wa or wb else 1.0
    out: dict[str, Any] = {"shared": shared, "shared_pct": round(100 * shared)}
    if shared >= DIFF_MIN_SHARED or not wa or not wb:
        out.update(mode="words", spans=word_diff(a, b))
        return out
    sa, sb = _sentences(a), _sentences(b)
    rows: list[tuple[str | None, str | None, bool]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=sa, b=sb, autojunk=False).get_opcodes():
        if op == "equal":
            rows += [(x, x, True) for x in sa[i1:i2]]
        else:
            rows += [(x, y, False) for x, y in zip_longest(sa[i1:i2], sb[j1:j2])]
    out.update(mode="sentences", rows=rows)
    return out


def _messages_text(messages_json: str | None) -> str:
    if not messages_json:
        return ""

    return messages_text(json.loads(messages_json))


def case_detail(store, run: dict, rep: dict, case_id: str) -> dict[str, Any]:
    """One case, side by side: its frozen context, both answers, their claims and the chunk
    each claim was checked against, coverage, abstention, checks and both pairwise orders."""

    row = next((r for r in rep.get("per_case") or [] if r["case_id"] == case_id), None)
    if row is None:
        raise UserError(f"case {case_id!r} is not in run {run['run_id']}")
    live = run["kind"] == "live"
    rows = store.case_rows(run["run_id"], case_id, live=live)
    case: dict[str, Any] | None
    if live:  # each variant's answer and the chunks its own retrieval returned
        gens = {it["variant"]: it for it in rows["live_items"]}
        context: list[dict[str, Any]] = []
        case = {"question": row.get("question"), "context": context}
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
                        context.append(seen[cid])
                    seen[cid]["by"].append(v)
    else:
        case = _fixture_case(run, case_id)
        gens = {g["variant"]: g for g in rows["generations"]}
    claims: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
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
    checks: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for c in rows["checks"]:
        checks.setdefault(c["variant"], []).append(
            {"name": c["name"], "passed": c["passed"], "detail": c.get("detail") or ""})
    finished = row.get("finished") is not False
    reasons = list((rep.get("unfinished_reasons") or {}).get(case_id) or row.get("errors") or [])
    judge_errors = {v: [f"{judge} judge: {j['error']}" for (judge, subj), j in judg.items()
                        if subj == v and j.get("error")] for v in ("A", "B")}
    judge_errors["pairwise"] = [f"pairwise judge ({subj[0]} shown first): {j['error']}"
                                for (judge, subj), j in judg.items()
                                if judge == "pairwise" and j.get("error")]
    faith_why = {}
    for v in ("A", "B"):
        j = judg.get(("faithfulness", v)) or {}
        if j.get("score") is not None:
            continue
        if (gens.get(v) or {}).get("error"):
            faith_why[v] = "not scored: the answer failed"
        elif j.get("error"):
            faith_why[v] = "not scored: the judge failed"
        elif not j:
            faith_why[v] = ("not scored yet" if finished else "not scored: the case is unfinished")
        elif (judg.get(("abstention", v)) or {}).get("verdict") == "abstained":
            faith_why[v] = "no factual claim, the answer abstained"
        else:
            faith_why[v] = "no factual claim"
    prompt = {v: _messages_text((gens.get(v) or {}).get("messages_json")) for v in ("A", "B")}
    chunks = [{"id": ch.get("id"), "text": ch.get("text"), "by": ch.get("by") or []}
              for ch in (case or {}).get("context", [])]
    cited: dict[Any, list[Any]] = {ch["id"]: [] for ch in chunks}
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
        "diff": answer_diff((gens.get("A") or {}).get("answer") or "",
                            (gens.get("B") or {}).get("answer") or ""),
        "claims": claims, "coverage": coverage,
        "abstention": {v: (judg.get(("abstention", v)) or {}).get("verdict") for v in ("A", "B")},
        # the abstention judge's own reason (whether the answer answers the question asked)
        "abstention_why": {v: (judg.get(("abstention", v)) or {}).get("rationale")
                           for v in ("A", "B")},
        "faithfulness": {v: (judg.get(("faithfulness", v)) or {}).get("score") for v in ("A", "B")},
        "pairwise": pairwise, "outcome": row.get("pairwise"), "checks": checks,
        "prompts": prompt, "prompt_diff": unified_diff(prompt["A"], prompt["B"], "A", "B"),
        "live": live, "finished": finished, "unfinished_reasons": reasons,
        "judge_errors": judge_errors, "faith_why": faith_why,
    }


def _result(j: dict | None) -> dict:
    try:
        out = json.loads(j["result_json"]) if j and j.get("result_json") else {}
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _fixture_case(run: dict, case_id: str) -> dict | None:
    """The frozen case as captured (context chunks in rank order), read from the fixture."""

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

    runs = [load_run(store, r) for r in (run1, run2)]
    reps = [report_of(store, run) for run in runs]
    cmp = compare_runs(store, run1, run2, reports=(reps[0], reps[1]))
    # a verdict change: B's faithfulness on different sides of each run's incident threshold
    t1, t2 = (run_config(run).gates.incident_faithfulness for run in runs)
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
        and (c["faithfulness_b_1"] >= t1) != (c["faithfulness_b_2"] >= t2))]
    return {**cmp, "metrics": rows, "changed": changed,
            "claims": [claim_line(r) for r in reps]}


def review_items(store, run_id: str, reviewer: str) -> dict[str, Any]:
    """The run's blind review items as `review export` drew them (content rebuilt by the
    pack's own code), each with the label `reviewer` gave it, shown on the item's scale."""

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
    # after this reviewer's label (never before: it would tell the verdict), an abstention
    # item shows what the judge said and why, for adjudicating a disagreement
    after = {r["item_id"]: (r.get("judge_label"),
                            json.loads(r["mapping_json"] or "{}").get("judge_rationale"))
             for r in rows if r.get("judge") == "abstention"}
    for it in content:
        it["given"] = mine.get(it["item_id"])
        said, why = after.get(it["item_id"], (None, None))
        it["judge_after"] = ({"label": said, "rationale": why}
                             if it["given"] is not None and said else None)
    return {"items": content, "n_labelled": sum(1 for it in content if it["given"]),
            "labellers": sorted(x for x in labellers if x)}
