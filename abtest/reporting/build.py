"""Turn stored judgments into the report dict (the JSON contract of docs/DESIGN.md).

Only finished cases are scored: a case with any generation or judge error is
listed as unfinished and never enters a statistic. Differences are B − A.
"""

from __future__ import annotations

import json
from collections import defaultdict
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from abtest.core.fmt import clip, pct
from abtest.core.gcpause import gc_paused
from abtest.review.agreement import run_judge_validation
from abtest.store.runs import load_run
from abtest.reporting import notes
from abtest.store.state import run_progress
from abtest.reporting.claim import licensed_claim  # noqa: F401  (API)
from abtest.reporting.metrics import SCORE_JUDGES, compute_metrics, holm_family  # noqa: F401
from abtest.reporting.metrics import plain as _plain
from abtest.reporting.model import validate_report
from abtest.core.models import Config
from abtest.core.groups import case_groups, group_summary
from abtest.capturing.golden import draft_summary
from abtest.reporting.gate import evaluate_gate
import warnings
from abtest.store.state import fixture_cases
from pathlib import Path
from abtest.core.fixture_set import read_manifest
from abtest.stats.looks import replay_run
from abtest.store.sequential_record import plan_for_run
from abtest import stats
from abtest.prompts.checks import paired_check_table
from abtest.reporting import incidents
from abtest.prompts.variants import messages_text, unified_diff
from abtest.store.runs import resume_hint
from abtest.review.ppi import ppi_headlines
from abtest.reporting.anytime import anytime_metrics

if TYPE_CHECKING:
    from abtest.store import Store
    from abtest.reporting.model import Report

SCHEMA_VERSION = 2  # 2: per-judge validation, margins, drop bound, length control
REMEDIES = {
    "retrieval_miss": ("low recall: the relevant chunk was not retrieved",
                       "increase k / add query expansion; check chunking of the source document"),
    "unsupported_claim": ("the answer states things the context does not support",
                          "tighten grounding instructions; re-ingest stale chunks; require citations"),
    "weak_sourcing": ("citations missing or pointing at chunks not in the context",
                      "fix source metadata / chunk ids; state the citation format in the prompt"),
    "formatting_drift": ("output format or length outside the variant's declared checks",
                         "restate the format rules; add an output example; lower max_tokens"),
    "banned_phrase": ("the answer says a phrase the variant or the case bans (must_not_say)",
                      "state the ban in the prompt; check whether the phrase list is current"),
    "keyword_gap": ("search keywords miss key concepts of the question",
                    "improve keyword extraction prompt; add synonyms / query expansion"),
    "incorrect_refusal": ("refused an answerable question",
                          "narrow the refusal triggers in the prompt"),
    "missed_refusal": ("answered an unanswerable question",
                       "loosen scope rules the other way: make refusal explicit when context lacks the answer"),
}


def build_report(store: Store, run_id: str, config: Any = None) -> Report:
    """Compute every number of the report from the store; nothing is estimated. What is built
    is checked against `report.model.Report`, the typed contract, and returned as one.

    The collector is paused: a 10,000-case report allocates a million acyclic objects and
    full collections over them were ~30 % of the time."""

    with gc_paused():
        return validate_report(_build_report(store, run_id, config))


# the only columns the report reads: each column read costs, rationales and prompts most
_GENERATION_COLUMNS = ("case_id", "variant", "answer", "error")
_JUDGMENT_COLUMNS = ("case_id", "judge", "subject", "sample", "verdict", "score", "result_json",
                     "error")
_CHECK_COLUMNS = ("case_id", "variant", "name", "passed")


_NONE: dict = {}  # read-only stand-in for an absent map or row: never written to


