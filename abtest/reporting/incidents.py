"""What a hallucination incident is, in one place.

An incident is one variant's answer to one case — (variant, case) — scored below
`gates.incident_faithfulness`, with the claims of that answer the context does not support.
Only finished cases have incidents. The report lists them, the gate counts B's, the
remediation backlog names them, and `abtest view` links to and filters by them: all through
this module, so their counts cannot disagree (a case can hold two incidents, one per variant).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

VARIANTS = ("A", "B")


def is_incident(score: Any, threshold: float) -> bool:
    """An answer's faithfulness score below the incident threshold (no score: no incident)."""
    return isinstance(score, (int, float)) and not isinstance(score, bool) and score < threshold


def find(finished: Iterable[str], score_of: Mapping[str, Mapping[str, Any]],
         claims: Iterable[Mapping[str, Any]], threshold: float) -> list[dict[str, Any]]:
    """One row per incident, in case then variant order: case_id, variant, faithfulness and
    its unsupported claims. `score_of[variant][case_id]` is that answer's faithfulness."""
    by: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for c in claims:
        by[(c["case_id"], c["variant"])].append(c)
    out = []
    for cid in finished:
        for v in VARIANTS:
            score = (score_of.get(v) or {}).get(cid)
            if not is_incident(score, threshold):
                continue
            out.append({"case_id": cid, "variant": v, "faithfulness": score,
                        "unsupported": [{"claim": c["claim"], "verdict": c["verdict"]}
                                        for c in by[(cid, v)] if c["verdict"] != "supported"]})
    return out


def of(report: Mapping[str, Any], variant: str | None = None) -> list[Mapping[str, Any]]:
    """The report's incidents (of one variant)."""
    return [i for i in report.get("incidents") or []
            if variant is None or i.get("variant") == variant]


def count(report: Mapping[str, Any], variant: str | None = None) -> int:
    return len(of(report, variant))


def by_case(report: Mapping[str, Any]) -> dict[str, list[str]]:
    """Case id → the variants with an incident in it (sorted)."""
    out: dict[str, list[str]] = defaultdict(list)
    for i in of(report):
        out[i["case_id"]].append(i["variant"])
    return {k: sorted(v) for k, v in out.items()}
