"""Sequential runs' error rates in the synthetic world of validity_sim.py (its scenarios,
judges and claim code), monitored at every look.

Each experiment draws a world of N cases, takes its units (groups; a case of its own is its
own group) in a seeded random order, and after every `--look` units asks abtest.stats.looks
whether the claim is decided (every condition holds, or one is shown to fail) or futile; at
the stop, the claim is the real one (reporting.claim.licensed_claim) over the fixed-N metrics
of the cases used with the look's anytime-valid intervals in place (reporting.anytime). Per
scenario it prints the sequential licence rate, the fixed-N rate over all N cases (the same
worlds), the rate of the fixed-N claim checked at every look and taken when it first says
"licensed" (peeking: the problem sequential inference solves), and the median fraction of
the fixture used.

    python scripts/validity_sim.py --sequential                 # the docs' table
    python scripts/validity_sim.py --sequential --quick          # a smoke run
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import validity_world as vs

# (scenario, N): NULL and ALT at N = 400 (the yardstick), the others at their own N
PLAN = [("null", 400), ("true_effect", 400), ("true_effect", 200), ("true_effect", 100),
        ("duplicates", 160), ("duplicates_effect", 160),
        ("clustered", 200), ("selective_refusal", 200), ("few_references", 200),
        ("claim_cap", 200), ("pairwise_rule", 200), ("soft_refusal", 200)]
MAIN = (("null", 400), ("true_effect", 400))   # ≥ 1,000 experiments each; the others fewer


@dataclass
class SeqRow:
    name: str
    n: int
    runs: int = 0
    licensed: int = 0
    fixed_runs: int = 0
    fixed_licensed: int = 0
    peek_runs: int = 0
    peek_licensed: int = 0
    peek_faith_fixed: int = 0       # faithfulness B > A, its own fixed-N p ≤ α, at some look
    peek_faith_seq: int = 0         # the same with its always-valid p
    fractions: list = field(default_factory=list)
    stops: dict = field(default_factory=dict)
    mismatches: int = 0
    seconds: float = 0.0


def _fast_mde() -> None:
    """MDE figures are report text, never a condition of the claim; the simulation skips
    statsmodels' power solver (two thirds of compute_metrics' time)."""
    from abtest import stats

    def none(n, sd_d=None, alpha=0.05, power=0.8, alternative="two-sided"):
        return stats.MDEResult(n, float("nan"), None, sd_d, alpha, power)

    stats.mde_paired_t = none


def units_in_order(w, seed: int) -> list[list[str]]:
    """The world's units in the order a sequential run with this seed takes them."""
    from abtest.store.sequential_record import unit_order

    return unit_order([c.id for c in w.cases], w.groups or None, seed)


def experiment(sc, n: int, seed: int, cfg, look_units: int, *, fixed: bool, peek: bool
               ) -> dict:
    from abtest.reporting.anytime import anytime_metrics
    from abtest.reporting.metrics import compute_metrics
    from abtest.stats.looks import (case_differences, eligible_cases, expected_units, look,
                                   undecidable_reason)
    from abtest.stats.sizing import holm_family

    w = vs.World(sc, n, seed)
    jv, lengths, ids, answerable = vs.judgments(w, sc, seed, cfg)
    groups = w.groups or None
    units = units_in_order(w, seed)
    diffs = case_differences(ids, jv, answerable)
    family = holm_family(cfg.judges)
    view = vs.fixture_view(w, sc)
    n_stars = expected_units(units, len(units), view)
    eligible = eligible_cases(view, cfg.judges)   # the runner's undecidable stop, as it reads it
    taken: list[str] = []
    prev = None
    peeked = faith_fixed = faith_seq = False
    lk = None
    for k, start in enumerate(range(0, len(units), look_units), 1):
        for u in units[start:start + look_units]:
            taken += u
        lk = look(k, taken, diffs, groups, cfg, family=family, n_star=n_stars, previous=prev)
        if peek:
            m, _, _ = compute_metrics(taken, jv, answerable, lengths, cfg, cfg.judges,
                                      groups=groups)
            peeked = peeked or vs.licensed_claim_of(vs.validated_report(m, cfg),
                                                    cfg)["licensed"]
            f = m.get("faithfulness") or {}
            faith_fixed = faith_fixed or bool((f.get("p_value") or 1) <= cfg.alpha
                                              and (f.get("difference") or 0) > 0)
        fs = lk.sequences["faithfulness"]
        faith_seq = faith_seq or bool((fs.p_value or 1) <= cfg.alpha and (fs.mean or 0) > 0)
        prev = lk
        if lk.stop is None:
            why = undecidable_reason(lk, k, taken, eligible, cfg)
            if why is not None:
                lk.stop, lk.why["undecidable"] = "undecidable", why
        if lk.stop:
            break
    assert lk is not None
    metrics, _, _ = compute_metrics(taken, jv, answerable, lengths, cfg, cfg.judges,
                                    groups=groups)
    seq = anytime_metrics(metrics, lk, cfg.alpha, family)
    claim = vs.licensed_claim_of(vs.validated_report(seq, cfg), cfg)
    out = {"licensed": claim["licensed"], "licensable": lk.licensable,
           "stop": lk.stop or "exhausted", "fraction": len(taken) / len(ids), "looks": lk.number,
           "peek": peeked, "faith_fixed": faith_fixed, "faith_seq": faith_seq}
    if fixed:
        full, _, _ = compute_metrics(ids, jv, answerable, lengths, cfg, cfg.judges,
                                     groups=groups)
        out["fixed"] = vs.licensed_claim_of(vs.validated_report(full, cfg), cfg)["licensed"]
    return out