def _build_report(store, run_id: str, config=None) -> dict:

    run = load_run(store, run_id)
    cfg = config or Config.model_validate(json.loads(run["config_json"]))
    alpha = cfg.alpha
    info = json.loads(run["info_json"] or "{}")
    gens = store.generations(run_id, columns=_GENERATION_COLUMNS)
    judg = store.judgments(run_id, columns=_JUDGMENT_COLUMNS)
    claims = store.claims(run_id)
    checks = store.checks(run_id, columns=_CHECK_COLUMNS)
    cases = _fixture_cases(run)

    gen_by = {(g["case_id"], g["variant"]): g for g in gens}
    # (judge, subject) -> case id -> judgment: loops over cases take their judge's map once
    # (a lookup by a (case, judge, subject) tuple per case was a third of the report's time)
    jv: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    errors_by_case: dict[str, list[str]] = defaultdict(list)
    for g in gens:
        if g["error"]:
            errors_by_case[g["case_id"]].append(f"generate[{g['variant']}]: {g['error']}")
    for j in judg:
        if j["sample"] != 0:
            continue
        jv[(j["judge"], j["subject"])][j["case_id"]] = j
        if j["error"]:
            errors_by_case[j["case_id"]].append(f"{j['judge']}[{j['subject']}]: {j['error']}")
    jv = dict(jv)  # a plain dict: looking up an absent judge must not add it
    chk_by: dict[tuple[str, str], dict[str, bool | None]] = defaultdict(dict)
    for c in checks:  # (case, variant) -> check name -> passed, names in store order
        chk_by[(c["case_id"], c["variant"])][c["name"]] = c["passed"]
    # the run's state and its finished cases: the one rule every surface reads (runstate)
    prog = run_progress(store, run, cases=cases, gens=gens, judg=judg)
    all_ids = prog.case_ids
    finished = prog.finished
    finished_set = set(finished)
    unfinished = prog.unfinished
    status = prog.state
    waiting = prog.waiting

    models = _models(store, run)
    self_judge = bool(info.get("self_judge")) or bool(
        set(models["generator"]["resolved"]) & set(models["judge"]["resolved"]))
    judges = info.get("judges") or cfg.judges
    metrics: dict[str, Any] = {}
    outcomes: dict[str, str] = {}
    stat_warnings: list[str] = []
    # which cases are one group (repeats, `group`, `group_by`): the unit of inference

    groups = case_groups(list(cases.values()), cfg.group_by, file=run.get("fixture_path")) \
        if cases else None
    holm_info = {"family": holm_family(judges), "alpha": alpha}
    if status == "complete":
        lengths = {k: len(g["answer"] or "") for k, g in gen_by.items()}
        answerable = {cid: bool(cases.get(cid, _NONE).get("answerable", True)) for cid in finished}
        with _caught_warnings() as stat_warnings:
            metrics, outcomes, holm_info = compute_metrics(finished, jv, answerable, lengths,
                                                           cfg, judges, groups=groups)
        metrics["checks"] = checks_table(chk_by, finished_set, alpha)
        metrics.setdefault("conformance", None)
        if metrics["conformance"] and info.get("conformance_rubric"):
            metrics["conformance"]["rubric"] = info["conformance_rubric"]
    # --- human validation, incidents, claim, taxonomy ----------------------
    validation = run_judge_validation(store, run_id, cfg)
    incidents = _incidents(finished, jv, claims, gen_by, cases, cfg)
    report = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "kind": run["kind"],
        "status": status, "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "created_at": _plain(run["created_at"]), "n_cases": prog.n_cases,
        "n_finished": len(finished), "n_used": prog.n_used, "n_not_needed": prog.n_not_needed,
        "unfinished_cases": unfinished,
        "unfinished_reasons": {cid: _with_batch_hint(prog.reasons[cid], run_id)
                               for cid in unfinished},
        "progress": _progress_block(prog, jv, judges),
        "fixture": {"name": run["fixture_name"], "corpus_version": run["corpus_version"],
                    "cases_sha256": run["fixture_sha256"], "retriever": run["retriever"],
                    **_fixture_schedule(run)},
        "variants": {"a": {"name": run["variant_a_name"], "sha256": run["variant_a_sha256"]},
                     "b": {"name": run["variant_b_name"], "sha256": run["variant_b_sha256"]}},
        "groups": group_summary(groups) if groups is not None else None,
        "models": models, "git_commit": run["git_commit"],
        "comparison_kind": run["comparison_kind"],
        "pipeline_reasons": info.get("pipeline_reasons", []),
        "self_judge": self_judge,
        "self_judge_model": run["judge_model"] if self_judge else None,
        # present only when the embedded model judged because the config named no judge
        **({"demo_judge": notes.text_of(notes.demo_judge(run["judge_model"]))}
           if info.get("demo_judge") else {}),
        "judges": judges,
        "judge_validation": validation,
        "metrics": metrics, "stat_warnings": stat_warnings, "holm": holm_info,
        "incidents": incidents,
        "calls": calls_summary(store, run_id, len(all_ids)),
    }
    if info.get("budget"):
        report["budget"] = info["budget"]
    seq_look = None
    if info.get("sequential"):   # the looks so far: valid whenever read, running or not
        report["sequential"], seq_look = _sequential_block(run, cases, finished, judg, groups,
                                                          cfg, judges, report)
    incomplete_reason = None
    if status != "complete":

        done = prog.counts
        if status == "running":   # never told to resume: a second writer
            report["estimates_withheld"] = (
                f"running: {done}; no metric, p-value or interval is shown until every case "
                "is finished")
            incomplete_reason = f"running: {done}; no claim until every case is finished"
        else:
            hint = resume_hint(run, batch=bool(waiting))
            report["estimates_withheld"] = (
                f"{status} run: {len(unfinished)} case(s) unfinished ({done}); no metric, "
                f"p-value or interval is shown until every case is finished (`{hint}`)")
            report["resume"] = hint
            incomplete_reason = (f"{status} run: {len(unfinished)} case(s) unfinished; nothing "
                                 f"is estimated until it is complete (`{hint}`)")
    report["judge_noise"] = _judge_noise(judg, cfg) if status == "complete" else None
    if status == "complete" and store.human_labels(run_id):

        report["ppi"] = _plain(ppi_headlines(store, run_id, alpha))

    report["golden"] = draft_summary(list(cases.values())) if cases else None
    report["prompt_diff"] = _prompt_diff(store.prompt_pair(run_id))
    if seq_look is not None and status == "complete":
        # the claim of a sequential run rests on its last look's anytime-valid intervals

        report["claim"] = licensed_claim(
            {**report, "metrics": anytime_metrics(metrics, seq_look, alpha, holm_family(judges))},
            cfg, incomplete_reason=incomplete_reason)
    else:
        report["claim"] = licensed_claim(report, cfg, incomplete_reason=incomplete_reason)
    report["taxonomy"], report["remediation"] = _taxonomy(report, finished, jv, chk_by, cases,
                                                          cfg.gates.incident_faithfulness)
    report["per_case"] = _per_case(all_ids, finished, cases, gen_by, jv, outcomes, chk_by,
                                   errors_by_case, cfg.gates.incident_faithfulness)
    report["flipped"] = [r["case_id"] for r in report["per_case"] if r.get("flipped")]

    report["gate"] = evaluate_gate(report, cfg.gates)
    return report


