"""A sequential run's claim metrics: the fixed-N metrics of the cases used, with the
anytime-valid intervals, p-values and conditions of its last look (abtest.stats.looks) put
where the claim reads them, so one claim function (claim.licensed_claim) decides both."""

from __future__ import annotations

from typing import Sequence

from abtest.stats.looks import Look
from abtest.reporting.metrics import apply_holm
import copy


def anytime_metrics(metrics: dict, lk: Look, alpha: float, family: Sequence[str]) -> dict:
    """A copy of the fixed-N metrics whose intervals, p-values and conditions are the
    look's anytime-valid ones, so the one claim (reporting.claim) reads them; the fixed-N
    figures on the same cases stay in the report beside them."""

    out = copy.deepcopy(metrics)
    s = lk.sequences
    f = out.get("faithfulness")
    if f and s["faithfulness"].ci_low is not None:
        f.update({"ci_low": s["faithfulness"].ci_low, "ci_high": s["faithfulness"].ci_high,
                  "ci_method": "anytime-valid betting confidence sequence (Waudby-Smith & "
                                "Ramdas 2024)",
                  "anytime": True,
                  "p_value": s["faithfulness"].p_value})
        f["drop_bound"] = {**(f.get("drop_bound") or {}),
                           "holds": lk.conditions.get("drop_bound") == "holds",
                           "ci_low": s["drop_bound"].ci_low, "ci_high": s["drop_bound"].ci_high,
                           "p_value": s["drop_bound"].p_value}
    c = out.get("coverage")
    if c and c.get("noninferiority") is not None:
        c["noninferiority"].update({"ci_low": s["coverage"].lower, "anytime": True,
                                    "holds": lk.conditions.get("coverage") == "holds",
                                    "rule": "lower one-sided anytime-valid limit of B − A > "
                                            "−margin"})
    ab = out.get("abstention") or {}
    for key, side in (("answerable", "upper"), ("unanswerable", "lower")):
        m = ab.get(key)
        if m and m.get("noninferiority") is not None:
            m["noninferiority"].update({side: getattr(s[f"abstention_{key}"], side),
                                        "anytime": True,
                                        "holds": lk.conditions.get(f"abstention_{key}")
                                        == "holds"})
    pw = out.get("pairwise")
    if pw:
        pw["p_value"] = s["pairwise"].p_value
    apply_holm(out, list(family), alpha)
    return out
