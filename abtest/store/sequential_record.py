"""A sequential run's record, as the run keeps it in its info (`info["sequential"]`): the
seeded order its units are taken in, the units taken at each finished look and the look
under way, why it stopped. One reading of it (`run_plan`, `plan_for_run`) serves the
runner, the run's state and counts (abtest.store.state) and its report; the anytime-valid
looks over it are abtest.stats.looks'.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Sequence
import hashlib
from abtest.core.groups import case_groups

def unit_order(case_ids: Sequence[str], groups: Mapping[str, str] | None, seed: int
               ) -> list[list[str]]:
    """The fixture's units (a group's cases together, in id order; a case of its own is its
    own unit) in the seeded random order a sequential run takes them: units sorted by
    sha256(seed, unit key), the same for the same fixture, grouping and seed on any machine
    and Python version."""

    by: dict[str, list[str]] = {}
    for cid in sorted(case_ids):
        by.setdefault((groups or {}).get(cid, cid), []).append(cid)

    def rank(key: str) -> str:
        return hashlib.sha256(f"{seed}\x1f{key}".encode()).hexdigest()

    return [by[k] for k in sorted(by, key=lambda k: (rank(k), k))]


def order_digest(units: Sequence[Sequence[str]]) -> str:
    """sha256 of the order, stored with the run: a resume that would take another order
    (the fixture's grouping changed) is refused."""

    return hashlib.sha256(json.dumps([list(u) for u in units]).encode()).hexdigest()


def taken_cases(units: Sequence[Sequence[str]], n_units: int) -> list[str]:
    """The cases of the first `n_units` units, in the order taken."""
    return [cid for u in units[:n_units] for cid in u]


STOPS = {"decision": "stopped for a decision: every condition of the claim is decided",
         "futility": "stopped for futility: faithfulness B − A is shown to lie within "
                     "±{futility}",
         "undecidable": "stopped undecided: a condition of the claim cannot be measured on "
                        "this fixture",
         "exhausted": "ran out of cases: the fixture is used up",
         "max_cases": "reached max_cases"}


@dataclass
class SequentialPlan:
    """A sequential run's order and how far it got, from the record it keeps in its info
    (`info["sequential"]`): the one reading the runner, run state and report share."""
    units: list[list[str]]
    boundaries: list[int]       # units taken at each finished look
    taking: int                 # units taken so far (the look under way included)
    cap: int                    # the most units it may take (sequential.max_cases)
    stop: str | None
    record: dict

    @property
    def taken(self) -> list[str]:
        return taken_cases(self.units, self.taking)

    @property
    def n_cases(self) -> int:
        return sum(len(u) for u in self.units)

    @property
    def not_needed(self) -> int:
        return self.n_cases - len(self.taken)

    def stop_text(self) -> str | None:
        if self.stop is None:
            return None
        text = STOPS.get(self.stop, self.stop).format(futility=self.record.get("futility"))
        why = self.record.get("stop_why")   # an undecided run's own reason
        return f"{text} ({why})" if why else text


def new_record(settings, case_ids: Sequence[str], groups: Mapping[str, str] | None) -> dict:
    """What a sequential run stores when it starts: its settings and the digest of its order."""
    units = unit_order(case_ids, groups, settings.seed)
    cap = len(units)
    if settings.max_cases is not None:
        n = cap = 0
        for u in units:
            if n + len(u) > settings.max_cases and cap:
                break
            n, cap = n + len(u), cap + 1
    return {"seed": settings.seed, "look": settings.look, "futility": settings.futility,
            "max_cases": settings.max_cases, "order_sha256": order_digest(units),
            "n_units": len(units), "cap": cap, "boundaries": [], "taking": 0, "stop": None}


def run_plan(record: Mapping, case_ids: Sequence[str], groups: Mapping[str, str] | None
             ) -> SequentialPlan:
    """The plan a stored record describes, over the fixture's cases now."""
    units = unit_order(case_ids, groups, int(record.get("seed", 0)))
    return SequentialPlan(units, list(record.get("boundaries") or []), int(record.get("taking") or 0),
                   int(record.get("cap") or len(units)), record.get("stop"), dict(record))


def plan_for_run(run: Mapping, cases: Mapping[str, Mapping]) -> SequentialPlan | None:
    """A stored run's sequential plan over its fixture's cases (`cases`, id → case), or None
    for a run that is not sequential (or whose fixture cannot be read)."""


    info = json.loads(run.get("info_json") or "{}")
    record = info.get("sequential")
    if not record or not cases:
        return None
    group_by = json.loads(run.get("config_json") or "{}").get("group_by")
    groups = case_groups(list(cases.values()), group_by)
    return run_plan(record, list(cases), groups)