@contextmanager
def _caught_warnings():
    """What the statistics warn while the metrics are computed (scipy's precision loss over
    nearly identical differences, a statsmodels fit that did not converge) becomes a note of
    the report, never stderr noise; each distinct message once. The block computes nothing
    but statistics, so every warning it raises is one (scipy attributes its warnings to the
    caller, so their file does not say where they came from); deprecations pass on."""

    out: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield out
    seen = set()
    for w in caught:
        if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            continue
        text = f"{w.category.__name__}: {w.message}"
        if text not in seen:
            seen.add(text)
            out.append(text)


def _with_batch_hint(reasons: list[str], run_id: str) -> list[str]:
    """A case waiting for a provider batch names the command that collects it."""
    return [f"{r} (`abtest run --run-id {run_id} --resume --batch` collects it)"
            if r.startswith("waiting for provider batch") else r for r in reasons]


def _progress_block(prog, jv: dict, judges) -> dict:
    """What exists so far, as counts (never an estimate): the run's state and line, and per
    judge how many cases it has judged without error (both sides where it has two)."""
    judged: dict[str, int] = {}
    for judge in judges or []:
        subjects = [s for (j, s) in jv if j == judge]
        if not subjects:
            judged[judge] = 0
            continue
        ok = None
        for s in subjects:
            good = {cid for cid, row in jv[(judge, s)].items() if not row.get("error")}
            ok = good if ok is None else ok & good
        judged[judge] = len(ok or ())
    return {**prog.as_dict(), "judged": judged}


