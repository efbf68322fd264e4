"""The synthetic world of abtest's validity simulation (scripts/validity_sim.py and its
sequential and small-N families): depots whose opening hours are or are not in the
retrieved context, answers drawn per variant at each scenario's rates, judges that know the
truth (honest unless a scenario makes them noisy, position- or length-biased), and the
score-level experiment that puts the world's verdicts through abtest's metric and claim
code. The families import it; it imports none of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")

ALPHA = 0.05
REFUSAL = "I don't know based on the provided documents."
HEDGE = "I do not know for certain. "
FILLER = (" I hope this helps, and please let me know if you have any other questions about "
          "this topic or anything else you would like to know.")
HOURS = ["6 am", "7 am", "8 am", "9 am", "10 am", "11 am"]
WRONG = ["1 pm", "2 pm", "3 pm", "4 pm", "5 pm", "6 pm"]
STREETS = ["Elm Street", "Harbour Road", "Mill Lane", "Station Square", "Kings Way", "Oak Avenue"]
DECLINE = "The documents do not say when {place} opens."
SIDE = "They do say that "
RANK = {"good": 2, "refuse": 1, "soft": 1, "halluc": 0}
# the kinds that decline the question asked: a plain refusal, and a soft one (a side fact added)
ABSTAINS = ("refuse", "soft")


# --------------------------------------------------------------------------- scenarios

@dataclass(frozen=True)
class Behaviour:
    """Answer rates of one variant: answerable (good, refuse; the rest hallucinate) and
    unanswerable (refuse; the rest hallucinate)."""
    good: float
    refuse: float
    refuse_unanswerable: float


@dataclass(frozen=True)
class Scenario:
    name: str
    truth: str
    sound: str
    a: Behaviour
    b: Behaviour
    n: int = 200
    unanswerable: float = 0.25
    coupling: float = 0.5          # share of cases where A and B draw the same latent value
    b_mode: str = "plain"          # plain | selective_refusal | hedge | pad
    claim_flip: float = 0.0        # the claim verifier flips this share of verdicts
    pair_first: float = 0.0        # each pairwise call says "1" with this probability
    pair_longer: float = 0.0       # each pairwise call picks the longer answer
    score_level: bool = False      # also run at score level (needs honest judges)
    e2e: bool = True               # also run end to end
    repeats: tuple[int, ...] = ()  # DUPLICATES: distinct case i is written repeats[i % len] times
    group_size: int = 0            # CLUSTERED: cases in groups of this size (case i in group i % G)
    group_spread: float = 0.0      # CLUSTERED: a group moves B's good rate by ±spread, A's by ∓
    references: int = 0            # FEW_REFERENCES: only this many answerable cases have key points
    b_at_cap: float = 0.0          # CLAIM_CAP: this share of B's answers fills max_claims
    pair_prefer_a: float = 0.0     # PAIRWISE_RULE: the pairwise judge picks A in this share of cases
    soft_refusal: float = 0.0      # SOFT_REFUSAL: B softly declines this share of the answerable
                                   # cases it would get wrong (a true, cited side fact added)
    sizes: tuple[int, ...] = ()    # score-level N pinned for this scenario (distinct cases)


EQUAL = Behaviour(good=0.70, refuse=0.05, refuse_unanswerable=0.80)
A_EFFECT = Behaviour(good=0.60, refuse=0.0, refuse_unanswerable=0.70)
B_EFFECT = Behaviour(good=0.85, refuse=0.0, refuse_unanswerable=0.90)

SCENARIOS = [
    Scenario("null", "A and B equally good", "licensed in ≤ α; significant (any family member) "
             "in ≤ α", EQUAL, EQUAL, score_level=True),
    Scenario("true_effect", "B grounded 85 % vs A 60 %", "licensed in ≥ 80 %; rates match the "
             "truth; CIs cover the true effect", A_EFFECT, B_EFFECT, score_level=True),
    Scenario("selective_refusal", "B refuses the answerable cases it would get wrong",
             "never licensed", EQUAL, EQUAL, b_mode="selective_refusal", score_level=True),
    Scenario("hedged_hallucination", "B's false answers begin \"I do not know for certain.\"",
             "B's faithfulness = truth; every one an incident; gate fails", A_EFFECT, A_EFFECT,
             b_mode="hedge"),
    Scenario("noisy_verifier", "B truly better, but the claim verifier flips 30 % of verdicts",
             "faithfulness judge fails validation: never licensed", A_EFFECT, B_EFFECT,
             claim_flip=0.30),
    Scenario("length_biased_judge", "B = A padded with filler; the pairwise judge picks the "
             "longer answer 30 % of the time", "never a B pairwise win without the length "
             "caveat", EQUAL, EQUAL, b_mode="pad", pair_longer=0.30, coupling=1.0),
    Scenario("position_biased_judge", "B better; the pairwise judge says \"first\" 30 % of the "
             "time", "position consistency and first-position rate = truth", A_EFFECT, B_EFFECT,
             pair_first=0.30),
    # score level only (docs/CLAIM_STATISTICS.md §7, §10): groups, and the rules on thin evidence
    Scenario("duplicates", "A and B equally good; each of 160 distinct cases written 3–6 times "
             "under new ids (720 cases), grouped as repeats", "licensed in ≤ α; significant "
             "(any family member) in ≤ α", EQUAL, EQUAL, score_level=True, e2e=False,
             repeats=(3, 4, 5, 6), sizes=(160,)),
    # 160 distinct: 40 unanswerable, enough independent cases for the 0.10 margin's floor (33)
    Scenario("duplicates_effect", "the true effect, each of 160 distinct cases written 3–6 "
             "times (720 cases), grouped as repeats", "reported: the grouped inference still "
             "licenses a true effect (a control for duplicates)", A_EFFECT, B_EFFECT,
             score_level=True, e2e=False, repeats=(3, 4, 5, 6), sizes=(160,)),
    Scenario("clustered", "A and B equal on average; 25 groups of 8 cases, each group moving "
             "B's good rate by ±0.2 and A's by ∓0.2", "licensed in ≤ α; significant (any family "
             "member) in ≤ α", EQUAL, EQUAL, score_level=True, e2e=False, group_size=8,
             group_spread=0.2, sizes=(200,)),
    Scenario("few_references", "B truly better; key points on only 8 answerable cases",
             "never licensed (coverage rests on 8 cases)", A_EFFECT, B_EFFECT, score_level=True,
             e2e=False, references=8, sizes=(200,)),
    Scenario("claim_cap", "B truly better; 10 % of B's answers fill max_claims",
             "never licensed (unchecked claims)", A_EFFECT, B_EFFECT, score_level=True, e2e=False,
             b_at_cap=0.10, sizes=(200,)),
    Scenario("pairwise_rule", "B more faithful; the pairwise judge prefers A in 60 % of cases",
             "never licensed (the pairwise judge prefers A)", A_EFFECT, B_EFFECT,
             score_level=True, e2e=False, pair_prefer_a=0.60, sizes=(200,)),
    # issue 43: an answer that declines the question is an abstention, side facts or not
    Scenario("soft_refusal", "B = A (equally good), except that B softly declines 80 % of the "
             "answerable cases it would get wrong (\"The documents do not say …\", then a true, "
             "cited side fact)", "never licensed (refusals on answerable cases rose)", EQUAL,
             EQUAL, coupling=1.0, soft_refusal=0.80, score_level=True, sizes=(200,)),
]
NULL_TYPE = ("null", "duplicates", "clustered")
GROUPED = ("duplicates", "duplicates_effect", "clustered")
# each trap's reason in the withheld claim: it fired, and was caught for the right reason
TRAP_REASON = {"few_references": "coverage: 8 cases with references; non-inferiority",
               "soft_refusal": "refusals on answerable cases rose",
               "claim_cap": "gave the claim extractor the most claims it keeps",
               "pairwise_rule": "the pairwise judge significantly prefers A"}


# --------------------------------------------------------------------------- the world

def unit(*parts) -> float:
    """A deterministic uniform in [0, 1) from any values (the fake judges' coin)."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2 ** 64


@dataclass
class Case:
    id: str
    place: str
    answerable: bool
    hour: str
    wrong: str
    street: str
    chunks: list[tuple[str, str]]

    @property
    def question(self) -> str:
        return f"When does {self.place} open?"

    def sentences(self) -> dict[str, str]:
        return {text: cid for cid, text in self.chunks}


@dataclass
class Answer:
    case: Case
    variant: str
    kind: str                      # good | refuse | soft (a soft refusal) | halluc
    text: str
    claims: list[tuple[str, bool]] = field(default_factory=list)   # (claim, supported)

    @property
    def faithfulness(self) -> float | None:
        return sum(s for _, s in self.claims) / len(self.claims) if self.claims else None

    @property
    def covered(self) -> bool:
        return self.case.answerable and self.case.hour in self.text


class World:
    def __init__(self, sc: Scenario, n: int, seed: int):
        import numpy as np

        self.sc, self.n, self.seed = sc, n, seed
        rng = np.random.default_rng(seed)
        n_un = int(round(sc.unanswerable * n))
        self.cases: list[Case] = []
        self.answers: dict[tuple[str, str], Answer] = {}
        # case id → group key, as abtest.core.groups would give it (repeats: identical question and
        # context; CLUSTERED: a shared source document); empty when every case is independent
        self.groups: dict[str, str] = {}
        n_groups = n // sc.group_size if sc.group_size else 0
        # the group effects draw from their own stream, so the other scenarios' worlds stay
        # exactly what they were
        shift = (np.random.default_rng([seed, 43]).choice([-1.0, 1.0], size=n_groups)
                 * sc.group_spread if n_groups else None)
        for i in range(n):
            cid = f"q{i:04d}"
            place = f"Depot {i:04d}"
            ans = i >= n_un
            hour, wrong = HOURS[rng.integers(len(HOURS))], WRONG[rng.integers(len(WRONG))]
            street = STREETS[rng.integers(len(STREETS))]
            chunks = [(f"{cid}-loc", f"{place} is located on {street}."),
                      (f"{cid}-near", f"Depot {(i + 1) % n:04d} closes at {WRONG[i % 6]}.")]
            if ans:
                chunks.insert(0, (f"{cid}-hours", f"{place} opens at {hour}."))
            case = Case(cid, place, ans, hour, wrong, street, chunks)
            self.cases.append(case)
            shared = rng.random()
            lat = {v: shared if rng.random() < sc.coupling else rng.random() for v in "AB"}
            second = rng.random() < 0.5
            if n_groups:
                self.groups[cid] = f"document:g{i % n_groups:02d}"
            for v in "AB":
                beh = sc.a if v == "A" else sc.b
                if n_groups:
                    beh = _shifted(beh, float(shift[i % n_groups]) * (1 if v == "B" else -1))
                kind = self._kind(beh, case.answerable, lat[v])
                if v == "B" and sc.b_mode == "selective_refusal" and case.answerable \
                        and kind == "halluc":
                    kind = "refuse"
                # a coin of its own (no draw from rng), so the other scenarios' worlds stay
                if v == "B" and sc.soft_refusal and case.answerable and kind == "halluc" \
                        and unit("soft", seed, cid) < sc.soft_refusal:
                    kind = "soft"
                self.answers[(cid, v)] = self._answer(case, v, kind, second)
        if sc.repeats:
            self._repeat(sc.repeats)
        self.by_question = {c.question: c for c in self.cases}
        self.by_text: dict[str, Answer] = {}
        for a in self.answers.values():
            self.by_text.setdefault(a.text, a)

    def _repeat(self, repeats: tuple[int, ...]) -> None:
        """DUPLICATES: case i again under new ids, repeats[i % len] times in all, with the same
        question, context and (a deterministic pipeline) the same answers and verdicts."""
        out: list[Case] = []
        for i, c in enumerate(list(self.cases)):
            for j in range(repeats[i % len(repeats)]):
                rid = c.id if j == 0 else f"{c.id}r{j}"
                out.append(Case(rid, c.place, c.answerable, c.hour, c.wrong, c.street, c.chunks))
                self.groups[rid] = f"group:{c.id}"
                for v in "AB":
                    a = self.answers[(c.id, v)]
                    self.answers[(rid, v)] = Answer(out[-1], v, a.kind, a.text, list(a.claims))
        self.cases = out

    @staticmethod
    def _kind(beh: Behaviour, answerable: bool, u: float) -> str:
        if answerable:
            return "good" if u < beh.good else "refuse" if u < beh.good + beh.refuse else "halluc"
        return "refuse" if u < beh.refuse_unanswerable else "halluc"

    def _answer(self, case: Case, v: str, kind: str, second: bool) -> Answer:
        loc = f"{case.place} is located on {case.street}."
        if kind == "refuse":
            return Answer(case, v, kind, REFUSAL, [])
        if kind == "soft":   # declines the question, then a true, cited side fact
            text = f"{DECLINE.format(place=case.place)} {SIDE}{loc[:-1]} [{case.id}-loc]."
            return Answer(case, v, kind, text, [(loc, True)])
        if kind == "good":
            hours = f"{case.place} opens at {case.hour}."
            text = f"{hours[:-1]} [{case.id}-hours]. {loc[:-1]} [{case.id}-loc]."
            claims = [(hours, True), (loc, True)]
        else:
            false = f"{case.place} opens at {case.wrong}."
            other = loc if second else f"{case.place} has free parking for visitors."
            text = false + " " + (f"{loc[:-1]} [{case.id}-loc]." if second else other)
            claims = [(false, False), (other, second)]
            if v == "B" and self.sc.b_mode == "hedge":
                text = HEDGE + text
        if v == "B" and self.sc.b_mode == "pad":
            text += FILLER
        return Answer(case, v, kind, text, claims)

    # ---- the judges, honest unless the scenario says otherwise ---------------------
    def claims_of(self, text: str) -> list[str]:
        """The honest extractor: every sentence, minus citations, except what the prompt
        says to skip (refusals and hedges — "do not know", "the documents do not say" —,
        greetings and filler); a side fact ("They do say that X.") is the claim "X."."""
        text = re.sub(r"\s*\[[^\]]+\]", "", text).strip()
        out = []
        for s in re.split(r"(?<=[.!?])\s+", text):
            s = s.strip()
            if not s or "know" in s or "do not say" in s or s.startswith("I hope") \
                    or "let me know" in s:
                continue
            out.append(s.removeprefix(SIDE))
        return out

    def verify(self, case: Case, claim: str) -> tuple[bool, str | None]:
        supported = claim in case.sentences()
        if self.sc.claim_flip and unit("flip", self.seed, case.id, claim) < self.sc.claim_flip:
            supported = not supported
        if not supported:
            return False, None
        return True, case.sentences().get(claim, case.chunks[0][0])

    def pairwise(self, case: Case, first: str, second: str) -> str:
        """'1', '2' or 'tie' for the answers shown first and second. The biased coins depend
        on what is shown, as a real judge's would: the same prompt, the same verdict."""
        sc = self.sc
        if sc.pair_first and unit("first", self.seed, case.id, first, second) < sc.pair_first:
            return "1"
        if sc.pair_longer and len(first) != len(second) and \
                unit("longer", self.seed, case.id, first, second) < sc.pair_longer:
            return "1" if len(first) > len(second) else "2"
        r1, r2 = RANK[self.by_text[first].kind], RANK[self.by_text[second].kind]
        return "1" if r1 > r2 else "2" if r2 > r1 else "tie"

    def abstained(self, text: str) -> bool:
        """Does the answer decline the question asked (claims_extract_v3 / abstention_v3)? A
        soft refusal does, whatever side facts it adds; a hedged answer does not."""
        a = self.by_text.get(text)
        return a is not None and a.kind in ABSTAINS

    # ---- the fake provider ------------------------------------------------------------
    def respond(self, body: dict) -> str:
        msgs = body.get("messages") or []
        prompt = msgs[-1]["content"] if msgs else ""
        fmt = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
        if fmt is None:
            system = next((m["content"] for m in msgs if m["role"] == "system"), "")
            v = "A" if "[sim-variant A]" in system else "B"
            q = re.search(r"<question>(.*?)</question>", prompt, re.S).group(1).strip()
            return self.answers[(self.by_question[q].id, v)].text
        return json.dumps(getattr(self, f"_j_{fmt}")(prompt))

    def _case_in(self, prompt: str) -> Case:
        m = re.search(r"\[(q\d{4})-", prompt) or re.search(r"Depot (\d{4}) (?:opens|is|has)", prompt)
        cid = m.group(1) if m.group(1).startswith("q") else f"q{m.group(1)}"
        return self.cases[int(cid[1:])]

    def _j_claims(self, prompt):
        # claims_extract_v3 asks whether the answer answers the question (v2: "abstained")
        ans = _tag(prompt, "answer")
        abst = self.abstained(ans)
        return {"claims": self.claims_of(ans), "rationale": "sim", "answers_question": not abst,
                "abstained": abst}

    def _j_claimverdicts(self, prompt):
        case = self._case_in(_tag(prompt, "context"))
        out = {}
        for num, claim in re.findall(r"^(\d+)\. (.*)$", _tag(prompt, "claims"), re.M):
            ok, chunk = self.verify(case, claim)
            out[num] = {"verdict": "supported" if ok else "not_in_context", "chunk_id": chunk}
        return {"verdicts": out}

    def _j_coverage(self, prompt):
        ans = _tag(prompt, "answer")
        pts = re.findall(r"^(\d+)\. (.*)$", _tag(prompt, "key_points"), re.M)
        return {"points": {n: p in ans for n, p in pts}}

    def _j_abstained(self, prompt):
        return {"abstained": self.abstained(_tag(prompt, "answer"))}

    def _j_abstention(self, prompt):   # abstention_v3
        return {"rationale": "sim", "answers_question": not self.abstained(_tag(prompt, "answer"))}

    def _j_pairwiseverdict(self, prompt):
        case = self.by_question[_tag(prompt, "question")]
        r1, r2 = _tag(prompt, "response_1"), _tag(prompt, "response_2")
        return {"winner": self.pairwise(case, r1, r2), "margin": 0.5, "rationale": "sim"}

    # ---- humans label from the truth -------------------------------------------------
    def human_label(self, item: dict) -> str:
        kind = item["kind"]
        case = self.by_question[item["question"]]
        if kind == "pairwise":
            r1 = RANK[self.by_text[item["answer_1"]].kind]
            r2 = RANK[self.by_text[item["answer_2"]].kind]
            return "1" if r1 > r2 else "2" if r2 > r1 else "tie"
        if kind == "claim":
            return "supported" if item["claim"] in case.sentences() else "unsupported"
        if kind == "coverage":
            return "covered" if item["key_point"] in item["answer"] else "not_covered"
        if kind == "abstention":
            return "abstained" if self.by_text[item["answer"]].kind in ABSTAINS else "answered"
        raise ValueError(kind)

    # ---- the truth, for the table -----------------------------------------------------
    def true_rates(self) -> dict:
        """Realised truth of this experiment: faithfulness over the pairs both variants
        scored, coverage over answerable cases, refusal rate on answerable cases (a soft
        refusal is one: it declines the question)."""
        pairs = [(self.answers[(c.id, "A")], self.answers[(c.id, "B")]) for c in self.cases]
        both = [(a.faithfulness, b.faithfulness) for a, b in pairs
                if a.faithfulness is not None and b.faithfulness is not None]
        ans = [(a, b) for a, b in pairs if a.case.answerable]
        return {"faith_a": _mean(x for x, _ in both), "faith_b": _mean(y for _, y in both),
                "cov_a": _mean(a.covered for a, _ in ans), "cov_b": _mean(b.covered for _, b in ans),
                "ref_a": _mean(a.kind in ABSTAINS for a, _ in ans),
                "ref_b": _mean(b.kind in ABSTAINS for _, b in ans),
                "incidents_b": sum(1 for _, b in pairs if b.faithfulness is not None
                                   and b.faithfulness < 0.85)}


def _shifted(beh: Behaviour, d: float) -> Behaviour:
    """A group's behaviour: good moves by d, answerable refusals by d/5, unanswerable
    refusals by d/2 (hallucination takes the rest), so every paired metric is correlated
    within the group."""
    return Behaviour(good=beh.good + d, refuse=max(0.0, beh.refuse + d / 5),
                     refuse_unanswerable=min(1.0, max(0.0, beh.refuse_unanswerable + d / 2)))


def _tag(text: str, name: str) -> str:
    m = re.search(rf"<{name}>\n?(.*?)\n?</{name}>", text, re.S)
    return m.group(1).strip() if m else ""


def _mean(xs):
    xs = [float(x) for x in xs]
    return sum(xs) / len(xs) if xs else None


def population_truth(sc: Scenario, n: int = 100_000, seed: int = 987654) -> dict:
    """The population values the experiments estimate (one very large world; repeats change
    no population value, so it is built without them)."""
    import dataclasses

    w = World(dataclasses.replace(sc, repeats=()), n, seed)
    t = w.true_rates()
    t["faith_effect"] = t["faith_b"] - t["faith_a"]
    if sc.pair_first or sc.pair_longer:
        t.update(_judge_truth(w))
    return t


def _judge_truth(w: World) -> dict:
    """Position consistency and first-position win rate the judge model implies."""
    cons = first = decided = n = 0
    for c in w.cases:
        a, b = w.answers[(c.id, "A")].text, w.answers[(c.id, "B")].text
        v1 = {"1": "A", "2": "B", "tie": "tie"}[w.pairwise(c, a, b)]
        v2 = {"1": "B", "2": "A", "tie": "tie"}[w.pairwise(c, b, a)]
        n += 1
        cons += v1 == v2
        first += (v1 == "A") + (v2 == "B")
        decided += (v1 != "tie") + (v2 != "tie")
    return {"position_consistency": cons / n, "first_position_win_rate": first / decided}


# --------------------------------------------------------------------------- score level

def score_experiment(sc: Scenario, n: int, seed: int, cfg) -> dict:
    """The world's honest verdicts straight into abtest's metric and claim code. Where the
    scenario has groups they are passed to compute_metrics, and `old` holds what the
    inference before groups said of the same verdicts (groups ignored); for FEW_REFERENCES,
    what the claim said before the minimum-evidence floor (the paired t's limit alone); for
    SOFT_REFUSAL, what it said under the rule before issue 43, when an extracted claim
    overruled "abstained" (the same verdicts with each soft refusal counted as answered)."""
    from abtest.reporting.metrics import compute_metrics

    w = World(sc, n, seed)
    jv, lengths, ids, answerable = judgments(w, sc, seed, cfg)

    def judged(metrics: dict) -> tuple[dict, dict]:
        report = validated_report(metrics, cfg)
        return report, licensed_claim_of(report, cfg)

    metrics, _, _ = compute_metrics(ids, jv, answerable, lengths, cfg, cfg.judges,
                                    groups=w.groups or None)
    report, claim = judged(metrics)
    out = {"metrics": metrics, "claim": claim, "truth": w.true_rates(), "report": report}
    if w.groups:
        old, _, _ = compute_metrics(ids, jv, answerable, lengths, cfg, cfg.judges)
        out["old"] = {"metrics": old, "claim": judged(old)[1]}
    elif sc.references:
        # the rule before the floor: the paired t's lower (1 − 2α) limit (the sign test on
        # zero variance), read on the same coverage pairs
        from abtest import stats

        old = json.loads(json.dumps(metrics))
        ni = (old.get("coverage") or {}).get("noninferiority") or {}
        ca, cb = jv.get(("coverage", "A")) or {}, jv.get(("coverage", "B")) or {}
        both = [c for c in ids if c in ca and c in cb]
        t = stats.noninferiority_paired_t([ca[c]["score"] for c in both],
                                          [cb[c]["score"] for c in both], ni["margin"], ALPHA)
        ni.pop("min_n", None)
        ni["holds"] = t.noninferior
        out["old"] = {"metrics": old, "claim": judged(old)[1]}
    elif sc.soft_refusal:
        old_jv = {k: dict(d) for k, d in jv.items()}
        for (cid, v), ans in w.answers.items():
            if ans.kind == "soft":    # it made a claim, so the old rule said "answered"
                old_jv[("abstention", v)][cid] = {"verdict": "answered"}
        old, _, _ = compute_metrics(ids, old_jv, answerable, lengths, cfg, cfg.judges)
        out["old"] = {"metrics": old, "claim": judged(old)[1]}
    return out


def validated_report(metrics: dict, cfg) -> dict:
    """A complete prompt comparison's report around `metrics`, its judges validated (the
    score level takes the judges as validated: the world's verdicts are honest)."""
    from abtest.reporting.claim import CLAIM_JUDGES

    ok = {"n_labels": 40, "kappa": 1.0, "ci_low": 1.0, "ci_high": 1.0, "validated": True}
    return {"status": "complete", "unfinished_cases": [], "comparison_kind": "prompt",
            "pipeline_reasons": [], "self_judge": False, "judges": cfg.judges,
            "models": {"generator": {"resolved": ["g"]}, "judge": {"resolved": ["j"]}},
            "golden": None, "metrics": metrics,
            "judge_validation": {**{j: ok for j in CLAIM_JUDGES}, "validated": True}}


def licensed_claim_of(report: dict, cfg) -> dict:
    from abtest.reporting.claim import licensed_claim

    return licensed_claim(report, cfg)


def judgments(w: "World", sc: Scenario, seed: int, cfg) -> tuple[dict, dict, list, dict]:
    """(judgment rows as the store holds them, answer lengths, case ids, answerable) of the
    world's honest judges."""
    jv: dict = {("pairwise", "AB"): {}, ("pairwise", "BA"): {}}
    lengths = {}
    referenced = {c.id for c in [c for c in w.cases if c.answerable][:sc.references]}
    for c in w.cases:
        a, b = w.answers[(c.id, "A")], w.answers[(c.id, "B")]
        for v, ans in (("A", a), ("B", b)):
            f = ans.faithfulness
            jv.setdefault(("faithfulness", v), {})[c.id] = {
                "verdict": "scored" if f is not None else "no_claims", "score": f}
            if v == "B" and f is not None and unit("cap", seed, c.id) < sc.b_at_cap:
                jv[("faithfulness", v)][c.id]["result_json"] = json.dumps(
                    {"n_claims": cfg.max_claims})
            jv.setdefault(("abstention", v), {})[c.id] = {
                "verdict": "abstained" if ans.kind in ABSTAINS else "answered"}
            if c.answerable and (not sc.references or c.id in referenced):
                jv.setdefault(("coverage", v), {})[c.id] = {"verdict": "scored",
                                                           "score": float(ans.covered)}
            lengths[(c.id, v)] = len(ans.text)
        v1 = {"1": "A", "2": "B", "tie": "tie"}[w.pairwise(c, a.text, b.text)]
        v2 = {"1": "B", "2": "A", "tie": "tie"}[w.pairwise(c, b.text, a.text)]
        if sc.pair_prefer_a and unit("prefer-a", seed, c.id) < sc.pair_prefer_a:
            v1 = v2 = "A"
        jv[("pairwise", "AB")][c.id] = {"verdict": v1}
        jv[("pairwise", "BA")][c.id] = {"verdict": v2}
    ids = [c.id for c in w.cases]
    answerable = {c.id: c.answerable for c in w.cases}
    return jv, lengths, ids, answerable


def fixture_view(w: "World", sc: Scenario) -> dict[str, dict]:
    """The world's cases as a fixture shows them before any run (id → answerable, key
    points): what a sequential run knows when it tunes each condition's bets."""
    referenced = {c.id for c in [c for c in w.cases if c.answerable][:sc.references]}
    return {c.id: {"answerable": c.answerable,
                   "key_points": ["k"] if c.answerable and (not sc.references
                                                            or c.id in referenced) else []}
            for c in w.cases}


def _median(xs: list) -> float:
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2
