"""Turn stored judgments into the report dict (the JSON contract of DESIGN.md).

Only finished cases are scored: a case with any generation or judge error is
listed as unfinished and never enters a statistic. Differences are B − A.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, is_dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

from ..errors import UserError
from ..gcpause import gc_paused

SCHEMA_VERSION = 1
HOLM_FAMILY = ("pairwise", "faithfulness", "coverage", "abstention_answerable",
               "abstention_unanswerable")
# judges that give each answer a 0–1 score: summarised, compared and shown per case alike
SCORE_JUDGES = ("faithfulness", "coverage", "quality", "relevance", "conformance")

REMEDIES = {
    "retrieval_miss": ("low recall: the relevant chunk was not retrieved",
                       "increase k / add query expansion; check chunking of the source document"),
    "unsupported_claim": ("the answer states things the context does not support",
                          "tighten grounding instructions; re-ingest stale chunks; require citations"),
    "weak_sourcing": ("citations missing or pointing at chunks not in the context",
                      "fix source metadata / chunk ids; state the citation format in the prompt"),
    "formatting_drift": ("output format or length outside the variant's declared checks",
                         "restate the format rules; add an output example; lower max_tokens"),
    "keyword_gap": ("search keywords miss key concepts of the question",
                    "improve keyword extraction prompt; add synonyms / query expansion"),
    "incorrect_refusal": ("refused an answerable question",
                          "narrow the refusal triggers in the prompt"),
    "missed_refusal": ("answered an unanswerable question",
                       "loosen scope rules the other way: make refusal explicit when context lacks the answer"),
}


def _plain(obj: Any) -> Any:
    if is_dataclass(obj):
        return {k: _plain(v) for k, v in asdict(obj).items()}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    return obj


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def load_run(store, run_id: str) -> dict:
    run = store.get_run(run_id)
    if run is None:
        known = [r["run_id"] for r in store.list_runs()][-5:]
        hint = f" (recent: {', '.join(known)})" if known else ""
        raise UserError(f"no run {run_id!r} in the store{hint}", file=str(store.path))
    return run


def check_fixture_unchanged(run: dict) -> None:
    """A re-reported run whose fixture changed on disk is refused."""
    from pathlib import Path

    from ..fixtures import sha256_bytes

    p = Path(run["fixture_path"] or "")
    if run["kind"] != "frozen" or not (p / "cases.jsonl").exists():
        return
    if sha256_bytes((p / "cases.jsonl").read_bytes()) != run["fixture_sha256"]:
        raise UserError(f"fixture changed since run {run['run_id']} (cases_sha256 "
                        f"{run['fixture_sha256'][:12]}…); the stored "
                        "results no longer describe it", file=str(p))


def _continuous(metric: str, a_by: dict, b_by: dict, ids: list[str], alpha: float) -> dict:
    from .. import stats

    pairs = [(cid, a_by.get(cid), b_by.get(cid)) for cid in ids]
    used = [(cid, a, b) for cid, a, b in pairs if a is not None and b is not None]
    dropped = {"missing_a_only": sorted(cid for cid, a, b in pairs if a is None and b is not None),
               "missing_b_only": sorted(cid for cid, a, b in pairs if b is None and a is not None),
               "missing_both": sorted(cid for cid, a, b in pairs if a is None and b is None)}
    out: dict[str, Any] = {"metric": metric, "n": len(used), "dropped": dropped,
                           "n_dropped": sum(len(v) for v in dropped.values()),
                           "a": None, "b": None, "difference": None, "ci_low": None,
                           "ci_high": None, "test": "paired_t", "p_value": None, "p_holm": None}
    if not used:
        out["note"] = "no case has a score on both sides"
        return out
    a = [x[1] for x in used]
    b = [x[2] for x in used]
    t = stats.paired_t(a, b, conf_level=1 - alpha)
    w = stats.wilcoxon(a, b)
    wp = stats.wilcoxon(a, b, zero_method="pratt")
    out.update({"a": sum(a) / len(a), "b": sum(b) / len(b), "difference": t.mean_diff,
                "ci_low": t.ci_low, "ci_high": t.ci_high, "ci_method": "paired t (unadjusted)",
                "p_value": t.p_value, "d_z": t.d_z, "sd_d": t.sd_d,
                "secondary": {"test": "wilcoxon (R-compatible: zeros dropped, continuity "
                                      "correction)", "p_value": w.p_value, "n_used": w.n_used},
                "sensitivity": {"test": "wilcoxon pratt", "p_value": wp.p_value},
                "summary_a": _plain(stats.summary(a)), "summary_b": _plain(stats.summary(b))})
    if len(used) < 30:
        bs = stats.bootstrap_mean_diff_ci(a, b, n_boot=5000, seed=0, conf_level=1 - alpha)
        out["bootstrap"] = {"ci_low": bs.ci_low, "ci_high": bs.ci_high, "n_boot": 5000, "seed": 0}
    if t.sd_d:
        mde = stats.mde_paired_t(len(used), t.sd_d, alpha=alpha / len(HOLM_FAMILY))
        out["mde"] = {"mde": mde.mde, "d_z": mde.d_z, "alpha": mde.alpha, "power": 0.8,
                      "sd_d": t.sd_d}
    if t.note:
        out["note"] = t.note
    return out


def _binary(name: str, a_by: dict, b_by: dict, ids: list[str], alpha: float,
            margin: float | None = None) -> dict:
    """Paired 2×2 on abstention; difference reported as B − A (first condition = B)."""
    from .. import stats

    used = [(cid, a_by[cid], b_by[cid]) for cid in ids if a_by.get(cid) is not None
            and b_by.get(cid) is not None]
    out: dict[str, Any] = {"metric": name, "n": len(used),
                           "n_dropped": len(ids) - len(used), "a": None, "b": None,
                           "difference": None, "ci_low": None, "ci_high": None,
                           "test": "mcnemar_midp", "p_value": None, "p_holm": None}
    if not used:
        out["note"] = "no cases in this subset"
        return out
    n11 = sum(1 for _, a, b in used if a and b)
    b_only = sum(1 for _, a, b in used if b and not a)
    a_only = sum(1 for _, a, b in used if a and not b)
    n00 = sum(1 for _, a, b in used if not a and not b)
    m = stats.mcnemar(a_only, b_only, method="midp")
    ci = stats.paired_proportion_diff_ci(n11, b_only, a_only, n00, method="tango",
                                         conf_level=1 - alpha)
    out.update({"a": (n11 + a_only) / len(used), "b": (n11 + b_only) / len(used),
                "difference": ci.estimate, "ci_low": ci.ci_low, "ci_high": ci.ci_high,
                "ci_method": "Tango score (unadjusted)", "p_value": m.p_value,
                "table": {"both": n11, "a_only": a_only, "b_only": b_only, "neither": n00},
                "secondary": {"p_exact": m.p_exact, "p_chi2": m.p_chi2}})
    if margin is not None:
        ci90 = stats.paired_proportion_diff_ci(n11, b_only, a_only, n00, method="tango",
                                               conf_level=1 - 2 * alpha)
        out["noninferiority"] = {"margin": margin, "upper_90": ci90.ci_high,
                                 "holds": ci90.ci_high is not None and ci90.ci_high < margin}
    if a_only + b_only == 0:
        out["note"] = "no discordant pairs"
    return out


def build_report(store, run_id: str, config=None) -> dict:
    """Compute every number of the report from the store; nothing is estimated.

    The collector is paused: a 10,000-case report allocates a million acyclic objects and
    full collections over them were ~30 % of the time."""
    with gc_paused():
        return _build_report(store, run_id, config)


# the only columns the report reads: each column read costs, rationales and prompts most
_GENERATION_COLUMNS = ("case_id", "variant", "answer", "error")
_JUDGMENT_COLUMNS = ("case_id", "judge", "subject", "sample", "verdict", "score", "result_json",
                     "error")
_CHECK_COLUMNS = ("case_id", "variant", "name", "passed")


_NONE: dict = {}  # read-only stand-in for an absent map or row: never written to


def _build_report(store, run_id: str, config=None) -> dict:
    from .. import stats
    from ..checks import paired_check_table
    from ..models import Config

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
    judges_run = {judge for judge, _ in jv}
    chk_by: dict[tuple[str, str], dict[str, bool | None]] = defaultdict(dict)
    for c in checks:  # (case, variant) -> check name -> passed, names in store order
        chk_by[(c["case_id"], c["variant"])][c["name"]] = c["passed"]
    all_ids = sorted(cases) if cases else sorted({g["case_id"] for g in gens})
    started = {g["case_id"] for g in gens}
    not_started = [cid for cid in all_ids if cid not in started]
    unfinished = sorted(set(errors_by_case) | set(not_started)
                        | {cid for cid in started if (cid, "A") not in gen_by or (cid, "B") not in gen_by})
    unfinished_set = set(unfinished)
    finished = [cid for cid in all_ids if cid not in unfinished_set]
    finished_set = set(finished)
    status = "complete" if not unfinished and run["status"] == "complete" else "incomplete"

    def score(judge: str, v: str) -> dict[str, float | None]:
        d = jv.get((judge, v), _NONE)
        return {cid: (d.get(cid) or _NONE).get("score") for cid in finished}

    # --- pairwise ---------------------------------------------------------
    metrics: dict[str, Any] = {}
    pab, pba = jv.get(("pairwise", "AB"), _NONE), jv.get(("pairwise", "BA"), _NONE)
    pw_ids = [cid for cid in finished if cid in pab]
    outcomes = {}
    if pw_ids:
        ab = [pab[cid]["verdict"] for cid in pw_ids]
        ba = [pba[cid]["verdict"] for cid in pw_ids]
        pc = stats.pairwise_outcomes(ab, ba)
        outcomes = dict(zip(pw_ids, pc.outcomes))
        st_ = stats.sign_test(pc.wins, pc.losses)
        wr = stats.win_rate(pc.wins, pc.losses, pc.ties, conf_level=1 - alpha)
        cons = stats.position_consistency(ab, ba)
        first = sum(1 for x in ab if x == "A") + sum(1 for x in ba if x == "B")
        decided = sum(1 for x in ab + ba if x in ("A", "B"))
        inconsistent = sum(1 for x, y in zip(ab, ba) if x != y)
        len_a = [len((gen_by[(cid, "A")]["answer"] or "")) for cid in pw_ids]
        len_b = [len((gen_by[(cid, "B")]["answer"] or "")) for cid in pw_ids]
        def clip(x):
            return None if x is None else max(-1.0, min(1.0, x))

        metrics["pairwise"] = {
            "metric": "pairwise", "n": len(pw_ids), "b_wins": pc.wins, "a_wins": pc.losses,
            "no_preference": pc.ties, "position_inconsistent": inconsistent,
            "a": 1 - wr.estimate, "b": wr.estimate,
            "difference": 2 * wr.estimate - 1, "estimate": wr.estimate,
            "win_rate_ci": {"ci_low": wr.ci_low, "ci_high": wr.ci_high},
            "ci_low": clip(None if wr.ci_low is None else 2 * wr.ci_low - 1),
            "ci_high": clip(None if wr.ci_high is None else 2 * wr.ci_high - 1),
            "ci_method": "t-interval on per-case scores {1, .5, 0}, as B − A win rates (ties "
                         "half), clipped to [-1, 1]",
            "test": "sign_test (exact, two-sided, decisive pairs)", "p_value": st_.p_value,
            "p_holm": None, "midp": st_.midp,
            "decisive_share_b": {"estimate": st_.estimate, "ci_low": st_.ci_low,
                                 "ci_high": st_.ci_high, "method": "Wilson"},
            "position_consistency": {"estimate": cons.estimate, "ci_low": cons.ci_low,
                                     "ci_high": cons.ci_high, "biased_to_first": cons.biased_to_first,
                                     "biased_to_second": cons.biased_to_second},
            "first_position_win_rate": (first / decided) if decided else None,
            "length_ratio_b_over_a": (sum(len_b) / sum(len_a)) if sum(len_a) else None,
            "length_bias": _length_bias(outcomes, pw_ids, len_a, len_b),
        }
    # --- faithfulness, coverage, rubrics ----------------------------------
    for judge in SCORE_JUDGES:
        ja, jb = jv.get((judge, "A"), _NONE), jv.get((judge, "B"), _NONE)
        applicable = [cid for cid in finished if cid in ja or cid in jb]
        if not applicable:
            continue
        m = _continuous(judge, score(judge, "A"), score(judge, "B"), applicable, alpha)
        if judge == "faithfulness":
            no_claims = {v: sorted(cid for cid in finished
                                   if (d.get(cid) or _NONE).get("verdict") == "no_claims")
                         for v, d in (("A", ja), ("B", jb))}
            m["no_claims"] = no_claims
            m["note_no_claims"] = ("answers with no factual claim (refusals) have no faithfulness "
                                   "score; their pair is dropped")
        if judge == "relevance":
            methods = {json.loads(j["result_json"]).get("method", "llm_rating") if j.get("result_json")
                       else "llm_rating" for d in (ja, jb) for j in d.values()}
            m["method"] = "embedding (generated questions vs the question, cosine)" \
                if methods == {"embedding"} else "LLM 0-1 rating (no embedding model configured)"
        if judge == "coverage":
            m["margin"] = cfg.noninferiority_margin
            if m["n"] >= 2 and m.get("p_value") is not None:
                sa, sb = score(judge, "A"), score(judge, "B")
                both = [c for c in applicable if sa.get(c) is not None and sb.get(c) is not None]
                ni = stats.noninferiority_paired_t([sa[c] for c in both], [sb[c] for c in both],
                                                   cfg.noninferiority_margin, alpha=alpha)
                m["noninferiority"] = {"margin": cfg.noninferiority_margin, "ci_low_90": ni.ci_low,
                                       "p_value": ni.p_value, "holds": ni.noninferior}
        metrics[judge] = m
    # --- abstention -------------------------------------------------------
    if "abstention" in judges_run:
        def abst(v):
            d = jv.get(("abstention", v), _NONE)
            return {cid: d[cid].get("verdict") == "abstained" if cid in d else None
                    for cid in finished}
        aa, bb = abst("A"), abst("B")
        ans_ids = [c for c in finished if cases.get(c, {}).get("answerable", True)]
        un_ids = [c for c in finished if not cases.get(c, {}).get("answerable", True)]
        metrics["abstention"] = {
            "answerable": _binary("abstention_answerable", aa, bb, ans_ids, alpha,
                                  margin=cfg.noninferiority_margin),
            "unanswerable": _binary("abstention_unanswerable", aa, bb, un_ids, alpha),
            "direction": "difference = B − A abstention rate; on answerable cases lower is better, "
                         "on unanswerable cases higher is better"}
    if "keywords" in judges_run:
        ks = [s for s in score("keywords", "case").values() if s is not None]
        metrics["keywords"] = {"metric": "keywords", "n": len(ks),
                               "summary": _plain(stats.summary(ks)) if ks else None,
                               "note": "scores the captured search keywords (same for A and B)"}
    # --- checks -------------------------------------------------------------
    res_a: dict[str, list] = {}
    res_b: dict[str, list] = {}
    for (cid, v), by_name in chk_by.items():
        if cid in finished_set:
            (res_a if v == "A" else res_b)[cid] = list(by_name.items())
    table = paired_check_table(res_a, res_b)
    chk = {}
    for name, s in table.items():
        d = s.model_dump()
        d.update({"metric": f"check:{name}", "a": s.pass_rate_a, "b": s.pass_rate_b,
                  "difference": None, "ci_low": None, "ci_high": None})
        if s.n:
            m = stats.mcnemar(s.n10, s.n01, method="midp")
            # pass-rate difference B − A: B is the first condition of the paired table
            ci = stats.paired_proportion_diff_ci(s.n11, s.n01, s.n10, s.n00, method="tango",
                                                 conf_level=1 - alpha)
            d.update({"test": "mcnemar_midp", "p_value": m.p_value, "difference": ci.estimate,
                      "ci_low": ci.ci_low, "ci_high": ci.ci_high, "ci_method": "Tango score"})
        else:
            d.update({"test": None, "p_value": None})
        chk[name] = d
    metrics["checks"] = chk
    metrics.setdefault("conformance", None)
    # --- Holm -------------------------------------------------------------
    family = []
    for key in HOLM_FAMILY:
        m = _metric_at(metrics, key)
        if m is not None and m.get("p_value") is not None and m.get("n"):
            family.append((key, m))
    if family:
        h = stats.holm([m["p_value"] for _, m in family], alpha=alpha)
        for (key, m), p_adj, rej in zip(family, h.p_adjusted, h.reject):
            m["p_holm"] = p_adj
            m["significant"] = bool(rej)
    holm_info = {"family": [k for k, _ in family], "alpha": alpha,
                 "rule": "reject when Holm-adjusted p <= alpha (statsmodels convention)",
                 "note": "confidence intervals are unadjusted"}
    # --- human validation, incidents, claim, taxonomy ----------------------
    validation = _judge_validation(store, run_id, cfg)
    incidents = _incidents(finished, jv, claims, gen_by, cases, cfg)
    models = _models(store, run)
    report = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "kind": run["kind"],
        "status": status, "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "created_at": _plain(run["created_at"]), "n_cases": len(all_ids),
        "n_finished": len(finished), "unfinished_cases": unfinished,
        "unfinished_reasons": {cid: (errors_by_case.get(cid) or ["not started"])[:3]
                               for cid in unfinished},
        "fixture": {"name": run["fixture_name"], "corpus_version": run["corpus_version"],
                    "cases_sha256": run["fixture_sha256"], "retriever": run["retriever"],
                    **_fixture_schedule(run)},
        "variants": {"a": {"name": run["variant_a_name"], "sha256": run["variant_a_sha256"]},
                     "b": {"name": run["variant_b_name"], "sha256": run["variant_b_sha256"]}},
        "models": models, "git_commit": run["git_commit"],
        "comparison_kind": run["comparison_kind"],
        "pipeline_reasons": info.get("pipeline_reasons", []),
        "self_judge": bool(info.get("self_judge")),
        "judges": info.get("judges"),
        "judge_validation": validation,
        "metrics": metrics, "holm": holm_info, "incidents": incidents,
        "calls": _calls(store, run_id, len(all_ids)),
    }
    report["judge_noise"] = _judge_noise(judg, cfg)
    if store.human_labels(run_id):
        from ..review import ppi_headlines

        report["ppi"] = _plain(ppi_headlines(store, run_id, alpha))
    from ..golden import draft_summary

    report["golden"] = draft_summary(list(cases.values())) if cases else None
    report["prompt_diff"] = _prompt_diff(store.prompt_pair(run_id))
    report["claim"] = licensed_claim(report, cfg)
    report["taxonomy"], report["remediation"] = _taxonomy(report, finished, jv, chk_by, cases)
    report["per_case"] = _per_case(all_ids, finished, cases, gen_by, jv, outcomes, chk_by,
                                   errors_by_case)
    report["flipped"] = [r["case_id"] for r in report["per_case"] if r.get("flipped")]
    from ..gate import evaluate_gate

    report["gate"] = evaluate_gate(report, cfg.gates)
    return report


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


def _length_bias(outcomes: dict, ids: list[str], len_a: list[int], len_b: list[int]) -> dict | None:
    """Are decisive wins explained by answer length? Logistic regression of B-win on length diff."""
    xs, ys = [], []
    for cid, la, lb in zip(ids, len_a, len_b):
        o = outcomes.get(cid)
        if o in ("A", "B"):
            xs.append((lb - la) / 100.0)
            ys.append(1 if o == "B" else 0)
    if len(ys) < 8 or len(set(ys)) < 2:
        return {"n": len(ys), "note": "too few decisive pairs (need 8 with both outcomes)"}
    import warnings

    import numpy as np
    from statsmodels.discrete.discrete_model import Logit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exog = np.column_stack([np.ones(len(xs)), np.array(xs)])
            fit = Logit(np.array(ys), exog).fit(disp=0)
        except Exception as exc:  # perfect separation etc.
            return {"n": len(ys), "note": f"logistic fit failed: {type(exc).__name__}"}
    return {"n": len(ys), "coef_per_100_chars": float(fit.params[1]),
            "p_value": float(fit.pvalues[1]),
            "explained_by_length": bool(fit.pvalues[1] < 0.05 and fit.params[1] > 0)}


def _metric_at(metrics: dict, key: str) -> dict | None:
    if key.startswith("abstention_"):
        return (metrics.get("abstention") or {}).get(key.split("_", 1)[1])
    return metrics.get(key)


def _fixture_cases(run: dict) -> dict[str, dict]:
    """The run's cases for display (questions, contexts, answerable); {} when unreadable.

    Only cases.jsonl is read, as plain JSON in one parse: the run verified each case against
    its seal, and the report reads a few keys with defaults (validating 10,000 cases again
    took ~0.4 s; a json.loads per line, a quarter of that)."""
    from pathlib import Path

    p = Path(run["fixture_path"] or "") / "cases.jsonl"
    try:
        lines = [ln for ln in p.read_bytes().decode("utf-8").splitlines() if ln.strip()]
        objs = json.loads("[" + ",".join(lines) + "]")
    except (OSError, ValueError):  # missing, not UTF-8, not JSON
        return {}
    out: dict[str, dict] = {}
    if len(objs) != len(lines):  # a line held more than one value
        return {}
    for obj in objs:
        if not isinstance(obj, dict):
            return {}
        ctx = obj.get("context")
        if not isinstance(obj.get("id"), str) or not isinstance(ctx, list) or \
                not all(isinstance(ch, dict) and "id" in ch for ch in ctx):
            return {}
        out[obj["id"]] = obj
    return out


def _fixture_schedule(run: dict) -> dict:
    from pathlib import Path

    from ..fixtures import read_manifest

    p = Path(run["fixture_path"] or "") / "manifest.json"
    if not p.exists():
        return {}
    m = read_manifest(p, cases=False)
    captured = datetime.fromisoformat(m.captured_at.replace("Z", "+00:00"))
    return {"captured_at": m.captured_at, "refresh_every_days": m.refresh_every_days,
            "next_evaluation_date": (captured + timedelta(days=m.refresh_every_days)).date().isoformat()}


def _models(store, run: dict) -> dict:
    resolved = store.resolved_models(run["run_id"])
    gen_req = run["generator_model"]
    gens = [g.strip() for g in gen_req.split("|")]
    return {"generator": {"requested": gen_req,
                          "resolved": sorted({r for g in gens for r in resolved.get(g, [])})},
            "judge": {"requested": run["judge_model"],
                      "resolved": resolved.get(run["judge_model"], [])}}


def _calls(store, run_id: str, n: int) -> dict:
    summ = store.call_summary(run_id)
    attempts = sum(r["provider_attempts"] for r in summ.values())
    logical = len({(r["call_hash"]) for r in store.llm_calls(run_id)})
    return {"by_purpose": {k: {kk: vv for kk, vv in v.items() if kk != "purpose"}
                           for k, v in summ.items()},
            "provider_attempts": attempts, "distinct_calls": logical,
            "calls_per_case": round(logical / n, 2) if n else None}


def _judge_validation(store, run_id: str, cfg) -> dict:
    """Judge validated = enough human labels agreeing with it (kappa) on this run."""
    from .. import stats

    items = {r["item_id"]: r for r in store.review_items(run_id)}
    labels = store.human_labels(run_id)
    pairs = [(items[l["item_id"]]["judge_label"], l["label"]) for l in labels
             if l["item_id"] in items and items[l["item_id"]]["judge_label"] is not None]
    out = {"n_labels": len(pairs), "min_labels": cfg.review.min_labels,
           "min_kappa": cfg.review.min_kappa, "kappa": None, "ci_low": None, "ci_high": None,
           "validated": False}
    if len(pairs) >= 2:
        k = stats.cohen_kappa([p[0] for p in pairs], [p[1] for p in pairs])
        out.update({"kappa": k.kappa, "ci_low": k.ci_low, "ci_high": k.ci_high,
                    "agreement": k.p_observed})
        out["validated"] = bool(len(pairs) >= cfg.review.min_labels and k.kappa is not None
                                and k.kappa >= cfg.review.min_kappa)
    return out


def _incidents(finished, jv, claims, gen_by, cases, cfg) -> list[dict]:
    by_case_v: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for c in claims:
        by_case_v[(c["case_id"], c["variant"])].append(c)
    out = []
    faith = {v: jv.get(("faithfulness", v), _NONE) for v in ("A", "B")}
    for cid in finished:
        for v in ("A", "B"):
            j = faith[v].get(cid)
            if not j or j.get("score") is None or j["score"] >= cfg.gates.incident_faithfulness:
                continue
            case = cases.get(cid, {})
            out.append({"case_id": cid, "variant": v, "faithfulness": j["score"],
                        "question": case.get("question"),
                        "answer": (gen_by.get((cid, v)) or {}).get("answer"),
                        "unsupported": [{"claim": c["claim"], "verdict": c["verdict"]}
                                        for c in by_case_v[(cid, v)] if c["verdict"] != "supported"],
                        "context_ids": [ch["id"] for ch in case.get("context", [])]})
    return out


def effect_reasons(m: dict, cfg) -> list[str]:
    """Why the measured effect does not license the claim (frozen and live alike)."""
    reasons: list[str] = []
    f = m.get("faithfulness")
    if not f or f.get("difference") is None:
        reasons.append("faithfulness was not measured on any complete pair")
    elif not (f["difference"] > 0 and f.get("p_holm") is not None and f["p_holm"] <= cfg.alpha):
        reasons.append(f"not significant: faithfulness B − A = {f['difference']:+.3f} "
                       f"(95% CI {_fmt(f['ci_low'])} to {_fmt(f['ci_high'])}, Holm p = "
                       f"{_fmt(f.get('p_holm'))})")
    c = m.get("coverage")
    if c and c.get("difference") is not None:
        ni = c.get("noninferiority") or {}
        if not ni.get("holds"):
            reasons.append(f"coverage fell or is not shown non-inferior: B − A = "
                           f"{c['difference']:+.3f}, margin {cfg.noninferiority_margin}")
    elif c is None:
        reasons.append("coverage was not measured (no key points or reference answers)")
    else:
        reasons.append("coverage was not measured on any complete pair")
    ab = (m.get("abstention") or {}).get("answerable") or {}
    ni = ab.get("noninferiority")
    if ni and not ni.get("holds"):
        rose = (ab.get("difference") or 0) > 0
        reasons.append(f"answerable refusals {'rose' if rose else 'not shown not to rise'}: B − A = "
                       f"{_fmt(ab.get('difference'))}, 90% upper limit {_fmt(ni.get('upper_90'))} ≥ "
                       f"margin {ni['margin']}")
    return reasons


def licensed_claim(report: dict, cfg) -> dict:
    """The licensed sentence only when every condition holds; otherwise exactly why not."""
    reasons = []
    m = report["metrics"]
    n = report["n_finished"]
    if report["status"] != "complete":
        reasons.append(f"incomplete run: {len(report['unfinished_cases'])} case(s) unfinished")
    if report["comparison_kind"] == "pipeline_change":
        reasons.append("pipeline change: this is a pipeline change, re-measure end to end; the "
                       "frozen claim does not apply (" + "; ".join(report["pipeline_reasons"]) + ")")
    elif report["comparison_kind"] == "model":
        reasons.append("model comparison: the variants use different generator models, so this is "
                       "not a prompt comparison")
    for role in ("generator", "judge"):
        if len(report["models"][role]["resolved"]) > 1:
            reasons.append(f"model version drift: the {role} resolved to "
                           f"{', '.join(report['models'][role]['resolved'])}")
    if report["self_judge"]:
        reasons.append("self-judging: the judge model is the generator model")
    reasons += effect_reasons(m, cfg)
    f = m.get("faithfulness")
    if (report.get("golden") or {}).get("is_draft"):
        reasons.append(report["golden"]["note"])
    val = report["judge_validation"]
    if not val["validated"]:
        reasons.append(f"judge not validated: {val['n_labels']} human label(s) (need "
                       f"{val['min_labels']}), kappa {_fmt(val['kappa'])} (need ≥ {val['min_kappa']})")
    if reasons:
        return {"licensed": False, "sentence": None, "reasons": reasons,
                "scope": "frozen: given these contexts (never an end-to-end claim)"}
    sentence = (f"Given these contexts, variant B was more faithful and no less complete than A, "
                f"paired over {n} questions (faithfulness {f['difference']:+.3f}, 95% CI "
                f"{_fmt(f['ci_low'])} to {_fmt(f['ci_high'])}, Holm p = {_fmt(f['p_holm'])}), with "
                f"the judge validated against a human sample of {val['n_labels']} (kappa "
                f"{_fmt(val['kappa'])}).")
    return {"licensed": True, "sentence": sentence, "reasons": [],
            "scope": "frozen: given these contexts (never an end-to-end claim)"}


def _fmt(x, nd: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float) and 0 < abs(x) < 10 ** -nd:
        return f"{x:.1e}"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def _taxonomy(report, finished, jv, chk, cases):
    """Classify low cases (variant B) and turn FAILs and incidents into a backlog."""
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
        f = (faith_b.get(cid) or _NONE).get("score")
        if f is not None and f < 0.85:
            kinds["unsupported_claim"].append(cid)
        cb = chk.get((cid, "B"), {})
        if cb.get("citations_resolve") is False or cb.get("citations_present") is False:
            kinds["weak_sourcing"].append(cid)
        if cb.get("json") is False or cb.get("length") is False:
            kinds["formatting_drift"].append(cid)
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
            "incorrect_refusal": "P2", "weak_sourcing": "P2", "formatting_drift": "P3",
            "keyword_gap": "P3"}
    for inc in report["incidents"]:
        if inc["variant"] == "B":
            backlog.append({"priority": "P1", "item": f"hallucination incident in case {inc['case_id']} "
                            f"(faithfulness {inc['faithfulness']:.2f})",
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
    from ..variants import messages_text, unified_diff

    if pair is None:
        return None
    cid, a_json, b_json = pair
    a, b = json.loads(a_json), json.loads(b_json)
    roles = sorted({m["role"] for m in a + b})
    changed = [r for r in roles if [m["content"] for m in a if m["role"] == r]
               != [m["content"] for m in b if m["role"] == r]]
    return {"case_id": cid, "changed_parts": changed,
            "diff": unified_diff(messages_text(a), messages_text(b), "A", "B")}


def _per_case(all_ids, finished, cases, gen_by, jv, outcomes, chk_by, errors_by_case):
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
        row["flipped"] = bool(fa is not None and fb is not None and (fa >= 0.85) != (fb >= 0.85))
        if cid in fin:
            newly = set(row["checks_failed_b"]) - set(row["checks_failed_a"])
            row["flipped"] = row["flipped"] or bool(newly)
        rows.append(row)
    return rows