def _judge_noise(judg: list[dict], cfg) -> dict | None:
    """Test-retest agreement of the pairwise judge on the re-asked sample."""
    repeated = [j for j in judg if j["sample"] > 0 and j["judge"] == "pairwise"]
    if not repeated:
        return None
    base = {(j["case_id"], j["subject"]): j["verdict"] for j in judg
            if j["judge"] == "pairwise" and j["sample"] == 0}
    reps = [(j, base.get((j["case_id"], j["subject"]))) for j in repeated]
    same = sum(1 for j, b in reps if j["verdict"] is not None and j["verdict"] == b)
    return {"repeats": max(j["sample"] for j, _ in reps),
            "n_items": len({j["case_id"] for j, _ in reps}), "n_comparisons": len(reps),
            "agreement": same / len(reps),
            "note": "share of repeated pairwise verdicts (each order) equal to the first verdict"}


def _fixture_cases(run: dict) -> dict[str, dict]:
    """The run's cases for display (questions, contexts, answerable); {} when unreadable."""

    return fixture_cases(run)


def _fixture_schedule(run: dict) -> dict:


    p = Path(run["fixture_path"] or "") / "manifest.json"
    if not p.exists():
        return {}
    m = read_manifest(p, cases=False)
    due = m.due()
    ran = run["created_at"]  # judged at the run's start, as the run warned: a re-render never flips
    if isinstance(ran, str):
        ran = datetime.fromisoformat(ran.replace("Z", "+00:00"))
    if ran is not None and ran.tzinfo is None:
        ran = ran.replace(tzinfo=timezone.utc)  # the store keeps UTC without a zone
    return {"captured_at": m.captured_at, "refresh_every_days": m.refresh_every_days,
            "next_evaluation_date": due.date().isoformat(),
            "stale_at_run": bool(ran is not None and m.stale_at(ran))}


def _models(store, run: dict) -> dict:
    """Requested and resolved models; `drift` lists a requested model that resolved to more
    than one version (a model comparison's two generators are two models, not drift)."""
    resolved = store.resolved_models(run["run_id"])
    gen_req = run["generator_model"]
    gens = [g.strip() for g in gen_req.split("|")]

    def drifted(names):
        return {g: resolved[g] for g in names if len(resolved.get(g, [])) > 1}

    return {"generator": {"requested": gen_req,
                          "resolved": sorted({r for g in gens for r in resolved.get(g, [])}),
                          "drift": drifted(gens)},
            "judge": {"requested": run["judge_model"],
                      "resolved": resolved.get(run["judge_model"], []),
                      "drift": drifted([run["judge_model"]])}}


# what a reader of the looks needs to know: each bound is valid at every look at once, which
# the fixed-N intervals of the report's metrics (computed as if the cases had been fixed in
# advance) are not; the claim is decided on the last look, never on the fixed-N figures
SEQUENTIAL_NOTE = ("anytime-valid: each interval, bound and p-value of a look holds at every "
                   "look at once (betting confidence sequences, each condition's bets tuned "
                   "to its own cases in the fixture), so the run could stop at whichever look "
                   "decided without inflating its error; they are usually wider than the "
                   "fixed-N figures in the metrics above, which are computed as if the cases "
                   "used had been fixed in advance. The claim is decided on the last look's "
                   "conditions, not on the fixed-N figures.")


