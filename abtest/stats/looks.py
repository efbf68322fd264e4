"""Anytime-valid inference for sequential runs: intervals and p-values that stay valid
whenever they are read, so a run may stop as soon as the answer is known.

A fixed-N p-value checked after every look and stopped when small is not a p-value any
more (docs/CLAIM_STATISTICS.md §11). Here each claim metric is a stream of paired differences in
[−1, 1], one per *unit* (a group of cases, taken whole, in a seeded random order; a case of
its own is its own group), and after n units it gets the betting confidence sequence of
Waudby-Smith & Ramdas (JRSS-B 2024) through `abtest.stats.anytime`: a two-sided sequence,
one-sided lower and upper bounds (for non-inferiority) and an always-valid p-value, all
valid at every look at once for any distribution on [−1, 1]. Nothing is estimated that could
be too small: the normal mixture with an estimated σ this replaced let the "no more
refusals" bound clear its margin in 10.5 % of runs where A never refused and B refused at
exactly the margin (its σ̂ is tiny when discordant pairs are rare).

The fixture's size is known before the first look, so each condition's bets are tuned to
the units it will have if the run goes to the end (`n_stars`: every unit for faithfulness,
the answerable units for refusals, the unanswerable ones for abstention): at the end of the
fixture its bound is nearly the fixed-N betting bound on the same cases, and a sequential
run licenses what a fixed-N run would nearly as often (docs/CLAIM_STATISTICS.md §11).

The claim keeps its fixed-N rules on top (the minimum-evidence floors, at least MIN_GROUPS
groups for a grouped metric, the drop bound, Holm over the same family, now over
always-valid p-values, which are valid p-values at the stopping time). The measured
error rates are in docs/CLAIM_STATISTICS.md §11 (`scripts/validity_sim.py --sequential`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from abtest.store.sequential_record import SequentialPlan, taken_cases
from abtest.stats import anytime
from abtest import stats
from abtest.core.groups import MIN_GROUPS
from abtest.stats.sizing import min_n_binary_noninferiority
from abtest.stats.sizing import holm_family

STATES = ("holds", "fails", "open")


@dataclass
class Sequence_:
    """One metric's confidence sequence at a look."""
    metric: str
    n: int                          # units with a difference
    mean: float | None = None
    sd: float | None = None
    ci_low: float | None = None     # two-sided, level 1 − α, valid at every look
    ci_high: float | None = None
    lower: float | None = None      # one-sided at α: B − A is above this
    upper: float | None = None      # one-sided at α: B − A is below this
    p_value: float | None = None    # always-valid, two-sided, H0: no difference
    cases: int = 0
    n_star: float | None = None     # the units its bets are tuned to

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("metric", "n", "cases", "mean", "sd", "ci_low",
                                              "ci_high", "lower", "upper", "p_value",
                                              "n_star")}


def sequence(metric: str, diffs: Sequence[float], *, alpha: float, n_star: float,
             previous_p: float | None = None, cases: int = 0) -> Sequence_:
    """The metric's sequence over its units' differences so far (each in [−1, 1], in the
    order taken): `abtest.stats.anytime` read at the last unit. The p-value is the running
    minimum over every unit so far (`previous_p` may only lower it further)."""

    n = len(diffs)
    out = Sequence_(metric, n, cases=cases, n_star=n_star)
    if n < 2:
        return out
    b = anytime(diffs, looks=[n], alpha=alpha, n_star=n_star)[0]
    mean = b.mean or 0.0
    out.mean = b.mean
    out.sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    out.ci_low, out.ci_high, out.lower, out.upper = b.ci_low, b.ci_high, b.lower, b.upper
    out.p_value = b.p_value if previous_p is None or b.p_value is None else \
        min(b.p_value, previous_p)
    return out


def unit_differences(diff_by_case: Mapping[str, float], order: Sequence[str],
                     groups: Mapping[str, str] | None) -> list[float]:
    """One difference per unit, in the order the units were taken: the mean of its cases'
    differences (units whose cases have none for this metric are left out)."""
    by_unit: dict[str, list[float]] = {}
    first: dict[str, int] = {}
    for i, cid in enumerate(order):
        if cid not in diff_by_case:
            continue
        u = (groups or {}).get(cid, cid)
        by_unit.setdefault(u, []).append(diff_by_case[cid])
        first.setdefault(u, i)
    return [sum(v) / len(v) for u, v in sorted(by_unit.items(), key=lambda kv: first[kv[0]])]


