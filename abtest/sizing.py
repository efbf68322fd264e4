"""How many cases a claim needs: said before a run (dry run, progress) and in the report.

It sits below the runner and the report alike, because both ask it: the run plan before
the first call, the claim in every withheld reason it explains. The Holm family lives here
too: it is fixed from the configured judges before any data is seen.
"""

from __future__ import annotations

import math

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
    """The fewest pairs for which a binary non-inferiority test at `margin` can hold at all:
    with no discordant pair the upper (1 − 2α) Tango limit is z²/(N + z²), which must fall
    below the margin (docs/STATISTICS.md)."""
    from scipy import stats as st

    if margin <= 0:
        return None
    z2 = float(st.norm.ppf(1 - alpha)) ** 2
    return int(math.floor(z2 * (1 - margin) / margin)) + 1


def minimum_n(cfg, n_answerable: int | None = None, n_unanswerable: int | None = None) -> dict:
    """The smallest fixture that can license a claim at the configured margins and alpha,
    and whether one of the given size can: said before a run (dry run, progress) and in
    every withheld reason it explains."""
    m = max(1, len(holm_family(cfg.judges)))
    # n same-signed faithfulness differences give p = 2 * 0.5**n; Holm's first step is α/m
    faith = next(n for n in range(2, 200) if 2 * 0.5 ** n <= cfg.alpha / m)
    # a margin of 0 has no such N: with B refusing as often as A it can never hold
    refusals = min_n_binary_noninferiority(cfg.margins.abstention_answerable, cfg.alpha)
    out = {"answerable": None if refusals is None else max(faith, refusals),
           "unanswerable": min_n_binary_noninferiority(cfg.margins.abstention_unanswerable,
                                                       cfg.alpha),
           "margins": cfg.margins.model_dump(), "alpha": cfg.alpha,
           "why": ("with no discordant pair the upper (1 − 2α) Tango limit of a refusal-rate "
                   "difference is z²/(N + z²), which must fall below its margin; n equal "
                   "faithfulness gains give p = 2·0.5ⁿ, which must pass Holm's first step α/m")}
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