def _sequential_block(run: dict, cases: dict, finished: list[str], judg: list, groups,
                      cfg, judges, report: dict) -> tuple[dict | None, Any]:
    """A sequential run's looks (recomputed from its judgments: sequential.replay_run), why
    it stopped, what it used of the fixture and what stopping saved, and the last look (for
    the claim)."""

    plan = plan_for_run(run, cases)
    if plan is None:
        return None, None
    looks = replay_run(plan, finished, judg, cases, groups, cfg, judges)
    units_used = plan.boundaries[-1] if plan.boundaries else 0
    used = len(plan.taken)
    calls = report.get("calls") or {}
    per_case = calls.get("calls_per_case")
    cost = (calls.get("cost_usd") or {}).get("total")
    # what stopping saved is known once it has stopped: before, the cases not taken yet may
    # still be needed (runstate.RunProgress.n_not_needed, the one count)
    not_needed = plan.not_needed if plan.stop else None
    block = {
        "seed": plan.record.get("seed"), "look_units": plan.record.get("look"),
        "futility": plan.record.get("futility"), "max_cases": plan.record.get("max_cases"),
        "margins": cfg.margins.model_dump(),
        "stop": plan.stop, "stop_text": plan.stop_text(), "looks_done": len(looks),
        "units_total": len(plan.units), "units_used": units_used,
        "cases_total": plan.n_cases, "cases_used": used, "cases_not_needed": not_needed,
        "calls_saved": round(per_case * not_needed) if per_case and not_needed is not None
        else None,
        "cost_saved_usd": round(cost / used * not_needed, 6)
        if cost and used and not_needed is not None else None,
        "looks": [lk.as_dict() for lk in looks],
        "note": SEQUENTIAL_NOTE,
    }
    return block, (looks[-1] if looks else None)


def calls_summary(store, run_id: str, n: int) -> dict:
    summ = store.call_summary(run_id)
    attempts = sum(r["provider_attempts"] for r in summ.values())
    logical = store.count_distinct_calls(run_id)
    billed = store.billed_cost_by_purpose(run_id)
    by_variant: dict[str, float] = {}
    by_judge: dict[str, float] = {}
    for purpose, cost in billed.items():
        if cost is None:
            continue
        kind, _, rest = purpose.partition(":")
        if kind == "generate":
            by_variant[rest] = by_variant.get(rest, 0.0) + cost
        elif kind == "judge":
            name = rest.split(":")[0]   # a repair call counts to its judge
            by_judge[name] = by_judge.get(name, 0.0) + cost
    known = [c for c in billed.values() if c is not None]
    return {"by_purpose": {k: {kk: vv for kk, vv in v.items() if kk != "purpose"}
                           for k, v in summ.items()},
            "provider_attempts": attempts, "distinct_calls": logical,
            "calls_per_case": round(logical / n, 2) if n else None,
            "cost_usd": {"total": round(sum(known), 6) if known else None,
                         "by_variant": {k: round(v, 6) for k, v in sorted(by_variant.items())},
                         "by_judge": {k: round(v, 6) for k, v in sorted(by_judge.items())},
                         "note": "billed by the provider in this run (cached answers cost "
                                 "nothing here); null where no price is known"}}


