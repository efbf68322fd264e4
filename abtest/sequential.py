"""Anytime-valid inference for sequential runs: intervals and p-values that stay valid
whenever they are read, so a run may stop as soon as the answer is known.

A fixed-N p-value checked after every look and stopped when small is not a p-value any
more (docs/STATISTICS.md §11). Here each claim metric is a stream of paired differences,
one per *unit* (a group of cases, taken whole, in a seeded random order; a case of its own
is its own group), and after n units it gets

* a two-sided **confidence sequence** from Robbins' normal mixture (Howard, Ramdas,
  McAuliffe & Sekhon, Ann. Stat. 2021, §3.3; the mSPRT of Johari, Pekelis & Walsh, KDD
  2017): d̄ ± σ̂/n · sqrt((n + ρ) · log((n + ρ)/(ρ α²))), and its always-valid p-value
  p_n = min over looks of sqrt((n + ρ)/ρ) · exp(−S²/(2(n + ρ))), S = n·d̄/σ̂;
* one-sided bounds (for non-inferiority: a lower or an upper limit alone) from the
  one-sided (half-normal) mixture: the b with 2·sqrt(ρ/(n + ρ)) · exp(b²/(2(n + ρ))) ·
  Φ(b/sqrt(n + ρ)) = 1/α, so d̄ − σ̂·b/n is a lower limit valid at every n at once.

σ̂ is the units' standard deviation, estimated as the data come (the asymptotic confidence
sequences of Waudby-Smith, Arnold, Wu, Howard & Ramdas, Ann. Stat. 2024), kept from zero by
PRIOR_UNITS pseudo-units of variance PRIOR_VAR: a difference of 0–1 scores can look
constant in a few units that happen to agree. ρ (the mixture's precision, in units) makes
the sequence tightest near `n_star` units (Howard et al. 2021, eq. 15): abtest takes half
the fixture's units, where a run with a real effect is expected to stop.

The claim keeps its fixed-N rules on top (the minimum-evidence floors, at least MIN_GROUPS
groups for a grouped metric, the drop bound, Holm over the same family, now over
always-valid p-values, which are valid p-values at the stopping time). The measured
error rates are in docs/STATISTICS.md §7 (`scripts/validity_sim.py --sequential`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

PRIOR_UNITS = 2.0      # pseudo-units of ...
PRIOR_VAR = 0.25       # ... this variance keep σ̂ off zero while few units are in
STATES = ("holds", "fails", "open")


def mixture_rho(n_star: float, alpha: float) -> float:
    """The normal mixture's precision (in units) that makes the boundary tightest near
    `n_star` units (Howard et al. 2021, eq. 15)."""
    la = math.log(1 / alpha)
    return max(1.0, n_star / (2 * la + math.log(1 + 2 * la)))


def two_sided_radius(n: int, sd: float, alpha: float, rho: float) -> float:
    """Half-width of the two-sided normal-mixture confidence sequence after n units."""
    return sd / n * math.sqrt((n + rho) * math.log((n + rho) / (rho * alpha ** 2)))


def mixture_p(n: int, mean: float, sd: float, rho: float) -> float:
    """1/Λ_n for H0: the mean difference is 0 (Λ the two-sided mixture likelihood ratio)."""
    if sd <= 0:
        return 1.0 if mean == 0 else 0.0
    s = n * mean / sd
    log_lam = 0.5 * math.log(rho / (rho + n)) + s * s / (2 * (n + rho))
    return min(1.0, math.exp(-log_lam))


def one_sided_radius(n: int, sd: float, alpha: float, rho: float) -> float:
    """σ̂·b/n for the one-sided (half-normal) mixture boundary b at level α."""
    from scipy import optimize
    from scipy.stats import norm

    a = n + rho
    target = math.log(1 / alpha)

    def gap(b: float) -> float:
        return (math.log(2) + 0.5 * math.log(rho / a) + b * b / (2 * a)
                + float(norm.logcdf(b / math.sqrt(a))) - target)

    hi = math.sqrt(a * math.log(a / (rho * alpha ** 2)))   # the two-sided boundary: above b
    b = optimize.brentq(gap, 0.0, hi + 1e-9) if gap(hi + 1e-9) > 0 else hi
    return sd * b / n


def unit_sd(diffs: Sequence[float]) -> float:
    n = len(diffs)
    if n == 0:
        return math.sqrt(PRIOR_VAR)
    mean = sum(diffs) / n
    ss = sum((d - mean) ** 2 for d in diffs)
    return math.sqrt((ss + PRIOR_UNITS * PRIOR_VAR) / (n - 1 + PRIOR_UNITS))


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

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("metric", "n", "cases", "mean", "sd", "ci_low",
                                              "ci_high", "lower", "upper", "p_value")}


def sequence(metric: str, diffs: Sequence[float], *, alpha: float, rho: float,
             previous_p: float | None = None, cases: int = 0) -> Sequence_:
    """The metric's sequence over its units' differences so far (each in [−1, 1])."""
    n = len(diffs)
    out = Sequence_(metric, n, cases=cases)
    if n < 2:
        return out
    mean = sum(diffs) / n
    sd = unit_sd(diffs)
    r2 = two_sided_radius(n, sd, alpha, rho)
    r1 = one_sided_radius(n, sd, alpha, rho)
    p = mixture_p(n, mean, sd, rho)
    out.mean, out.sd = mean, sd
    out.ci_low, out.ci_high = max(-1.0, mean - r2), min(1.0, mean + r2)
    out.lower, out.upper = max(-1.0, mean - r1), min(1.0, mean + r1)
    out.p_value = p if previous_p is None else min(p, previous_p)
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
    from . import stats

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
    """Kish's effective number of independent cases, n²/Σn_g² (docs/STATISTICS.md §9)."""
    total = sum(sizes)
    return total * total / sum(s * s for s in sizes) if sizes else 0.0