@dataclass
class Look:
    """What a look decided: each condition's state, and whether the run stops."""
    number: int
    units: int                                   # units (groups) taken so far
    cases: int
    sequences: dict[str, Sequence_] = field(default_factory=dict)
    conditions: dict[str, str] = field(default_factory=dict)   # name → holds|fails|open
    why: dict[str, str] = field(default_factory=dict)          # name → one line
    stop: str | None = None          # "decision" | "futility" | None (go on)
    licensable: bool = False         # every effect condition holds

    def as_dict(self) -> dict:
        return {"look": self.number, "units": self.units, "cases": self.cases,
                "stop": self.stop, "licensable": self.licensable,
                "conditions": dict(self.conditions), "why": dict(self.why),
                "sequences": {k: s.as_dict() for k, s in self.sequences.items()}}


# --------------------------------------------------------------------------- differences

METRICS = ("faithfulness", "drop_bound", "coverage", "abstention_answerable",
           "abstention_unanswerable", "pairwise")


def case_differences(finished: Sequence[str], jv: Mapping, answerable: Mapping[str, bool]
                     ) -> dict[str, dict[str, float]]:
    """Per claim metric, each finished case's paired difference B − A, defined exactly as the
    fixed-N metrics define it (reporting.metrics): faithfulness and coverage where both
    answers have a score; the drop bound's worst case on answerable pairs one side left
    unscored (B 0, or A 1); abstention (1 abstained, 0 answered) split by answerability;
    pairwise +1 B, −1 A, 0 no preference (both orders)."""

    none: dict = {}

    def score(judge: str, v: str, cid: str):
        return ((jv.get((judge, v)) or none).get(cid) or none).get("score")

    out: dict[str, dict[str, float]] = {m: {} for m in METRICS}
    ab_rows, ba_rows = jv.get(("pairwise", "AB")) or none, jv.get(("pairwise", "BA")) or none
    abst = {v: jv.get(("abstention", v)) or none for v in ("A", "B")}
    for cid in finished:
        fa, fb = score("faithfulness", "A", cid), score("faithfulness", "B", cid)
        if fa is not None and fb is not None:
            out["faithfulness"][cid] = fb - fa
        if (fa is None) != (fb is None) and answerable.get(cid, True):
            out["drop_bound"][cid] = (0.0 if fb is None else fb) - (1.0 if fa is None else fa)
        elif fa is not None and fb is not None:
            out["drop_bound"][cid] = fb - fa
        ca, cb = score("coverage", "A", cid), score("coverage", "B", cid)
        if ca is not None and cb is not None:
            out["coverage"][cid] = cb - ca
        if cid in abst["A"] and cid in abst["B"]:
            xa = abst["A"][cid].get("verdict") == "abstained"
            xb = abst["B"][cid].get("verdict") == "abstained"
            key = "abstention_answerable" if answerable.get(cid, True) else \
                "abstention_unanswerable"
            out[key][cid] = float(xb) - float(xa)
        if cid in ab_rows and cid in ba_rows:
            o = stats.pairwise_outcome(ab_rows[cid].get("verdict"), ba_rows[cid].get("verdict"))
            out["pairwise"][cid] = {"B": 1.0, "A": -1.0}.get(o, 0.0)
    return out


# --------------------------------------------------------------------------- a look

def kish(sizes: Sequence[int]) -> float:
    """Kish's effective number of independent cases, n²/Σn_g² (docs/CLAIM_STATISTICS.md §9)."""
    total = sum(sizes)
    return total * total / sum(s * s for s in sizes) if sizes else 0.0


