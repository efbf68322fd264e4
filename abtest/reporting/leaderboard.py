"""Model comparison: one variant, several generator models, a leaderboard.

Each model is run against the first (the baseline) as a normal paired run of kind
'model', so every number comes from the same machinery; the baseline's answers are
generated once and served from the cache afterwards.
"""

from __future__ import annotations

from abtest.core.config import LoadedConfig
from abtest.errors import UserError
from abtest.reporting import build_report
from abtest.running.runner import run
from abtest.store import Store
from abtest.reporting.summary import keep_summary


def run_models(lc: LoadedConfig, fixture, variant, models: list[str], *, progress=None) -> dict:

    models = [m.strip() for m in models if m.strip()]
    if len(models) < 2 or len(set(models)) != len(models):
        raise UserError("--models needs at least two distinct litellm model names", field="--models")

    runs = []
    for m in models[1:]:
        res = run(lc, fixture, variant, variant, models=(models[0], m), progress=progress)
        keep_summary(lc.store_path, res.run_id, progress)   # each run is listed in the view
        runs.append((m, res))
    store = Store(lc.store_path, read_only=True)
    try:
        reports = {m: build_report(store, res.run_id).as_dict() for m, res in runs}
    finally:
        store.close()
    return leaderboard(models, reports, threshold=lc.config.gates.incident_faithfulness)


def _side(rep: dict, side: str, key: str):
    m = rep["metrics"].get(key) or {}
    return m.get(side)


def leaderboard(models: list[str], reports: dict[str, dict], threshold: float = 0.85) -> dict:
    """Rows sorted by mean faithfulness, plus the cases whose verdict flips between models."""
    base = models[0]
    first = reports[models[1]]
    rows = [{"model": base, "faithfulness": _side(first, "a", "faithfulness"),
             "coverage": _side(first, "a", "coverage"),
             "refusal_answerable": ((first["metrics"].get("abstention") or {}).get("answerable") or {}).get("a"),
             "refusal_unanswerable": ((first["metrics"].get("abstention") or {}).get("unanswerable") or {}).get("a"),
             "pairwise_vs_baseline": None, "run_id": first["run_id"], "status": first["status"]}]
    for m in models[1:]:
        r = reports[m]
        ab = r["metrics"].get("abstention") or {}
        rows.append({"model": m, "faithfulness": _side(r, "b", "faithfulness"),
                     "coverage": _side(r, "b", "coverage"),
                     "refusal_answerable": (ab.get("answerable") or {}).get("b"),
                     "refusal_unanswerable": (ab.get("unanswerable") or {}).get("b"),
                     "pairwise_vs_baseline": (r["metrics"].get("pairwise") or {}).get("b"),
                     "pairwise_p": (r["metrics"].get("pairwise") or {}).get("p_value"),
                     "run_id": r["run_id"], "status": r["status"]})
    rows.sort(key=lambda x: (x["faithfulness"] is None, -(x["faithfulness"] or 0)))
    per_case: dict[str, dict[str, float | None]] = {}
    for row in first["per_case"]:
        per_case.setdefault(row["case_id"], {})[base] = row.get("faithfulness_a")
    for m in models[1:]:
        for row in reports[m]["per_case"]:
            per_case.setdefault(row["case_id"], {})[m] = row.get("faithfulness_b")
    flipped = []
    for cid, scores in sorted(per_case.items()):
        passed = {m: s >= threshold for m, s in scores.items() if s is not None}
        if len(set(passed.values())) > 1:
            flipped.append({"case_id": cid, "faithful": sorted(m for m, ok in passed.items() if ok),
                            "not_faithful": sorted(m for m, ok in passed.items() if not ok)})
    return {"baseline": base, "primary": "faithfulness", "rows": rows, "flipped": flipped,
            "note": "each model ran the same variant over the same frozen contexts; pairwise is the "
                    "win rate against the baseline (ties half)"}
