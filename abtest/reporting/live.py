"""The report of a live run (kind = "live"), beside the frozen one it confirms.

Same top-level keys as the frozen report (schema_version, run_id, kind, status,
n_cases, metrics, claim, incidents, per_case, gate) plus `metrics.retrieval`
(context precision / recall against the golden relevant_chunk_ids, per question,
averaged; questions without relevant ids excluded and counted), `metrics.latency`
(p50 / p95 per variant), `claims` {frozen, live} — two separate sentences: "Given
these contexts…" from the frozen run and "End to end, with retriever R on corpus
V…" from this one — and, when the live run names a frozen run, `frozen_comparison`
rows: per metric the frozen B − A, the live B − A and their ratio (how much survived).

Only finished questions (A and B answered, every judge without error) enter a
statistic; nothing is estimated.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from abtest.errors import UserError
from abtest.core.fmt import num, pct
from abtest.review.agreement import run_judge_validation
from abtest.store.runs import load_run
from abtest.reporting.build import SCHEMA_VERSION, calls_summary
from abtest.reporting.claim import CLAIM_JUDGES, effect_reasons, sentence
from abtest.reporting import notes
from abtest.reporting.markdown import cell
from abtest.reporting.metrics import compute_metrics, continuous, metric_at, plain
from abtest.reporting.model import json_shape
from abtest.reporting.metrics import context_precision_recall
from abtest.reporting.metrics import percentile
from abtest.reporting.build import checks_table
from abtest.reporting import incidents
from abtest.reporting.model import validate_live_report
from abtest.reporting.gate import evaluate_gate
from abtest.core.models import Config
from abtest.store.state import run_progress
from abtest.store.runs import check_fixture_unchanged
from abtest.reporting.build import build_report
from abtest.reporting.markdown import judge_validation_md
from abtest.reporting.html import render_live_html

if TYPE_CHECKING:
    from abtest.store import Store
    from abtest.reporting.model import LiveReport

VARIANTS = ("A", "B")
# compared frozen vs live per case (citation accuracy has no per-case value)
COMPARED = ("pairwise", "faithfulness", "coverage", "abstention_answerable",
            "abstention_unanswerable", "quality", "relevance")


def _retrieval(finished, questions, chunk_ids, alpha) -> dict:

    prec: dict[str, dict[str, float | None]] = {v: {} for v in VARIANTS}
    rec: dict[str, dict[str, float | None]] = {v: {} for v in VARIANTS}
    excluded: list[str] = []
    for cid in finished:
        rel = questions[cid].get("relevant_chunk_ids") or []
        if not rel:
            excluded.append(cid)
            continue
        for v in VARIANTS:
            p, r = context_precision_recall(chunk_ids[(cid, v)], rel)
            prec[v][cid], rec[v][cid] = p, r
    used = [c for c in finished if c not in set(excluded)]
    out: dict[str, Any] = {}
    for name, table in (("context_precision", prec), ("context_recall", rec)):
        m = continuous(name, table["A"], table["B"], used, alpha)
        for k in ("summary_a", "summary_b", "sensitivity", "mde"):
            m.pop(k, None)
        m.update({"n_excluded_no_relevant_ids": len(excluded),
                  "excluded_no_relevant_ids": sorted(excluded),
                  "definition": ("relevant retrieved / retrieved" if name == "context_precision"
                                 else "relevant retrieved / relevant") +
                  " per question vs golden relevant_chunk_ids, averaged"})
        if not used:
            m["note"] = "no finished question has relevant_chunk_ids"
        out[name] = m
    same = [c for c in finished if chunk_ids[(c, "A")] == chunk_ids[(c, "B")]]
    out["same_retrieval_share"] = (len(same) / len(finished)) if finished else None
    out["note_same_retrieval"] = ("share of questions where A and B retrieved the same chunk ids in "
                                  "the same order; below 1 the live systems did not see the same "
                                  "material, so the difference is not the prompt's alone")
    return out


def _latency(finished, items) -> dict:

    out: dict[str, Any] = {}
    kinds = set()
    for v in VARIANTS:
        xs = [items[(c, v)]["latency_ms"] for c in finished
              if items[(c, v)]["latency_ms"] is not None]
        kinds |= {items[(c, v)]["latency_kind"] for c in finished}
        key = v.lower()
        out[f"p50_ms_{key}"] = percentile(xs, 50)
        out[f"p95_ms_{key}"] = percentile(xs, 95)
        out[f"mean_ms_{key}"] = (sum(xs) / len(xs)) if xs else None
        out[f"n_{key}"] = len(xs)
    out["latency_kind"] = sorted(k for k in kinds if k)
    out["method"] = ("per answer: time to first token when streamed, total request time "
                     "otherwise; percentiles by linear interpolation over finished questions")
    return out


def _checks(finished, checks, alpha) -> dict:
    """The frozen report's checks table over this run's stored check rows."""

    chk_by: dict[tuple[str, str], dict] = defaultdict(dict)
    for c in checks:
        chk_by[(c["case_id"], c["variant"])][c["name"]] = c["passed"]
    return checks_table(chk_by, set(finished), alpha)


def _incidents(finished, jby, claims, answers, questions, chunk_ids, cfg) -> list[dict]:

    score_of = {v: {cid: (jby.get((cid, "faithfulness", v)) or {}).get("score")
                    for cid in finished} for v in VARIANTS}
    return [{"case_id": i["case_id"], "variant": i["variant"], "faithfulness": i["faithfulness"],
             "question": questions[i["case_id"]]["question"],
             "answer": answers.get((i["case_id"], i["variant"])),
             "unsupported": i["unsupported"],
             "context_ids": chunk_ids.get((i["case_id"], i["variant"]), [])}
            for i in incidents.find(finished, score_of, claims, cfg.gates.incident_faithfulness)]


_PAIRWISE_SCORE = {"B": 1.0, "A": 0.0, "tie": 0.5}


def _case_pair(row: dict, key: str) -> tuple[float, float] | None:
    """One case's (A, B) value of a compared metric, from a report's per-case row."""
    if key == "pairwise":
        b = _PAIRWISE_SCORE.get(row.get("pairwise") or "")
        return None if b is None else (1.0 - b, b)
    if key.startswith("abstention_"):
        if bool(row.get("answerable", True) is not False) != (key == "abstention_answerable"):
            return None
        a, b = row.get("abstained_a"), row.get("abstained_b")
        return None if a is None or b is None else (float(a), float(b))
    a, b = row.get(f"{key}_a"), row.get(f"{key}_b")
    return None if a is None or b is None else (float(a), float(b))


def _means(pairs: list[tuple[float, float]]) -> tuple[float, float, float]:
    a = sum(p[0] for p in pairs) / len(pairs)
    b = sum(p[1] for p in pairs) / len(pairs)
    return a, b, b - a


def common_cases(frozen: dict, live: dict) -> dict:
    """The cases both runs finished: the only ones frozen and live figures are compared on."""
    f = {r["case_id"] for r in frozen.get("per_case") or [] if r.get("finished")}
    li = {r["case_id"] for r in live.get("per_case") or [] if r.get("finished")}
    return {"n": len(f & li), "ids": sorted(f & li), "frozen_only": len(f - li),
            "live_only": len(li - f),
            "note": "each row compares frozen and live over the same cases: those both runs "
                    "finished and that have the metric's value in both"}


def frozen_comparison_rows(frozen: dict, live: dict) -> list[dict]:
    """Per compared metric, frozen and live A, B and B − A over exactly the same cases.

    A whole-run figure would compare the fixture's cases against the golden questions the
    live run answered; here both columns are recomputed from the per-case rows of the
    cases both runs finished (for each metric, those with its value in both runs).
    Citation accuracy has no per-case value and is not compared."""
    f_rows = {r["case_id"]: r for r in frozen.get("per_case") or []}
    l_rows = {r["case_id"]: r for r in live.get("per_case") or []}
    both = [(f_rows[c], l_rows[c]) for c in common_cases(frozen, live)["ids"]]
    rows = []
    for key in COMPARED:
        raw = [(_case_pair(fr, key), _case_pair(lr, key)) for fr, lr in both]
        pairs = [(fp, lp) for fp, lp in raw if fp is not None and lp is not None]
        if not pairs:
            continue
        fa, fb, fd = _means([fp for fp, _ in pairs])
        la, lb, ld = _means([lp for _, lp in pairs])
        # both runs use the one judge plan; a figure measured two ways is never divided
        fm = (metric_at(frozen["metrics"], key) or {}).get("method")
        lm = (metric_at(live["metrics"], key) or {}).get("method")
        ratio = None
        if fd is not None and ld is not None and abs(fd) > 1e-12 and fm == lm:
            ratio = ld / fd
        if fd is None or ld is None:
            verdict = "not measured on both"
        elif fm != lm:
            verdict = f"not comparable: frozen measured by {fm}, live by {lm}"
        elif abs(fd) <= 1e-12:
            verdict = "no frozen effect to carry over"
        elif ratio is None or ratio < 0:
            verdict = "reversed end to end"
        elif ratio >= 0.8:
            verdict = "survived"
        elif ratio > 0:
            verdict = f"partly survived ({ratio:.0%})"
        else:
            verdict = "vanished end to end"
        rows.append({"metric": key, "n": len(pairs), "frozen_a": fa, "frozen_b": fb,
                     "frozen_difference": fd, "live_a": la, "live_b": lb, "live_difference": ld,
                     "ratio": ratio, "survival": verdict, "measure": lm or fm})
    return rows


def cfg_alpha(r: dict) -> float:
    return (r.get("holm") or {}).get("alpha", 0.05)


def _effect_text(m: dict) -> str:
    f = m.get("faithfulness") or {}
    if f.get("difference") is None:
        return "faithfulness was not measured on any complete pair"
    return (f"B − A faithfulness {f['difference']:+.3f} ({pct(f.get('conf_level') or 0.95)} CI "
            f"{num(f.get('ci_low'))} to {num(f.get('ci_high'))}, Holm p = "
            f"{num(f.get('p_holm'))}), paired over {f.get('n')} questions")


def frozen_claim(frozen: dict) -> dict:
    c = dict(frozen.get("claim") or {})
    if c.get("licensed") and c.get("sentence"):
        statement = c["sentence"]
    else:
        statement = (f"Given these contexts (frozen run {frozen['run_id']}, fixture "
                     f"{frozen['fixture']['name']}), {_effect_text(frozen['metrics'])}; no claim "
                     "is licensed: " + "; ".join(c.get("reasons") or ["(no reason recorded)"]) + ".")
    c["statement"] = statement
    c["run_id"] = frozen["run_id"]
    return c


def live_claim(report: dict, cfg, frozen: dict | None) -> dict:
    m = report["metrics"]
    r, v = report["retriever"], report["corpus_version"]
    reasons = []
    if report["status"] != "complete":
        why = report.get("incomplete_reason") or f"{len(report['unfinished_cases'])} question(s) unfinished"
        reasons.append(f"incomplete live run: {why}")
    for side in ("a", "b"):
        if len(report["versions"][side]) > 1:
            reasons.append(f"assistant version drift in {side.upper()}: "
                           f"{', '.join(report['versions'][side])}")
    if report["status"] == "complete":
        reasons += effect_reasons(m, cfg)
    # a judge validated on the frozen run with the same judge model stands for the live run
    val = dict(report["judge_validation"])
    fv = (frozen or {}).get("judge_validation") or {}
    if frozen and frozen["models"]["judge"]["requested"] == report["models"]["judge"]["requested"]:
        for j in CLAIM_JUDGES:
            if not (val.get(j) or {}).get("validated") and (fv.get(j) or {}).get("validated"):
                val[j] = {**fv[j], "source": f"frozen run {frozen['run_id']}"}
    if report["status"] == "complete":
        for j in CLAIM_JUDGES:
            if j in (report.get("judges") or CLAIM_JUDGES) and not val[j]["validated"]:
                reasons.append(f"{j} judge not validated: {val[j].get('reason')}")
    retr = m.get("retrieval") or {}
    lat = m.get("latency") or {}
    tail = (f"context precision B {num((retr.get('context_precision') or {}).get('b'))}, recall B "
            f"{num((retr.get('context_recall') or {}).get('b'))}, p95 latency B "
            f"{num(lat.get('p95_ms_b'), 0)} ms")
    scope = "live: end to end, with the retrieval the live systems actually did"
    if reasons:
        statement = (f"End to end, with retriever {r} on corpus {v}, {_effect_text(m)} ({tail}); "
                     "no claim is licensed: " + "; ".join(reasons) + ".")
        return {"licensed": False, "sentence": None, "statement": statement, "reasons": reasons,
                "scope": scope}
    text = sentence(m, val, cfg, prefix=f"End to end, with retriever {r} on corpus {v}")
    text = text[:-1] + f"; {tail}."
    return {"licensed": True, "sentence": text, "statement": text, "reasons": [],
            "scope": scope}


def build_live_report(store: Store, run_id: str, config: Any = None) -> LiveReport:
    """Every number of the live report from the store; nothing is estimated. Checked against
    `model.LiveReport` as the frozen report is against `Report`."""

    return validate_live_report(_build_live_report(store, run_id, config))


def _build_live_report(store: Store, run_id: str, config: Any = None) -> dict:

    run = load_run(store, run_id)
    if run["kind"] != "live":
        raise UserError(f"run {run_id!r} is a {run['kind']} run, not a live one")
    cfg = config or Config.model_validate(json.loads(run["config_json"]))
    alpha = cfg.alpha
    info = json.loads(run["info_json"] or "{}")
    questions = {q["id"]: q for q in info.get("questions", [])}
    order = [q["id"] for q in info.get("questions", [])]
    rows = store.live_items(run_id)
    items = {(r["case_id"], r["variant"]): r for r in rows}
    judg = [j for j in store.judgments(run_id) if j["sample"] == 0]
    jby = {(j["case_id"], j["judge"], j["subject"]): j for j in judg}
    errors: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if r["error"]:
            errors[r["case_id"]].append(f"{r['variant']}: {r['error']}")
    for j in judg:
        if j["error"]:
            errors[j["case_id"]].append(f"{j['judge']}[{j['subject']}]: {j['error']}")
    # the run's state and its finished questions: the one rule every surface reads (runstate)

    prog = run_progress(store, run, cases=questions)
    done = set(prog.finished)
    finished = [c for c in order if c in done]
    unfinished = [c for c in order if c not in done]
    status = prog.state
    answers = {k: r["answer"] for k, r in items.items()}
    chunks = {k: json.loads(r["retrieved_json"] or "[]") for k, r in items.items()}
    chunk_ids = {k: [c["id"] for c in v] for k, v in chunks.items()}

    jv: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for j in judg:
        jv[(j["judge"], j["subject"])][j["case_id"]] = j
    jv = dict(jv)
    metrics: dict[str, Any] = {}
    outcomes: dict[str, str] = {}
    judges = info.get("judges") or cfg.judges
    holm: dict[str, Any] = {"alpha": alpha}
    if status == "complete":
        metrics, outcomes, holm = compute_metrics(
            finished, jv, {c: bool(questions[c].get("answerable", True)) for c in finished},
            {k: len(a or "") for k, a in answers.items()}, cfg, judges)
        if metrics.get("pairwise"):
            metrics["pairwise"]["judge_context"] = "the union of the chunks A and B retrieved"
        metrics["checks"] = _checks(finished, store.checks(run_id), alpha)
        metrics["retrieval"] = _retrieval(finished, questions, chunk_ids, alpha)
        metrics["latency"] = _latency(finished, items)
        holm["note"] = ("members without data count as p = 1; confidence intervals are "
                        "unadjusted; retrieval metrics are descriptive")

    versions = {v.lower(): sorted({r["assistant_version"] for r in rows
                                   if r["variant"] == v and r["assistant_version"]})
                for v in VARIANTS}
    names = {}
    for v in VARIANTS:
        given = run[f"variant_{v.lower()}_name"]
        names[v.lower()] = (versions[v.lower()][0] if given == v and versions[v.lower()]
                            else given)
    resolved = store.resolved_models(run_id)
    stop_reason = None
    errored = [r for r in rows if r["error"]]
    if errored:
        last = errored[-1]
        stop_reason = f"{last['error']} (question {last['case_id']}, {last['variant']})"
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "kind": "live", "status": status,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "created_at": plain(run["created_at"]), "n_cases": len(order),
        "n_finished": len(finished), "unfinished_cases": unfinished,
        "unfinished_reasons": {c: [r if r != "not started" else "not asked (the run stopped)"
                                   for r in prog.reasons.get(c, ["not judged"])][:3]
                               for c in unfinished},
        "incomplete_reason": stop_reason,
        "golden": {"name": run["fixture_name"], "path": run["fixture_path"],
                   "sha256": run["fixture_sha256"]},
        "fixture": {"name": run["fixture_name"], "corpus_version": run["corpus_version"],
                    "cases_sha256": run["fixture_sha256"], "retriever": run["retriever"]},
        "retriever": run["retriever"], "corpus_version": run["corpus_version"],
        "targets": {"a": info.get("targets", {}).get("A"), "b": info.get("targets", {}).get("B")},
        "variants": {"a": {"name": names["a"], "sha256": run["variant_a_sha256"],
                           "target": run["variant_a_path"]},
                     "b": {"name": names["b"], "sha256": run["variant_b_sha256"],
                           "target": run["variant_b_path"]}},
        "versions": versions,
        "models": {"generator": {"requested": run["generator_model"], "resolved": []},
                   "judge": {"requested": run["judge_model"],
                             "resolved": resolved.get(run["judge_model"], [])}},
        "comparison_kind": "live", "git_commit": run["git_commit"],
        "judges": judges,
        "judge_validation": run_judge_validation(store, run_id, cfg),
        "metrics": metrics,
        "holm": holm,
        "incidents": _incidents(finished, jby, store.claims(run_id), answers, questions,
                                chunk_ids, cfg),
        "calls": calls_summary(store, run_id, len(order)),
    }
    if status != "complete":
        report["estimates_withheld"] = (
            f"incomplete live run: {len(unfinished)} question(s) unfinished; no metric, p-value "
            "or interval is shown until every question is finished")
    frozen = None
    fid = info.get("frozen_run_id")
    if fid:
        frozen, ferr = _frozen_report(store, fid)
        if frozen is None:
            report["frozen_comparison"] = []
            report["frozen_comparison_note"] = ferr
    report["claim"] = live_claim(report, cfg, frozen)
    report["claims"] = {"frozen": frozen_claim(frozen) if frozen else None,
                        "live": report["claim"]}
    if frozen is not None:
        report["frozen_run_id"] = fid
    report["per_case"] = _per_case(order, finished, questions, items, chunk_ids, jby, outcomes,
                                   store.checks(run_id), errors)
    if frozen is not None:
        cc = common_cases(frozen, report)
        report["frozen_comparison_cases"] = {k: v for k, v in cc.items() if k != "ids"}
        report["frozen_comparison"] = frozen_comparison_rows(frozen, report)
    report["gate"] = evaluate_gate(report, cfg.gates)
    return report


def _frozen_report(store, run_id: str) -> tuple[dict | None, str | None]:

    try:
        run = load_run(store, run_id)
        check_fixture_unchanged(run)
        return build_report(store, run_id).as_dict(), None
    except UserError as exc:
        return None, f"frozen run {run_id} cannot be compared: {exc.line()}"


def _per_case(order, finished, questions, items, chunk_ids, jby, outcomes, checks, errors):

    fails = defaultdict(list)
    for c in checks:
        if c["passed"] is False:
            fails[(c["case_id"], c["variant"])].append(c["name"])
    fin = set(finished)
    out = []
    for cid in order:
        q = questions[cid]
        row = {"case_id": cid, "question": q["question"], "answerable": q.get("answerable"),
               "category": q.get("category"), "finished": cid in fin,
               "errors": errors.get(cid, []),
               "relevant_chunk_ids": q.get("relevant_chunk_ids") or []}
        for v in VARIANTS:
            k = v.lower()
            it = items.get((cid, v)) or {}
            row[f"answer_{k}"] = it.get("answer")
            row[f"retrieved_{k}"] = chunk_ids.get((cid, v), [])
            row[f"scores_{k}"] = json.loads(it["scores_json"]) if it.get("scores_json") else []
            row[f"latency_ms_{k}"] = it.get("latency_ms")
            row[f"version_{k}"] = it.get("assistant_version")
            if cid in fin:
                p, r = context_precision_recall(row[f"retrieved_{k}"], row["relevant_chunk_ids"])
                row[f"context_precision_{k}"], row[f"context_recall_{k}"] = p, r
                for judge in ("faithfulness", "coverage", "quality", "relevance"):
                    j = jby.get((cid, judge, v))
                    if j is not None:
                        row[f"{judge}_{k}"] = j.get("score")
                j = jby.get((cid, "abstention", v))
                if j is not None and j.get("verdict"):
                    row[f"abstained_{k}"] = j["verdict"] == "abstained"
                row[f"checks_failed_{k}"] = fails.get((cid, v), [])
        if cid in outcomes:
            row["pairwise"] = outcomes[cid]
        out.append(row)
    return out


# --------------------------------------------------------------------------- rendering


def render_live_markdown(report: LiveReport) -> str:
    r = json_shape(report)
    L: list[str] = []
    add = L.append
    m = r["metrics"]
    add(f"# abtest live report — run {r['run_id']}")
    add("")
    add(f"- Status: **{r['status']}** — {r['n_finished']}/{r['n_cases']} questions finished"
        + (f" — incomplete: {r['incomplete_reason']}" if r.get("incomplete_reason") else ""))
    add(f"- Golden questions: `{r['golden']['name']}` (sha256 {str(r['golden']['sha256'])[:12]})")
    add(f"- Retriever: {r['retriever']}; corpus: {r['corpus_version']}")
    for s in ("a", "b"):
        vv = ", ".join(r["versions"][s]) or "not reported"
        add(f"- {s.upper()}: `{r['variants'][s]['target']}` (assistant version {vv})")
    add(f"- Judge: `{r['models']['judge']['requested']}`")
    add("")
    add("## Claims")
    add("")
    fc = (r.get("claims") or {}).get("frozen")
    if fc:
        add(f"**Frozen (run {fc['run_id']}):** {fc['statement']}")
        add("")
    add(f"**Live:** {r['claim']['statement']}")
    add("")
    rows = r.get("frozen_comparison")
    if rows:
        add("## Frozen vs live (B − A)")
        add("")
        add(notes.markdown(notes.frozen_vs_live_cases(r.get("frozen_comparison_cases") or {})))
        add("")
        add("| metric | n | frozen | live | ratio (live/frozen) | |")
        add("|---|---|---|---|---|---|")
        for x in rows:
            add(f"| {x['metric']} | {x.get('n')} | {num(x['frozen_difference'], signed=True)} | "
                f"{num(x['live_difference'], signed=True)} | {num(x['ratio'], 2)} | {x['survival']} |")
        add("")
    elif r.get("frozen_comparison_note"):
        add(f"_{r['frozen_comparison_note']}_")
        add("")
    add("## Live metrics")
    add("")
    add(f"| metric | n | A | B | B − A | {pct(1 - cfg_alpha(r))} CI | p (Holm) |")
    add("|---|---|---|---|---|---|---|")

    def line(name, mm):
        if not mm:
            return
        ci = "n/a" if mm.get("ci_low") is None else f"[{num(mm['ci_low'])}, {num(mm['ci_high'])}]"
        add(f"| {name} | {mm.get('n')} | {num(mm.get('a'))} | {num(mm.get('b'))} | "
            f"{num(mm.get('difference'), signed=True)} | {ci} | {num(mm.get('p_value'))} "
            f"({num(mm.get('p_holm'))}) |")
    line("pairwise (win rate)", m.get("pairwise"))
    for k in ("faithfulness", "coverage", "quality", "relevance"):
        line(k, m.get(k))
    ab = m.get("abstention") or {}
    line("refusals, answerable", ab.get("answerable"))
    line("refusals, out of scope", ab.get("unanswerable"))
    retr = m.get("retrieval") or {}
    line("context precision", retr.get("context_precision"))
    line("context recall", retr.get("context_recall"))
    add("")
    if r.get("estimates_withheld"):
        add(f"_{notes.markdown(notes.live_withheld(r))}_")
        add("")

    add("## Judge validation (human labels, per judge)")
    add("")
    add(judge_validation_md(r.get("judge_validation") or {}))
    add("")
    for said in notes.live_system_notes(m):
        add(notes.markdown(said))
    add("")
    g = r.get("gate") or {}
    if g:
        add(f"## Gate: **{g['decision']}**")
        add("")
        for rule in g["rules"]:
            add(f"- {rule['status']}: {rule['name']} = {num(rule['value'])} (threshold "
                f"{rule['threshold']})" + (f" — {rule['note']}" if rule.get("note") else ""))
        for reason in g.get("reasons", []):
            add(f"- reason: {reason}")
        add("")
    if r["incidents"]:
        add("## Hallucination incidents")
        add("")
        for i in r["incidents"]:
            add(f"- {i['case_id']} ({i['variant']}): faithfulness {num(i['faithfulness'])} — "
                f"{cell(i['answer'], 120)}")
        add("")
    add("## Per question")
    add("")
    add("| id | finished | retrieved A | retrieved B | latency A | latency B | answer B |")
    add("|---|---|---|---|---|---|---|")
    for row in r["per_case"]:
        add(f"| {row['case_id']} | {num(row['finished'])} | {cell(', '.join(row['retrieved_a']), 60)} | "
            f"{cell(', '.join(row['retrieved_b']), 60)} | {num(row['latency_ms_a'], 0)} | "
            f"{num(row['latency_ms_b'], 0)} | {cell(row['answer_b'], 80)} |")
    add("")
    return "\n".join(L)


def render_live(report: LiveReport, fmt: str) -> str:
    """md, json or html (a page like the frozen report's) for a live report."""
    if fmt == "json":
        return json.dumps(json_shape(report), indent=2, default=str) + "\n"
    if fmt == "md":
        return render_live_markdown(report)
    if fmt == "html":

        return render_live_html(report)
    raise ValueError(f"unknown report format {fmt!r}")