def run(experiments: int, side: int, look_units: int, peeks: int, quick: bool) -> int:
    from abtest.core.models import Config

    _fast_mde()
    cfg = Config()
    by_name = {sc.name: sc for sc in vs.SCENARIOS}
    rows = []
    for name, n in PLAN:
        sc = by_name[name]
        k = experiments if (name, n) in MAIN else side
        row = SeqRow(name, n)
        t0 = time.monotonic()
        for i in range(k):
            r = experiment(sc, n, 50_000 * n + i, cfg, look_units, fixed=i < max(side, k // 3),
                           peek=name == "null" and i < peeks)
            row.runs += 1
            row.licensed += r["licensed"]
            row.fractions.append(r["fraction"])
            row.stops[r["stop"]] = row.stops.get(r["stop"], 0) + 1
            row.mismatches += r["licensed"] != r["licensable"]
            if "fixed" in r:
                row.fixed_runs += 1
                row.fixed_licensed += r["fixed"]
            if name == "null" and i < peeks:
                row.peek_runs += 1
                row.peek_licensed += r["peek"]
                row.peek_faith_fixed += r["faith_fixed"]
                row.peek_faith_seq += r["faith_seq"]
        row.seconds = time.monotonic() - t0
        print(f"  sequential {name} N={n}: {row.runs} in {row.seconds:.0f}s, licence "
              f"{row.licensed / row.runs:.3f}", file=sys.stderr)
        rows.append((sc, row))
    return print_table(rows, look_units, quick)


def print_table(rows, look_units: int, quick: bool) -> int:
    alpha = vs.ALPHA
    print(f"| scenario | N | runs | licensed, sequential (look every {look_units} units) | "
          "licensed, fixed N (all cases) | fixed N checked at every look | median share of "
          "the fixture used | stops: decision / futility / undecided / ran out | sound? |")
    print("|---|---|---|---|---|---|---|---|---|")
    ok_all = True
    fixed_power = {}
    for sc, r in rows:
        if r.fixed_runs:
            fixed_power[(sc.name, r.n)] = r.fixed_licensed / r.fixed_runs
    for sc, r in rows:
        rate = r.licensed / r.runs
        fixed = (f"{r.fixed_licensed / r.fixed_runs:.3f} ({r.fixed_runs})" if r.fixed_runs
                 else "—")
        peek = f"{r.peek_licensed / r.peek_runs:.3f} ({r.peek_runs})" if r.peek_runs else "—"
        med = vs._median(r.fractions)
        stops = " / ".join(str(r.stops.get(s, 0)) for s in ("decision", "futility",
                                                              "undecidable", "exhausted"))
        if sc.name in vs.NULL_TYPE:
            se = (alpha * (1 - alpha) / r.runs) ** 0.5
            ok, why = rate <= alpha + (2 * se if quick else 0), f"≤ α ({alpha})"
        elif sc.name == "true_effect" and r.n == 400:
            ok = rate >= fixed_power.get((sc.name, r.n), 0) - 0.05 - (0.1 if quick else 0)
            why = "power ≥ fixed N − 0.05"
            if not quick:
                ok = ok and med <= 0.5
                why += "; median share ≤ 0.5"
        elif sc.name in ("true_effect", "duplicates_effect"):
            ok, why = True, "reported: the price of looking, at smaller N"
        else:
            ok, why = r.licensed == 0, "never licensed"
        ok_all &= ok
        print(f"| {sc.name} | {r.n} | {r.runs} | {rate:.3f} | {fixed} | {peek} | {med:.2f} | "
              f"{stops} | {'yes' if ok else 'NO'}: {why} |")
    for sc, r in rows:
        if r.peek_runs:
            print(f"\n{sc.name}, N={r.n}, {r.peek_runs} runs looked at every {look_units} units: "
                  f"faithfulness B > A (its own p ≤ {alpha}, no Holm) at some look — fixed-N "
                  "p-values "
                  f"{r.peek_faith_fixed / r.peek_runs:.3f}, always-valid "
                  f"{r.peek_faith_seq / r.peek_runs:.3f}; the whole claim, fixed-N at some look "
                  f"{r.peek_licensed / r.peek_runs:.3f}")
    mism = sum(r.mismatches for _, r in rows)
    print(f"\nclaim at the stop ≠ the look's own decision in {mism} of "
          f"{sum(r.runs for _, r in rows)} runs (a condition outside the sequences: claim cap, "
          "unchecked claims)")
    return 0 if ok_all else 1