def look(number: int, order: Sequence[str], diffs: Mapping[str, Mapping[str, float]],
         groups: Mapping[str, str] | None, cfg, *, family: Sequence[str],
         n_star: float | Mapping[str, float], previous: Look | None = None) -> Look:
    """The claim's conditions after the cases in `order` (whole units, in the order taken),
    each decided by its anytime-valid sequence: holds, fails (shown to fail: it cannot
    hold) or open; the run stops for a decision when every one holds or one fails, and for
    futility when faithfulness B − A is shown to lie within ±`sequential.futility`."""

    alpha = cfg.alpha
    unit_of = {cid: (groups or {}).get(cid, cid) for cid in order}
    lk = Look(number, len(set(unit_of.values())), len(order))
    for m in METRICS:
        d = diffs.get(m) or {}
        prev = previous.sequences.get(m) if previous else None
        # fixed before the first look (the fixture's units for this condition), never read
        # off the data: a horizon that moved with n would make each look another bet
        ns = n_star.get(m) if isinstance(n_star, Mapping) else n_star
        lk.sequences[m] = sequence(m, unit_differences(d, order, groups), alpha=alpha,
                                   n_star=max(float(ns or 1.0), 1.0),
                                   previous_p=prev.p_value if prev else None,
                                   cases=sum(1 for c in order if c in d))
    ps: list[float] = [p if (p := lk.sequences[k].p_value) is not None else 1.0
                       for k in family]
    holm = dict(zip(family, stats.holm(ps, alpha=alpha).p_adjusted)) if family else {}
    s = lk.sequences

    def units_of(metric: str) -> list[int]:
        sizes: dict[str, int] = {}
        for cid in order:
            if cid in (diffs.get(metric) or {}):
                sizes[unit_of[cid]] = sizes.get(unit_of[cid], 0) + 1
        return list(sizes.values())

    def enough(metric: str, margin: float) -> str | None:
        sq = s[metric]
        if sq.n < MIN_GROUPS:
            return f"{sq.n} units so far (at least {MIN_GROUPS} before a decision)"
        floor = min_n_binary_noninferiority(margin, alpha)
        units = kish(units_of(metric))
        if floor and units < floor:
            return f"worth {units:.1f} independent cases (needs ≥ {floor})"
        return None

    def set_(name: str, state: str, why: str) -> None:
        lk.conditions[name], lk.why[name] = state, why

    f, w = s["faithfulness"], s["drop_bound"]
    fp = holm.get("faithfulness")
    if f.ci_low is None or f.n < MIN_GROUPS:
        set_("faithfulness", "open", f"{f.n} units so far")
    elif fp is not None and fp <= alpha and (f.mean or 0) > 0:
        set_("faithfulness", "holds", f"B − A {f.mean:+.3f}, always-valid Holm p {fp:.4f}")
    elif f.ci_high is not None and f.ci_high <= 0:
        set_("faithfulness", "fails", f"B − A {f.mean:+.3f}: the sequence is at or below 0 "
                                      f"(upper limit {f.ci_high:+.3f})")
    else:
        set_("faithfulness", "open", f"B − A {f.mean:+.3f}, always-valid Holm p "
                                     f"{(fp if fp is not None else 1.0):.4f}")
    if w.ci_low is None or w.n < MIN_GROUPS:
        set_("drop_bound", "open", f"{w.n} units so far")
    elif w.p_value is not None and w.p_value <= alpha and (w.mean or 0) > 0:
        set_("drop_bound", "holds", f"worst case B − A {w.mean:+.3f}, p {w.p_value:.4f}")
    elif w.ci_high is not None and w.ci_high <= 0:
        set_("drop_bound", "fails", f"at the worst case for the dropped pairs B − A is at or "
                                    f"below 0 (upper limit {w.ci_high:+.3f})")
    else:
        set_("drop_bound", "open", f"worst case B − A {w.mean if w.mean is not None else 0:+.3f}")
    margins = cfg.margins
    for name, margin, better in (("coverage", margins.coverage, "higher"),
                                 ("abstention_answerable", margins.abstention_answerable,
                                  "lower"),
                                 ("abstention_unanswerable", margins.abstention_unanswerable,
                                  "higher")):
        sq = s[name]
        if sq.lower is None or sq.upper is None:
            set_(name, "open", f"{sq.n} units so far")
            continue
        short = enough(name, margin)
        if better == "higher":
            if sq.upper < -margin:
                set_(name, "fails", f"B − A {sq.mean:+.3f}: upper limit {sq.upper:+.3f} < "
                                    f"−{margin} (shown worse than the margin)")
            elif sq.lower > -margin and not short:
                set_(name, "holds", f"lower limit {sq.lower:+.3f} > −{margin}")
            else:
                set_(name, "open", short or f"lower limit {sq.lower:+.3f} ≤ −{margin}")
        else:
            if sq.lower > margin:
                set_(name, "fails", f"B − A {sq.mean:+.3f}: lower limit {sq.lower:+.3f} > "
                                    f"{margin} (shown to rise beyond the margin)")
            elif sq.upper < margin and not short:
                set_(name, "holds", f"upper limit {sq.upper:+.3f} < {margin}")
            else:
                set_(name, "open", short or f"upper limit {sq.upper:+.3f} ≥ {margin}")
    pw = s["pairwise"]
    pp = holm.get("pairwise")
    if pp is not None and pp <= alpha and (pw.mean or 0) < 0 and pw.n >= MIN_GROUPS:
        set_("pairwise", "fails", f"the pairwise judge prefers A (always-valid Holm p {pp:.4f})")
    else:
        set_("pairwise", "holds", "the pairwise judge does not significantly prefer A")
    states = set(lk.conditions.values())
    lk.licensable = states == {"holds"}
    futility = getattr(getattr(cfg, "sequential", None), "futility", None) or DEFAULT_FUTILITY
    if lk.licensable or "fails" in states:
        lk.stop = "decision"
    elif (f.ci_low is not None and f.ci_high is not None and f.n >= MIN_GROUPS
          and -futility < f.ci_low and f.ci_high < futility):
        lk.stop = "futility"
    return lk