def look(number: int, order: Sequence[str], diffs: Mapping[str, Mapping[str, float]],
         groups: Mapping[str, str] | None, cfg, *, family: Sequence[str], n_star: float,
         previous: Look | None = None) -> Look:
    """The claim's conditions after the cases in `order` (whole units, in the order taken),
    each decided by its anytime-valid sequence: holds, fails (shown to fail: it cannot
    hold) or open; the run stops for a decision when every one holds or one fails, and for
    futility when faithfulness B − A is shown to lie within ±`sequential.futility`."""
    from . import stats
    from .groups import MIN_GROUPS
    from .sizing import min_n_binary_noninferiority

    alpha = cfg.alpha
    rho = mixture_rho(n_star, alpha)
    unit_of = {cid: (groups or {}).get(cid, cid) for cid in order}
    lk = Look(number, len(set(unit_of.values())), len(order))
    for m in METRICS:
        d = diffs.get(m) or {}
        prev = previous.sequences.get(m) if previous else None
        lk.sequences[m] = sequence(m, unit_differences(d, order, groups), alpha=alpha, rho=rho,
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


# --------------------------------------------------------------------------- the order

def unit_order(case_ids: Sequence[str], groups: Mapping[str, str] | None, seed: int
               ) -> list[list[str]]:
    """The fixture's units (a group's cases together, in id order; a case of its own is its
    own unit) in the seeded random order a sequential run takes them: units sorted by
    sha256(seed, unit key), the same for the same fixture, grouping and seed on any machine
    and Python version."""
    import hashlib

    by: dict[str, list[str]] = {}
    for cid in sorted(case_ids):
        by.setdefault((groups or {}).get(cid, cid), []).append(cid)

    def rank(key: str) -> str:
        return hashlib.sha256(f"{seed}\x1f{key}".encode()).hexdigest()

    return [by[k] for k in sorted(by, key=lambda k: (rank(k), k))]


def order_digest(units: Sequence[Sequence[str]]) -> str:
    """sha256 of the order, stored with the run: a resume that would take another order
    (the fixture's grouping changed) is refused."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps([list(u) for u in units]).encode()).hexdigest()


def taken_cases(units: Sequence[Sequence[str]], n_units: int) -> list[str]:
    """The cases of the first `n_units` units, in the order taken."""
    return [cid for u in units[:n_units] for cid in u]


def replay(units: Sequence[Sequence[str]], boundaries: Sequence[int],
           diffs: Mapping[str, Mapping[str, float]], groups: Mapping[str, str] | None, cfg, *,
           family: Sequence[str], cap: int | None = None,
           known: Sequence[Look] = ()) -> list[Look]:
    """Every look of a sequential run, recomputed from its stored judgments: `boundaries`
    are the units taken at each look. The runner (after each look) and the report (at any
    time) call this one function, so both tell the same looks. `known`: the first looks as
    this function gave them before (the runner's, look by look): a finished look's cases
    never change, so they are kept, not computed again."""
    looks: list[Look] = []
    prev = None
    n_star = max(1.0, (cap or len(units)) / 2)   # tightest halfway through what it may take
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


# --------------------------------------------------------------------------- a run's plan

STOPS = {"decision": "stopped for a decision: every condition of the claim is decided",
         "futility": "stopped for futility: faithfulness B − A is shown to lie within "
                     "±{futility}",
         "undecidable": "stopped undecided: a condition of the claim cannot be measured on "
                        "this fixture",
         "exhausted": "ran out of cases: the fixture is used up",
         "max_cases": "reached max_cases"}


@dataclass
class RunPlan:
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
             ) -> RunPlan:
    """The plan a stored record describes, over the fixture's cases now."""
    units = unit_order(case_ids, groups, int(record.get("seed", 0)))
    return RunPlan(units, list(record.get("boundaries") or []), int(record.get("taking") or 0),
                   int(record.get("cap") or len(units)), record.get("stop"), dict(record))


def plan_for_run(run: Mapping, cases: Mapping[str, Mapping]) -> RunPlan | None:
    """A stored run's sequential plan over its fixture's cases (`cases`, id → case), or None
    for a run that is not sequential (or whose fixture cannot be read)."""
    import json

    from .groups import case_groups

    info = json.loads(run.get("info_json") or "{}")
    record = info.get("sequential")
    if not record or not cases:
        return None
    group_by = json.loads(run.get("config_json") or "{}").get("group_by")
    groups = case_groups(list(cases.values()), group_by)
    return run_plan(record, list(cases), groups)


def judgment_map(judg: Sequence[Mapping]) -> dict:
    """(judge, subject) → case id → judgment row, first samples only, as the report reads."""
    jv: dict = {}
    for j in judg:
        if j.get("sample", 0) == 0:
            jv.setdefault((j["judge"], j["subject"]), {})[j["case_id"]] = j
    return jv


def replay_run(plan: RunPlan, finished: Sequence[str], judg: Sequence[Mapping],
               cases: Mapping[str, Mapping], groups: Mapping[str, str] | None, cfg,
               judges: Sequence[str], known: Sequence[Look] = ()) -> list[Look]:
    """A stored sequential run's finished looks, from its judgments: what the runner decides
    on after each look and what its report shows."""
    from .sizing import holm_family

    answerable = {cid: bool(cases.get(cid, {}).get("answerable", True)) for cid in finished}
    diffs = case_differences(finished, judgment_map(judg), answerable)
    looks = replay(plan.units, plan.boundaries, diffs, groups, cfg, family=holm_family(judges),
                   cap=plan.cap, known=known)
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
    js = set(judges)
    ans = {cid for cid, c in cases.items() if c.get("answerable", True) is not False}
    out: dict[str, set[str]] = {m: set() for m in CONDITION_NAMES}
    if "faithfulness" in js:
        out["faithfulness"] = out["drop_bound"] = set(cases)
    if "coverage" in js:
        out["coverage"] = {cid for cid in ans if cases[cid].get("key_points")
                           or str(cases[cid].get("reference_answer") or "").strip()}
    if "abstention" in js:
        out["abstention_answerable"] = ans
        out["abstention_unanswerable"] = set(cases) - ans
    return out


def undecidable_reason(lk: Look, number: int, taken: Sequence[str],
                       eligible: Mapping[str, set[str]], cfg) -> str | None:
    """Why the claim can never be decided from here, or None: a condition the fixture cannot
    measure at all (no case of its kind, its judge off, or fewer cases of its kind in the
    whole fixture than its non-inferiority margin needs), or one measured on no unit after
    UNDECIDABLE_LOOKS looks that took cases of its kind. The run stops then (it can license
    nothing however many cases it takes), rather than spending the fixture."""
    from .sizing import min_n_binary_noninferiority

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


def mark_undecidable(looks: list[Look], plan: RunPlan, cases: Mapping[str, Mapping],
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
