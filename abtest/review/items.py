"""What a review item is: its labels, its task text, and how items are drawn.

Each judge the claim rests on is validated on its own items, so about ``n`` items are
drawn per judge, stratified by the judge's verdict (both kinds must be there for an
agreement to mean anything): pairwise cases (agreed A / B / tie, plus up to ``n`` cases
whose two orders disagreed, "flagged"), faithfulness claims (supported / unsupported),
coverage key points (covered / not covered) and abstention verdicts (abstained /
answered). Within a stratum the draw is a seeded uniform sample, so a bigger ``n`` gives a
superset of a smaller one.
"""

from __future__ import annotations

import hashlib
import random
from typing import TYPE_CHECKING, Any, Callable, cast


from abtest.errors import UserError
from abtest.stats import Verdict, pairwise_outcome
import duckdb

if TYPE_CHECKING:
    from abtest.store import Store

PAIRWISE_LABELS = ("1", "2", "tie")
CLAIM_LABELS = ("supported", "unsupported")
COVERAGE_LABELS = ("covered", "not_covered")
ABSTENTION_LABELS = ("abstained", "answered")
LABELS = {"pairwise": PAIRWISE_LABELS, "faithfulness": CLAIM_LABELS,
          "coverage": COVERAGE_LABELS, "abstention": ABSTENTION_LABELS}
ITEM_LETTER = {"pairwise": "p", "faithfulness": "c", "coverage": "k", "abstention": "s"}
DOWNLOAD_FORMAT = "abtest-review-labels"
PACK_FILES = ("items.jsonl", "labels.csv", "review.html")

PAIRWISE_TASK = ("Read the question and the retrieved context, then both answers. Which answer "
                 "is better overall (correct, grounded in the context, complete, clear)? "
                 "Label 1, 2 or tie.")
CLAIM_TASK = ("Is the claim supported by the retrieved context? Label supported only when the "
              "context states it; anything contradicted by or absent from the context is "
              "unsupported.")

COVERAGE_TASK = ("Does the answer state this key point (in any wording)? Label covered only "
                 "when it does; a point the answer omits or contradicts is not_covered.")
# the abstention judge's own question (claims_extract_v3 / abstention_v3): the labels that
# validate it must answer the same one
ABSTENTION_TASK = ("Does the answer respond to the question asked? Label abstained when it does "
                   "not: it declines, says it does not know or that the documents do not say, or "
                   "answers a different question, even when it adds other facts, true or cited. "
                   "Label answered when it states an answer to this question, even a hedged, "
                   "partial or wrong one (\"I'm not sure, but it opens at 9am\").")

SCORE = {"A": 0.0, "tie": 0.5, "B": 1.0}   # win-rate score of a pairwise outcome (B wins = 1)


# --------------------------------------------------------------------------- helpers

def run_tag(run_id: str) -> str:
    return hashlib.sha256(f"abtest-review:{run_id}".encode()).hexdigest()[:6]


def item_sha(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode()).hexdigest()



def flagged(ab: str | None, ba: str | None) -> bool:
    """The two orders disagreed: the judge's own disagreement, always worth a human look."""
    return ab != ba


def pairwise_stratum(ab: str | None, ba: str | None) -> str:
    """'flagged' when the orders disagreed, else the agreed outcome (A, B or tie)."""
    return "flagged" if flagged(ab, ba) else str(ab)


def outcome(ab: str | None, ba: str | None) -> str:

    # stored verdicts are text; pairwise_outcome refuses anything but A, B, tie or None
    return pairwise_outcome(cast(Verdict, ab), cast(Verdict, ba))


def claim_label(verdict: str | None) -> str | None:
    if verdict is None:
        return None
    return "supported" if verdict == "supported" else "unsupported"



def seeded_prefix(pool: list, k: int, seed_key: str) -> list:
    """The first k of a seeded permutation: a bigger n gives a superset of a smaller one."""
    pool = list(pool)
    random.Random(seed_key).shuffle(pool)
    return pool[:k]


def item_number(item_id: str) -> int:
    tail = item_id.rsplit("-", 1)[-1]
    digits = "".join(ch for ch in tail if ch.isdigit())
    return int(digits) if digits else 0




# --------------------------------------------------------------------------- export

def stratified(pools: dict[str, list], total: int, seed_key: str) -> list:
    """About `total` items spread evenly over the strata (a stratum that runs short gives its
    share to the others); within a stratum, the first k of a seeded permutation, so a bigger
    total gives a superset."""
    keys = sorted(k for k in pools if pools[k])
    quota = {k: 0 for k in keys}
    left = total
    while left > 0:
        open_ = [k for k in keys if quota[k] < len(pools[k])]
        if not open_:
            break
        for k in open_:
            if left == 0:
                break
            quota[k] += 1
            left -= 1
    out = []
    for k in keys:
        out += seeded_prefix(pools[k], quota[k], f"{seed_key}:{k}")
    return out


def write_rows(store: Store, fn: Callable[[list[dict[str, Any]]], None],
               rows: list[dict[str, Any]]) -> None:

    try:
        fn(rows)
    except duckdb.Error as exc:
        if "read-only" in str(exc) or "read only" in str(exc):
            raise UserError("results store is open read-only; review export/import must open "
                            "it read-write", file=str(store.path)) from None
        raise