DEFAULT_FUTILITY = 0.05   # faithfulness B − A shown within ±this: no difference worth a run


def replay(units: Sequence[Sequence[str]], boundaries: Sequence[int],
           diffs: Mapping[str, Mapping[str, float]], groups: Mapping[str, str] | None, cfg, *,
           family: Sequence[str], cap: int | None = None,
           n_stars: Mapping[str, float] | None = None,
           known: Sequence[Look] = ()) -> list[Look]:
    """Every look of a sequential run, recomputed from its stored judgments: `boundaries`
    are the units taken at each look. The runner (after each look) and the report (at any
    time) call this one function, so both tell the same looks. `n_stars` (metric → units it
    will have at the end, `expected_units`) tunes each condition's bets; without it every
    condition is tuned to the units the run may take (`cap`). `known`: the first looks as
    this function gave them before (the runner's, look by look): a finished look's cases
    never change, so they are kept, not computed again."""
    looks: list[Look] = []
    prev = None
    n_star: float | Mapping[str, float] = n_stars if n_stars is not None else \
        float(max(1, cap or len(units)))
    for k, n_units in enumerate(boundaries, 1):
        if k <= len(known) and known[k - 1].units == n_units:
            prev = known[k - 1]
            looks.append(prev)
            continue
        lk = look(k, taken_cases(units, n_units), diffs, groups, cfg, family=family,
                  n_star=n_star, previous=prev)
        looks.append(lk)
        prev = lk
    return looks


def expected_units(units: Sequence[Sequence[str]], cap: int, cases: Mapping[str, Mapping]
                   ) -> dict[str, float]:
    """Per claim metric, the units (among the first `cap` the run may take) that can carry a
    difference for it, known from the fixture before the first look: every unit for
    faithfulness, the drop bound and the pairwise judge; units with an answerable case for
    refusals, with an unanswerable one for correct abstention; units with key points or a
    reference answer for coverage. Each condition's bets are tuned to these: a condition on
    100 unanswerable cases of 400 is tightest at 100, where its run will end, not at 200."""
    taken = list(units[:cap])
    return {m: float(max(1, sum(1 for u in taken if any(measures(m, cases.get(c) or {})
                                                         for c in u))))
            for m in ("faithfulness", "drop_bound", "pairwise", "coverage",
                      "abstention_answerable", "abstention_unanswerable")}


def measures(metric: str, case: Mapping) -> bool:
    """Whether a case can carry a difference for a claim metric, known from the fixture
    alone (as the judge plan asks for it: runstate.required_judgments): coverage on an
    answerable case with key points or a reference answer, refusals on an answerable one,
    correct abstention on an unanswerable one, the others on every case."""
    answerable = case.get("answerable", True) is not False
    if metric == "coverage":
        return answerable and (bool(case.get("key_points"))
                               or bool(str(case.get("reference_answer") or "").strip()))
    if metric == "abstention_answerable":
        return answerable
    if metric == "abstention_unanswerable":
        return not answerable
    return True


def judgment_map(judg: Sequence[Mapping]) -> dict:
    """(judge, subject) → case id → judgment row, first samples only, as the report reads."""
    jv: dict = {}
    for j in judg:
        if j.get("sample", 0) == 0:
            jv.setdefault((j["judge"], j["subject"]), {})[j["case_id"]] = j
    return jv


