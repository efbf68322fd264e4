"""Two runs side by side as a typed object (`abtest.compare`): which cases flipped between
them, each run's headline. A typed face over `history.compare_runs`, the one comparison the
CLI (`abtest compare`) and the view use, so the three never disagree."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from abtest.reporting.compare import compare_table


@dataclass(frozen=True)
class CaseChange:
    """One case both runs finished: its pairwise outcome and B's faithfulness in each."""

    case_id: str
    question: str | None
    outcome_1: str | None
    outcome_2: str | None
    faithfulness_b_1: float | None
    faithfulness_b_2: float | None
    faithfulness_b_diff: float | None
    finished_1: bool
    finished_2: bool
    flipped: bool


@dataclass(frozen=True)
class Comparison:
    """What `abtest compare RUN1 RUN2` shows: `run_1`/`run_2` are each run's headline
    (variants, models, pairwise wins, B's faithfulness), `cases` the cases both finished."""

    fixture: dict[str, Any]
    kinds: list[str]
    run_1: dict[str, Any]
    run_2: dict[str, Any]
    same_variants: dict[str, bool]
    n_cases: int
    flipped: list[str]
    only_1: list[str]
    only_2: list[str]
    left_out: dict[str, Any]
    cases: list[CaseChange]
    _data: dict[str, Any] = field(init=False, repr=False, compare=False, default_factory=dict)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Comparison:
        """From `compare_runs`' dict (kept, so `as_dict` is that dict key for key)."""
        keys = {k for k in cls.__dataclass_fields__ if not k.startswith("_")}
        out = cls(**{k: v for k, v in data.items() if k in keys and k != "cases"},
                  cases=[CaseChange(**c) for c in data["cases"]])
        object.__setattr__(out, "_data", data)   # frozen: set once, here
        return out

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape `abtest compare --format json` prints."""
        return self._data

    def to_json(self) -> str:
        """`abtest compare RUN1 RUN2 --format json`, character for character."""
        return json.dumps(self._data, indent=2, default=str) + "\n"

    def to_text(self, *, changed_only: bool = False) -> str:
        """`abtest compare RUN1 RUN2` (the text table), character for character."""

        return compare_table(self._data, changed_only=changed_only) + "\n"

    def __repr__(self) -> str:
        return (f"<abtest Comparison {self.run_1.get('run_id')!r} vs "
                f"{self.run_2.get('run_id')!r}: {len(self.flipped)} of {self.n_cases} cases "
                "flipped>")