def checks_table(chk_by: dict, finished: set[str], alpha: float) -> dict:
    """Per deterministic check: each variant's pass rate over the answers it applies to (a
    check only one variant defines is shown too), and McNemar on the pairs where it applies
    to both."""

    res_a: dict[str, list] = {}
    res_b: dict[str, list] = {}
    for (cid, v), by_name in chk_by.items():
        if cid in finished:
            (res_a if v == "A" else res_b)[cid] = list(by_name.items())
    out = {}
    for name, s in paired_check_table(res_a, res_b).items():
        d = s.model_dump()
        d.update({"metric": f"check:{name}", "a": s.pass_rate_a, "b": s.pass_rate_b,
                  "difference": None, "ci_low": None, "ci_high": None, "test": None,
                  "p_value": None})
        if s.n:
            m = stats.mcnemar(s.n10, s.n01, method="midp")
            # pass-rate difference B − A over the paired cases: B is the table's first condition
            ci = stats.paired_proportion_diff_ci(s.n11, s.n01, s.n10, s.n00, method="tango",
                                                 conf_level=1 - alpha)
            d.update({"test": "mcnemar_midp", "p_value": m.p_value, "difference": ci.estimate,
                      "ci_low": ci.ci_low, "ci_high": ci.ci_high,
                      "ci_method": f"Tango score, {pct(1 - alpha)}"})
        out[name] = d
    return out


INCIDENT_CHUNK_CHARS = 400  # enough of a chunk to check a statement against, not the page


def _incidents(finished, jv, claims, gen_by, cases, cfg) -> list[dict]:

    score_of = {v: {cid: j.get("score") for cid, j in jv.get(("faithfulness", v), _NONE).items()}
                for v in ("A", "B")}
    out = []
    for inc in incidents.find(finished, score_of, claims, cfg.gates.incident_faithfulness):
        cid, v = inc["case_id"], inc["variant"]
        case = cases.get(cid, {})
        out.append({"case_id": cid, "variant": v, "faithfulness": inc["faithfulness"],
                    "question": case.get("question"),
                    "answer": (gen_by.get((cid, v)) or {}).get("answer"),
                    "unsupported": inc["unsupported"],
                    "context_ids": [ch["id"] for ch in case.get("context", [])],
                    "context": [{"id": ch["id"],
                                 "text": clip(ch.get("text"), INCIDENT_CHUNK_CHARS)}
                                for ch in case.get("context", [])]})
    return out


def _taxonomy(report, finished, jv, chk, cases, threshold: float = 0.85):
    """Classify low cases (variant B) and turn FAILs and incidents into a backlog (an
    unsupported-claim case is one of B's incidents: the same threshold)."""

    kinds: dict[str, list[str]] = defaultdict(list)
    faith_b = jv.get(("faithfulness", "B"), _NONE)
    keywords = jv.get(("keywords", "case"), _NONE)
    abst_b = jv.get(("abstention", "B"), _NONE)
    for cid in finished:
        case = cases.get(cid, {})
        rel = set(case.get("relevant_chunk_ids") or [])
        ctx = {ch["id"] for ch in case.get("context", [])}
        if case.get("answerable", True) and rel and not (rel & ctx):
            kinds["retrieval_miss"].append(cid)
        if incidents.is_incident((faith_b.get(cid) or _NONE).get("score"), threshold):
            kinds["unsupported_claim"].append(cid)
        cb = chk.get((cid, "B"), {})
        if cb.get("citations_resolve") is False or cb.get("citations_present") is False:
            kinds["weak_sourcing"].append(cid)
        if cb.get("json") is False or cb.get("length") is False:
            kinds["formatting_drift"].append(cid)
        if cb.get("must_not_say") is False:
            kinds["banned_phrase"].append(cid)
        kq = (keywords.get(cid) or _NONE).get("score")
        if kq is not None and kq < 0.6:
            kinds["keyword_gap"].append(cid)
        ab = (abst_b.get(cid) or _NONE).get("verdict")
        if ab == "abstained" and case.get("answerable", True):
            kinds["incorrect_refusal"].append(cid)
        if ab == "answered" and not case.get("answerable", True):
            kinds["missed_refusal"].append(cid)
    backlog = []
    prio = {"unsupported_claim": "P1", "missed_refusal": "P1", "retrieval_miss": "P2",
            "incorrect_refusal": "P2", "weak_sourcing": "P2", "banned_phrase": "P2",
            "formatting_drift": "P3",
            "keyword_gap": "P3"}
    for inc in incidents.of(report, "B"):
        backlog.append({"priority": "P1", "item": f"hallucination incident in B, case "
                        f"{inc['case_id']} (faithfulness {inc['faithfulness']:.2f})",
                        "likely_cause": REMEDIES["unsupported_claim"][0],
                        "remedy": REMEDIES["unsupported_claim"][1]})
    for kind, ids in kinds.items():
        cause, remedy = REMEDIES[kind]
        backlog.append({"priority": prio[kind], "item": f"{kind.replace('_', ' ')}: {len(ids)} case(s) "
                        f"({', '.join(ids[:5])}{'…' if len(ids) > 5 else ''})",
                        "likely_cause": cause, "remedy": remedy})
    backlog.sort(key=lambda r: r["priority"])
    return {k: v for k, v in kinds.items()}, backlog