def replay_run(plan: SequentialPlan, finished: Sequence[str], judg: Sequence[Mapping],
               cases: Mapping[str, Mapping], groups: Mapping[str, str] | None, cfg,
               judges: Sequence[str], known: Sequence[Look] = ()) -> list[Look]:
    """A stored sequential run's finished looks, from its judgments: what the runner decides
    on after each look and what its report shows."""

    answerable = {cid: bool(cases.get(cid, {}).get("answerable", True)) for cid in finished}
    diffs = case_differences(finished, judgment_map(judg), answerable)
    looks = replay(plan.units, plan.boundaries, diffs, groups, cfg, family=holm_family(judges),
                   cap=plan.cap, n_stars=expected_units(plan.units, plan.cap, cases),
                   known=known)
    mark_undecidable(looks, plan, cases, judges, cfg)
    return looks


# a condition with eligible cases taken but no unit measured after this many looks stops the
# run undecided (e.g. every pair so far lacked a faithfulness score on one side)
UNDECIDABLE_LOOKS = 3

CONDITION_NAMES = {"faithfulness": "faithfulness", "drop_bound": "faithfulness (its worst-case "
                   "bound)", "coverage": "coverage", "abstention_answerable": "refusals on "
                   "answerable cases", "abstention_unanswerable": "correct abstention on "
                   "unanswerable cases"}


def eligible_cases(cases: Mapping[str, Mapping], judges: Sequence[str]) -> dict[str, set[str]]:
    """Per condition, the fixture's cases that can measure it at all: coverage needs an
    answerable case with key points or a reference answer and the coverage judge, the
    abstention conditions their kind of case and the abstention judge, faithfulness its
    judge. A condition with none can never hold, so neither can the claim."""
    judge_of = {"faithfulness": "faithfulness", "drop_bound": "faithfulness",
                "coverage": "coverage", "abstention_answerable": "abstention",
                "abstention_unanswerable": "abstention"}
    return {m: {cid for cid, c in cases.items() if measures(m, c)}
            if judge_of[m] in set(judges) else set() for m in CONDITION_NAMES}


def undecidable_reason(lk: Look, number: int, taken: Sequence[str],
                       eligible: Mapping[str, set[str]], cfg) -> str | None:
    """Why the claim can never be decided from here, or None: a condition the fixture cannot
    measure at all (no case of its kind, its judge off, or fewer cases of its kind in the
    whole fixture than its non-inferiority margin needs), or one measured on no unit after
    UNDECIDABLE_LOOKS looks that took cases of its kind. The run stops then (it can license
    nothing however many cases it takes), rather than spending the fixture."""

    margins = getattr(cfg, "margins", None)
    floors = {"coverage": getattr(margins, "coverage", None),
              "abstention_answerable": getattr(margins, "abstention_answerable", None),
              "abstention_unanswerable": getattr(margins, "abstention_unanswerable", None)}
    for name, label in CONDITION_NAMES.items():
        pool = eligible.get(name) or set()
        if not pool:
            what = {"coverage": "no answerable case with key points or a reference answer "
                                "(or the coverage judge is off)",
                    "abstention_answerable": "no answerable case (or the abstention judge "
                                             "is off)",
                    "abstention_unanswerable": "no unanswerable case (or the abstention judge "
                                               "is off)"}.get(name, "its judge is off")
            return f"{label} cannot be measured: the fixture has {what}"
        margin = floors.get(name)
        floor = min_n_binary_noninferiority(margin, cfg.alpha) if margin else None
        if floor and len(pool) < floor:
            return (f"{label}: the fixture has {len(pool)} such cases; non-inferiority at "
                    f"margin {margin} needs at least {floor}")
        seq = lk.sequences.get(name)
        took = sum(1 for cid in taken if cid in pool)
        if number >= UNDECIDABLE_LOOKS and took and seq is not None and seq.n == 0:
            return (f"{label} was measured on 0 of the {took} such cases taken over {number} "
                    "looks (no pair had a score on both sides)")
    return None


def mark_undecidable(looks: list[Look], plan: SequentialPlan, cases: Mapping[str, Mapping],
                     judges: Sequence[str], cfg) -> None:
    """Stop, at the first look where it applies, a run whose claim cannot be decided
    (`undecidable_reason`): its `stop` is "undecidable" and `why["undecidable"]` says why.
    A look that decided (or stopped for futility) keeps its own stop."""
    eligible = eligible_cases(cases, judges)
    for k, lk in enumerate(looks, 1):
        if lk.stop is not None:
            return
        why = undecidable_reason(lk, k, taken_cases(plan.units, plan.boundaries[k - 1]),
                                 eligible, cfg)
        if why is not None:
            lk.stop, lk.why["undecidable"] = "undecidable", why
            return
