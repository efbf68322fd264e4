"""How many cases a claim needs: said before a run (dry run, progress) and in the report.

It sits below the runner and the report alike, because both ask it: the run plan before
the first call, the claim in every withheld reason it explains. The Holm family lives here
too: it is fixed from the configured judges before any data is seen.
"""

from __future__ import annotations
from abtest.stats import min_n_noninferiority
from abtest.stats import paired

# the Holm family, in this order, and the judge each member needs
HOLM_FAMILY = ("pairwise", "faithfulness", "coverage", "abstention_answerable",
               "abstention_unanswerable")
FAMILY_JUDGE = {"pairwise": "pairwise", "faithfulness": "faithfulness", "coverage": "coverage",
                "abstention_answerable": "abstention", "abstention_unanswerable": "abstention"}


def holm_family(judges) -> list[str]:
    """The family members the configured judges can measure, fixed before the run."""
    js = set(judges or ())
    return [k for k in HOLM_FAMILY if FAMILY_JUDGE[k] in js]


def min_n_binary_noninferiority(margin: float, alpha: float) -> int | None:
    """The fewest independent cases on which non-inferiority at `margin` can hold at all: the
    first N at which the one-sided betting bound of N pairs that all agree (no refusal or
    loss sampled) clears the margin (abtest.stats.min_n_noninferiority; docs/CLAIM_STATISTICS.md
    §2). Tango's limit with no discordant pair, z²/(N + z²), reached a 0.05 margin at 52,
    where a B refusing 5 % more went unseen in 7 % of runs."""

    return min_n_noninferiority(margin, alpha)


def min_n_faithfulness(level: float, alpha: float = 0.05) -> int:
    """The fewest pairs whose faithfulness can pass `level` at all (Holm's first step α/m):
    the first N at which N gains of the largest size (B 1, A 0 on every pair) give a p-value
    ≤ level with the interval abtest uses at that size (the betting one: so few pairs carry
    fewer than CLT_MIN_UNITS effective units), its bets tuned to the report's α."""

    return next(n for n in range(2, 10_000)
                if (paired([0.0] * n, [1.0] * n, alpha=alpha).p_value or 1.0) <= level)


def minimum_n(cfg, n_answerable: int | None = None, n_unanswerable: int | None = None) -> dict:
    """The smallest fixture that can license a claim at the configured margins and alpha,
    and whether one of the given size can: said before a run (dry run, progress) and in
    every withheld reason it explains."""
    m = max(1, len(holm_family(cfg.judges)))
    # the fewest pairs whose faithfulness gain can pass Holm's first step α/m
    faith = min_n_faithfulness(cfg.alpha / m, cfg.alpha)
    # a margin of 0 has no such N: with B refusing as often as A it can never hold
    refusals = min_n_binary_noninferiority(cfg.margins.abstention_answerable, cfg.alpha)
    out = {"answerable": None if refusals is None else max(faith, refusals),
           "unanswerable": min_n_binary_noninferiority(cfg.margins.abstention_unanswerable,
                                                       cfg.alpha),
           "margins": cfg.margins.model_dump(), "alpha": cfg.alpha,
           "why": ("with no discordant pair the one-sided betting limit of a refusal-rate "
                   "difference first falls below its margin at these N; n faithfulness gains "
                   "of 1 must give a p-value that passes Holm's first step α/m")}
    if n_answerable is not None:
        out["fixture"] = {"answerable": n_answerable, "unanswerable": n_unanswerable}
        out["can_license"] = bool(out["answerable"] is not None
                                  and out["unanswerable"] is not None
                                  and n_answerable >= out["answerable"]
                                  and (n_unanswerable or 0) >= out["unanswerable"])
    return out


def minimum_n_text(mn: dict) -> str:
    fx = mn.get("fixture") or {}
    head = (f"this fixture ({fx.get('answerable')} answerable, {fx.get('unanswerable')} "
            "unanswerable cases) " if fx else "")
    verb = "can license a claim" if mn.get("can_license") else "cannot license a claim"
    if mn["answerable"] is None or mn["unanswerable"] is None:
        return (f"{head}{verb if fx else 'no fixture can license a claim'}: a refusal margin "
                "of 0 holds only when B refuses significantly less than A (set margins)")
    return (f"{head}{verb if fx else 'a claim needs'}: at the margins "
            f"{mn['margins']['abstention_answerable']} (answerable refusals) and "
            f"{mn['margins']['abstention_unanswerable']} (unanswerable abstention) a claim needs "
            f"at least {mn['answerable']} answerable and {mn['unanswerable']} unanswerable cases")
