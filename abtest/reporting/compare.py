"""Run history and run-to-run comparison, from the results store (no SQL here).

`run_history` lists every run with what it compared (fixture hash, variants with
their sha256 = prompt version, models requested and resolved, git commit) and its
headline numbers from `abtest.reporting.build_report`. `compare_runs` lines up two
runs on the same fixture case by case and lists the cases whose pairwise outcome
flipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from abtest.errors import UserError
from abtest.core.fmt import num, p_value
from abtest.reporting import build_report
from tabulate import tabulate
from abtest.reporting.summary import build_any
from abtest.store.runs import check_fixture_unchanged, load_run
from abtest.core.fixture_set import sha256_bytes

if TYPE_CHECKING:
    from abtest.store import Store

OUTCOME_LABEL = {"B": "B wins", "A": "A wins", "tie": "tie", None: "—"}


def _iso(x: Any) -> str | None:
    if x is None:
        return None
    return x.isoformat(sep=" ", timespec="seconds") if hasattr(x, "isoformat") else str(x)


def fixture_filter(store: Store, fixture: str | None) -> list[dict]:
    """Runs for a fixture given as a folder, a cases_sha256 (or its prefix), or a fixture name."""
    runs = store.list_runs()
    if not fixture:
        return runs
    p = Path(fixture)
    if (p / "cases.jsonl").is_file():

        sha = sha256_bytes((p / "cases.jsonl").read_bytes())
        resolved = str(p.resolve())
        return [r for r in runs if r["fixture_sha256"] == sha or r["fixture_path"] == resolved]
    low = fixture.lower()
    if len(low) >= 6 and all(ch in "0123456789abcdef" for ch in low):
        by_sha = [r for r in runs if (r["fixture_sha256"] or "").startswith(low)]
        if by_sha:
            return by_sha
    by_name = [r for r in runs if r["fixture_name"] == fixture]
    if by_name:
        return by_name
    raise UserError("no run on this fixture (give a fixture folder, its cases_sha256 or its name)",
                    file=fixture)


def _headline(store: Store, run: dict) -> dict:

    out: dict[str, Any] = {"status": run["status"], "report_error": None, "gate": None,
                           "pairwise": None, "faithfulness": None, "fixture_changed": False}
    try:

        check_fixture_unchanged(run)
    except UserError:
        out["fixture_changed"] = True
    try:
        rep = build_report(store, run["run_id"]).as_dict()
    except Exception as exc:  # a broken old run must not hide the others
        out["report_error"] = f"{type(exc).__name__}: {exc}"
        return out
    m = rep.get("metrics") or {}
    pw = m.get("pairwise")
    if pw:
        out["pairwise"] = {"b_wins": pw["b_wins"], "a_wins": pw["a_wins"],
                           "ties": pw["no_preference"], "p_value": pw.get("p_value"),
                           "p_holm": pw.get("p_holm")}
    f = m.get("faithfulness")
    if f:
        out["faithfulness"] = {"a": f.get("a"), "b": f.get("b"), "difference": f.get("difference"),
                               "ci_low": f.get("ci_low"), "ci_high": f.get("ci_high"),
                               "p_holm": f.get("p_holm")}
    out["status"] = rep.get("status", run["status"])
    out["n_finished"] = rep.get("n_finished")
    out["comparison_kind"] = rep.get("comparison_kind")
    out["claim_licensed"] = (rep.get("claim") or {}).get("licensed")
    out["gate"] = (rep.get("gate") or {}).get("decision")
    out["n_cases"] = rep.get("n_cases")
    return out


def run_history(store: Store, fixture: str | None = None) -> list[dict]:
    """Every run (oldest first) with its inputs and headline results."""
    rows = []
    for run in fixture_filter(store, fixture):
        resolved = store.resolved_models(run["run_id"])
        gen_req = run["generator_model"] or ""
        gens = [g.strip() for g in gen_req.split("|") if g.strip()]
        rows.append({
            "run_id": run["run_id"], "kind": run["kind"], "created_at": _iso(run["created_at"]),
            "finished_at": _iso(run["finished_at"]),
            "fixture": {"name": run["fixture_name"], "cases_sha256": run["fixture_sha256"],
                        "corpus_version": run["corpus_version"], "n_cases": run["n_cases"]},
            "variants": {"a": {"name": run["variant_a_name"], "sha256": run["variant_a_sha256"]},
                         "b": {"name": run["variant_b_name"], "sha256": run["variant_b_sha256"]}},
            "models": {"generator": {"requested": gen_req,
                                     "resolved": sorted({r for g in gens for r in resolved.get(g, [])})},
                       "judge": {"requested": run["judge_model"],
                                 "resolved": resolved.get(run["judge_model"], [])}},
            "git_commit": run["git_commit"],
            **_headline(store, run)})
    return rows


def _short(sha: str | None, n: int = 8) -> str:
    return (sha or "?")[:n]


def history_table(rows: list[dict]) -> str:

    table = []
    for r in rows:
        pw, f = r["pairwise"], r["faithfulness"]
        gen, judge = r["models"]["generator"], r["models"]["judge"]
        status = r["status"] + (" (fixture changed)" if r.get("fixture_changed") else "")
        if r.get("gate"):
            status += f", gate {r['gate']}"
        if r.get("report_error"):
            status += " (no report)"
        table.append([
            r["run_id"], (r["created_at"] or "")[:16],
            f"{r['fixture']['name']} {_short(r['fixture']['cases_sha256'], 12)}",
            f"{r['variants']['a']['name']}@{_short(r['variants']['a']['sha256'])}",
            f"{r['variants']['b']['name']}@{_short(r['variants']['b']['sha256'])}",
            _model(gen), _model(judge), _short(r["git_commit"], 12) if r["git_commit"] else "—",
            f"{pw['b_wins']}/{pw['a_wins']}/{pw['ties']}" if pw else "—",
            p_value(pw["p_value"], missing="—") if pw else "—",
            f"{f['difference']:+.3f}" if f and f.get("difference") is not None else "—",
            status])
    return tabulate(table, headers=["run", "date (UTC)", "fixture", "A", "B", "generator", "judge",
                                    "git", "B W/L/T", "p", "Δfaith", "status"],
                    disable_numparse=True)


def _model(m: dict) -> str:
    res = ", ".join(m["resolved"]) if m["resolved"] else "?"
    return f"{m['requested']} → {res}"


# --------------------------------------------------------------------------- compare
def compare_runs(store: Store, run1: str, run2: str, reports: tuple[dict, dict] | None = None
                 ) -> dict:
    """Per case: pairwise outcome and faithfulness of B in each run; which cases flipped.

    Two frozen runs (or two live runs) must share their fixture (golden file). A frozen run
    and a live run are compared over the case ids both have: the live run retrieved its own
    contexts, so this lines up two different measurements, never one claim."""

    r1, r2 = load_run(store, run1), load_run(store, run2)
    mixed = r1["kind"] != r2["kind"]
    if not mixed and r1["fixture_sha256"] != r2["fixture_sha256"]:
        raise UserError(f"runs are on different fixtures ({run1}: {r1['fixture_name']} "
                        f"{_short(r1['fixture_sha256'], 12)}…, {run2}: {r2['fixture_name']} "
                        f"{_short(r2['fixture_sha256'], 12)}…); compare runs on the same fixture")
    for r in (r1, r2):
        if r["kind"] != "live":
            check_fixture_unchanged(r)
    # a caller that has the two reports already (the view keeps them) passes them in
    rep1, rep2 = reports or (build_any(store, r1).as_dict(), build_any(store, r2).as_dict())
    by1 = {r["case_id"]: r for r in rep1["per_case"]}
    by2 = {r["case_id"]: r for r in rep2["per_case"]}
    common = set(by1) & set(by2) if mixed else set(by1) | set(by2)
    if mixed and not common:
        raise UserError(f"the frozen and the live run have no case id in common ({run1}: "
                        f"{r1['fixture_name']}, {run2}: {r2['fixture_name']})")
    # only cases both runs finished are lined up: an unfinished case has no outcome to compare
    # (counting it would call every case of an unfinished run "changed")
    ids = {c for c in common if (by1.get(c) or {}).get("finished") and
           (by2.get(c) or {}).get("finished")}
    left_out = {"run_1": sorted(c for c in common if not (by1.get(c) or {}).get("finished")),
                "run_2": sorted(c for c in common if not (by2.get(c) or {}).get("finished"))}
    cases = []
    for cid in sorted(ids):
        a, b = by1.get(cid, {}), by2.get(cid, {})
        o1, o2 = a.get("pairwise"), b.get("pairwise")
        f1, f2 = a.get("faithfulness_b"), b.get("faithfulness_b")
        cases.append({"case_id": cid, "question": a.get("question") or b.get("question"),
                      "outcome_1": o1, "outcome_2": o2, "faithfulness_b_1": f1,
                      "faithfulness_b_2": f2,
                      "faithfulness_b_diff": (f2 - f1) if f1 is not None and f2 is not None else None,
                      "finished_1": a.get("finished", False), "finished_2": b.get("finished", False),
                      "flipped": o1 != o2})

    def side(run: dict, rep: dict) -> dict:
        pw = (rep["metrics"] or {}).get("pairwise") or {}
        f = (rep["metrics"] or {}).get("faithfulness") or {}
        return {"run_id": run["run_id"], "created_at": _iso(run["created_at"]),
                "status": rep["status"],
                "variants": {"a": {"name": run["variant_a_name"], "sha256": run["variant_a_sha256"]},
                             "b": {"name": run["variant_b_name"], "sha256": run["variant_b_sha256"]}},
                "models": rep["models"], "git_commit": run["git_commit"],
                "pairwise": {"b_wins": pw.get("b_wins"), "a_wins": pw.get("a_wins"),
                             "ties": pw.get("no_preference"), "p_value": pw.get("p_value")},
                "faithfulness_b": f.get("b"), "faithfulness_difference": f.get("difference")}

    same = {k: (r1[f"variant_{k}_sha256"] == r2[f"variant_{k}_sha256"]) for k in ("a", "b")}
    return {"fixture": {"name": r1["fixture_name"], "cases_sha256": r1["fixture_sha256"]},
            "kinds": [r1["kind"], r2["kind"]],
            "only_1": sorted(set(by1) - ids), "only_2": sorted(set(by2) - ids),
            "run_1": side(r1, rep1), "run_2": side(r2, rep2),
            "same_variants": same, "n_cases": len(cases),
            "left_out": {"n": len(common) - len(ids), **left_out,
                         "note": "cases unfinished in either run are left out: only cases "
                                 "both runs finished are compared"},
            "flipped": [c["case_id"] for c in cases if c["flipped"]], "cases": cases}


def compare_table(cmp: dict, *, changed_only: bool = False) -> str:

    def f(x):
        return num(x, 2, missing="—")

    rows = [[("*" if c["flipped"] else ""), c["case_id"], OUTCOME_LABEL.get(c["outcome_1"], c["outcome_1"]),
             OUTCOME_LABEL.get(c["outcome_2"], c["outcome_2"]), f(c["faithfulness_b_1"]),
             f(c["faithfulness_b_2"])]
            for c in cmp["cases"] if c["flipped"] or not changed_only]
    r1, r2 = cmp["run_1"], cmp["run_2"]
    head = [f"fixture {cmp['fixture']['name']} ({_short(cmp['fixture']['cases_sha256'], 12)}), "
            f"{cmp['n_cases']} cases",
            f"run 1 {r1['run_id']}: B {r1['variants']['b']['name']}@{_short(r1['variants']['b']['sha256'])}"
            f" W/L/T {r1['pairwise']['b_wins']}/{r1['pairwise']['a_wins']}/{r1['pairwise']['ties']}",
            f"run 2 {r2['run_id']}: B {r2['variants']['b']['name']}@{_short(r2['variants']['b']['sha256'])}"
            f" W/L/T {r2['pairwise']['b_wins']}/{r2['pairwise']['a_wins']}/{r2['pairwise']['ties']}"]
    body = tabulate(rows, headers=["", "case", "run 1", "run 2", "faith B 1", "faith B 2"],
                    disable_numparse=True) if rows \
        else "(no case changed)"
    tail = (f"flipped: {len(cmp['flipped'])} of {cmp['n_cases']}"
            + (f" ({', '.join(cmp['flipped'])})" if cmp["flipped"] else ""))
    lo = cmp.get("left_out") or {}
    if lo.get("n"):
        tail += (f"\nleft out: {lo['n']} case(s) unfinished in either run (run 1: "
                 f"{len(lo['run_1'])}, run 2: {len(lo['run_2'])}); only cases both runs "
                 "finished are compared")
    return "\n".join(head) + "\n\n" + body + "\n\n" + tail