def _prompt_diff(pair: tuple[str, str, str] | None) -> dict | None:
    """Which parts of the rendered prompt differ between A and B, for one case."""

    if pair is None:
        return None
    cid, a_json, b_json = pair
    a, b = json.loads(a_json), json.loads(b_json)
    roles = sorted({m["role"] for m in a + b})
    changed = [r for r in roles if [m["content"] for m in a if m["role"] == r]
               != [m["content"] for m in b if m["role"] == r]]
    return {"case_id": cid, "changed_parts": changed,
            "diff": unified_diff(messages_text(a), messages_text(b), "A", "B")}


def _per_case(all_ids, finished, cases, gen_by, jv, outcomes, chk_by, errors_by_case,
              threshold: float):
    """One row per case; a case flipped when A's and B's faithfulness fall on different sides
    of the incident threshold (the gate's, so a flip and an incident agree) or B newly fails a
    check."""
    rows = []
    fin = set(finished)
    # per variant: (row key, judge's map) for the score judges that ran, then abstention
    scored = {v: [(f"{judge}_{v.lower()}", jv[(judge, v)])
                  for judge in SCORE_JUDGES if (judge, v) in jv] for v in ("A", "B")}
    abst = {v: jv.get(("abstention", v), _NONE) for v in ("A", "B")}
    pab, pba = jv.get(("pairwise", "AB"), _NONE), jv.get(("pairwise", "BA"), _NONE)
    for cid in all_ids:
        case = cases.get(cid, _NONE)
        row = {"case_id": cid, "question": case.get("question"),
               "answerable": case.get("answerable"), "category": case.get("category"),
               "finished": cid in fin, "errors": errors_by_case.get(cid, [])}
        for v in ("A", "B"):
            g = gen_by.get((cid, v)) or _NONE
            row[f"answer_{v.lower()}"] = g.get("answer")
            for key, d in scored[v]:
                j = d.get(cid)
                if j is not None:
                    row[key] = j.get("score")
            j = abst[v].get(cid)
            if j is not None:
                row[f"abstained_{v.lower()}"] = j.get("verdict") == "abstained" if j.get("verdict") else None
            row[f"checks_failed_{v.lower()}"] = [name for name, passed in
                                                 chk_by.get((cid, v), _NONE).items() if passed is False]
        ab = pab.get(cid)
        ba = pba.get(cid)
        if ab or ba:
            row["pairwise_ab"] = (ab or {}).get("verdict")
            row["pairwise_ba"] = (ba or {}).get("verdict")
            row["pairwise"] = outcomes.get(cid)
        fa, fb = row.get("faithfulness_a"), row.get("faithfulness_b")
        row["flipped"] = bool(fa is not None and fb is not None
                              and (fa >= threshold) != (fb >= threshold))
        if cid in fin:
            newly = set(row["checks_failed_b"]) - set(row["checks_failed_a"])
            row["flipped"] = row["flipped"] or bool(newly)
        rows.append(row)
    return rows
