#!/usr/bin/env python3
"""abtest's own error rates, measured in a synthetic world whose truth is known.

The world: depots whose opening hours are in the retrieved context (answerable) or not
(unanswerable). Per case and variant the generator gives a good answer (the right hour
and a second supported fact, cited), a refusal, or a hallucination (a wrong hour, and a
second sentence that is supported half the time), at rates set per variant; in the
SOFT_REFUSAL scenario B declines instead, softly ("The documents do not say when Depot 0007
opens. They do say that Depot 0007 is located on Elm Street [q0007-loc]."). Judges know
the truth and are honest unless a scenario makes them noisy (the claim verifier flips
verdicts), position-biased (the pairwise judge says "first") or length-biased (it picks
the longer answer). Humans label review items from the truth.

Two levels:

* score level: the world's verdicts go straight into abtest's metric and claim code
  (`abtest.reporting.metrics.compute_metrics`, `abtest.reporting.claim.licensed_claim`), with
  the judges taken as validated: thousands of experiments a minute, for the false-licence
  rate under no true difference and the power under a true one, N = 60 … 400; and, at
  score level only, cases repeated or correlated in groups (passed to compute_metrics as
  abtest.groups would give them, and also analysed ignoring them, as before groups) and the
  rules on thin evidence (few references, the claim cap, the pairwise rule);
* end to end: each experiment goes through the real path — `abtest capture` (jsonl
  import), `abtest run` against a loopback OpenAI-compatible fake (scripts/fake_llm_server.py)
  playing generator and judges, `abtest review export`, simulated humans,
  `abtest review import`, `abtest report`, `abtest gate` — for every trap scenario.

    python scripts/validity_sim.py                       # both levels, the docs' table
    python scripts/validity_sim.py --quick               # a minute: small counts (CI smoke)
    python scripts/validity_sim.py --level score --score-experiments 2000
    python scripts/validity_sim.py --group-size-check    # grouped tests' size, few groups
    python scripts/validity_sim.py --small-n             # 10–200 cases, ties, rare events

It prints one table and exits 1 when a scenario misses its sound result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import tempfile
import time
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
    # score level only (docs/STATISTICS.md §7, §10): groups, and the rules on thin evidence
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
        # case id → group key, as abtest.groups would give it (repeats: identical question and
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


# --------------------------------------------------------------------------- end to end

VARIANT = """\
name: sim-{v}
system: |
  [sim-variant {v}] Answer only from the context. Cite chunks as [chunk-id].
user: |
  <context>
  {{{{ context }}}}
  </context>
  <question>{{{{ question }}}}</question>
"""


def e2e_experiment(sc: Scenario, n: int, seed: int, server, workdir: Path) -> dict:
    """capture → run → review export → humans → review import → report → gate, through the
    CLI in this process, against the loopback fake provider."""
    import csv

    from click.testing import CliRunner

    from abtest.cli import cli

    w = World(sc, n, seed)
    server.responder = w.respond
    d = workdir / f"{sc.name}-{seed}"
    (d / "variants").mkdir(parents=True)
    (d / "abtest.yaml").write_text(
        f"generator: {{model: openai/sim-gen, api_base: '{server.base_url}', "
        "api_key_env: SIM_KEY, max_tokens: 200}\n"
        f"judge: {{model: openai/sim-judge, api_base: '{server.base_url}', api_key_env: SIM_KEY}}\n"
        "concurrency: 16\ntimeout_s: 30\nmax_retries: 2\nretry_backoff_s: 0.01\n"
        "store: results/abtest.duckdb\njudges: [pairwise, faithfulness, coverage, abstention]\n")
    for v in "AB":
        (d / "variants" / f"{v.lower()}.yaml").write_text(VARIANT.format(v=v))
    with open(d / "questions.jsonl", "w") as fh:
        for c in w.cases:
            q = {"id": c.id, "question": c.question, "answerable": c.answerable}
            if c.answerable:
                q["key_points"] = [c.hour]
            fh.write(json.dumps(q) + "\n")
    with open(d / "captured.jsonl", "w") as fh:
        for c in w.cases:
            fh.write(json.dumps({"id": c.id, "question": c.question,
                                 "context": [{"id": i, "text": t} for i, t in c.chunks]}) + "\n")
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(d)
    try:
        def cli_(*args):
            r = runner.invoke(cli, list(args), catch_exceptions=False)
            return r.exit_code, r.stdout, r.stderr

        code, out, err = cli_("capture", "questions.jsonl", "--retriever", "jsonl:captured.jsonl",
                              "--out", "fixtures/sim", "--corpus-version", f"sim-{seed}", "--k", "5")
        assert code == 0, err
        code, out, err = cli_("run", "--fixture", "fixtures/sim", "--a", "variants/a.yaml",
                              "--b", "variants/b.yaml")
        assert code == 0, err
        run_id = out.strip().splitlines()[-1]
        code, out, err = cli_("review", "export", run_id, "--out", "pack", "--n", "40")
        assert code == 0, err
        items = [json.loads(x) for x in (d / "pack" / "items.jsonl").read_text().splitlines()]
        with open(d / "labels.csv", "w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(["item_id", "label"])
            for it in items:
                wr.writerow([it["item_id"], w.human_label(it)])
        code, out, err = cli_("review", "import", run_id, "labels.csv", "--reviewer", "sim")
        assert code == 0, err
        code, out, err = cli_("report", run_id, "--format", "json", "--out", "report.json")
        assert code == 0, err
        gate_code, _, _ = cli_("gate", run_id)
    finally:
        os.chdir(cwd)
    rep = json.loads((d / "report.json").read_text())
    return {"metrics": rep["metrics"], "claim": rep["claim"], "truth": w.true_rates(),
            "report": rep, "gate": gate_code}


# --------------------------------------------------------------------------- checks

def significant_any(m: dict) -> bool:
    fam = [m.get("pairwise"), m.get("faithfulness"), m.get("coverage"),
           (m.get("abstention") or {}).get("answerable"),
           (m.get("abstention") or {}).get("unanswerable")]
    return any(x and (x.get("significant") or x.get("p_holm") is not None and x["p_holm"] <= ALPHA)
               for x in fam)


def trap_ok(sc: Scenario, r: dict, pop: dict) -> tuple[bool, str]:
    """Did this experiment get the scenario's sound result? (False, why) otherwise."""
    m, t = r["metrics"], r["truth"]
    if sc.name == "selective_refusal" and r["claim"]["licensed"]:
        return False, "licensed"
    if sc.name in TRAP_REASON:
        if r["claim"]["licensed"]:
            return False, "licensed"
        if not any(TRAP_REASON[sc.name] in x for x in r["claim"]["reasons"]):
            return False, f"withheld without the reason '{TRAP_REASON[sc.name]}'"
    if sc.name == "hedged_hallucination":
        f = m["faithfulness"]
        if abs(f["b"] - t["faith_b"]) > 1e-9:
            return False, f"B faithfulness {f['b']:.3f} vs true {t['faith_b']:.3f}"
        inc = sum(1 for i in r["report"]["incidents"] if i["variant"] == "B")
        if inc != t["incidents_b"]:
            return False, f"{inc} B incidents vs {t['incidents_b']} true"
        if r.get("gate") != 1:
            return False, f"gate exit {r.get('gate')}"
    if sc.name == "noisy_verifier":
        if r["claim"]["licensed"]:
            return False, "licensed"
        val = r["report"]["judge_validation"]
        if (val.get("faithfulness") or val).get("validated"):  # schema 1 pooled every label
            return False, "faithfulness judge validated"
    if sc.name == "length_biased_judge":
        pw = m["pairwise"]
        b_win = pw.get("direction") == "B" or (  # schema 1 had no direction
            pw.get("p_holm") is not None and pw["p_holm"] <= ALPHA and pw["b_wins"] > pw["a_wins"])
        if b_win and not (pw.get("length_bias") or {}).get("caveat"):
            return False, "a significant B pairwise win without the length caveat"
    if sc.name == "position_biased_judge":
        pw = m["pairwise"]
        n = pw["n"]
        for key, got in (("position_consistency", pw["position_consistency"]["estimate"]),
                         ("first_position_win_rate", pw["first_position_win_rate"])):
            se = math.sqrt(pop[key] * (1 - pop[key]) / n)
            if abs(got - pop[key]) > 4 * se:
                return False, f"{key} {got:.3f} vs truth {pop[key]:.3f}"
    return True, ""


@dataclass
class Row:
    scenario: str
    level: str
    n: int
    experiments: int = 0
    licensed: int = 0
    significant: int = 0
    trap_fail: int = 0
    ci_cover: int = 0
    ci_total: int = 0
    rep: dict = field(default_factory=lambda: {k: [] for k in ("fa", "fb", "ca", "cb", "ra", "rb",
                                                                "pc", "fp")})
    tru: dict = field(default_factory=lambda: {k: [] for k in ("fa", "fb", "ca", "cb", "ra", "rb")})
    seconds: float = 0.0
    why: list = field(default_factory=list)
    # the same experiments under the inference before groups / the evidence floor
    old_licensed: int = 0
    old_significant: int = 0
    old_ci_cover: int = 0
    old_ci_total: int = 0
    old_n: int = 0
    width_ratio: list = field(default_factory=list)   # iid CI width / grouped CI width
    deff: list = field(default_factory=list)
    old_rb: list = field(default_factory=list)        # B's answerable refusal rate reported
    old_ni: int = 0                                   # answerable-refusal NI held

    def add(self, sc: Scenario, r: dict, pop: dict) -> None:
        m, t = r["metrics"], r["truth"]
        self.experiments += 1
        if r.get("old"):
            om = r["old"]["metrics"]
            self.old_n += 1
            self.old_licensed += bool(r["old"]["claim"]["licensed"])
            self.old_significant += significant_any(om)
            of, f = om.get("faithfulness") or {}, m.get("faithfulness") or {}
            if of.get("ci_low") is not None:
                self.old_ci_total += 1
                self.old_ci_cover += of["ci_low"] <= pop["faith_effect"] <= of["ci_high"]
                if f.get("ci_low") is not None and f["ci_high"] > f["ci_low"]:
                    self.width_ratio.append((of["ci_high"] - of["ci_low"])
                                            / (f["ci_high"] - f["ci_low"]))
            if f.get("design_effect") is not None:
                self.deff.append(f["design_effect"])
            oab = (om.get("abstention") or {}).get("answerable") or {}
            if oab.get("b") is not None:
                self.old_rb.append(oab["b"])
            self.old_ni += bool((oab.get("noninferiority") or {}).get("holds"))
        self.licensed += bool(r["claim"]["licensed"])
        self.significant += significant_any(m)
        ok, why = trap_ok(sc, r, pop)
        if not ok:
            self.trap_fail += 1
            self.why.append(why)
        f = m.get("faithfulness") or {}
        if f.get("ci_low") is not None:
            self.ci_total += 1
            self.ci_cover += f["ci_low"] <= pop["faith_effect"] <= f["ci_high"]
        c = m.get("coverage") or {}
        ab = (m.get("abstention") or {}).get("answerable") or {}
        for k, v in (("fa", f.get("a")), ("fb", f.get("b")), ("ca", c.get("a")), ("cb", c.get("b")),
                     ("ra", ab.get("a")), ("rb", ab.get("b"))):
            if v is not None:
                self.rep[k].append(v)
        for k, tk in (("fa", "faith_a"), ("fb", "faith_b"), ("ca", "cov_a"), ("cb", "cov_b"),
                      ("ra", "ref_a"), ("rb", "ref_b")):
            if t[tk] is not None:
                self.tru[k].append(t[tk])
        pw = m.get("pairwise") or {}
        if pw:
            self.rep["pc"].append(pw["position_consistency"]["estimate"])
            self.rep["fp"].append(pw["first_position_win_rate"])


def verdict(sc: Scenario, row: Row) -> tuple[bool, str]:
    """The scenario's sound result over all its experiments."""
    e = row.experiments
    rate = row.licensed / e if e else 0.0
    if row.trap_fail:
        return False, f"{row.trap_fail} experiment(s) wrong: {row.why[0]}"
    if sc.name in NULL_TYPE:
        # a binomial allowance: the observed rate may exceed α by sampling error alone
        lim = ALPHA + 2.33 * math.sqrt(ALPHA * (1 - ALPHA) / e)
        if rate > lim or row.significant / e > lim:
            return False, f"licence {rate:.3f} / significant {row.significant / e:.3f} > α"
        return True, "ok"
    if sc.name == "true_effect" and (row.level == "e2e" or row.n == 200):
        # the bar is at N = 200; other sizes are reported, not judged
        return (rate >= 0.80, "ok" if rate >= 0.80 else f"power {rate:.2f} < 0.80")
    if sc.name in ("selective_refusal", "noisy_verifier", *TRAP_REASON) and row.licensed:
        return False, "licensed"
    return True, "ok"


# --------------------------------------------------------------------------- main

def _fmt_pair(rep: list, tru: list) -> str:
    if not rep:
        return "n/a"
    r = sum(rep) / len(rep)
    t = sum(tru) / len(tru) if tru else float("nan")
    return f"{r:.3f} / {t:.3f}"


def run_all(args) -> int:
    from abtest.shapes import Config

    cfg = Config()
    rows: list[tuple[Scenario, Row, bool, str]] = []
    wanted = [sc for sc in SCENARIOS if args.level != "e2e" and sc.score_level
              and (not args.only_score or sc.name in args.only_score)
              or args.level != "score" and sc.e2e and (not args.only or sc.name in args.only)]
    pops = {sc.name: population_truth(sc) for sc in wanted}
    if args.level in ("score", "both"):
        for sc in SCENARIOS:
            if not sc.score_level or args.only_score and sc.name not in args.only_score:
                continue
            for n in sc.sizes or args.sizes:
                t0 = time.monotonic()
                k = args.score_experiments if sc.name in NULL_TYPE + ("true_effect",) else \
                    max(50, args.score_experiments // 5)
                row = Row(sc.name, "score", n)
                for i in range(k):
                    r = score_experiment(sc, n, 10_000 * n + i, cfg)
                    row.n = r["metrics"]["faithfulness"]["n"] + r["metrics"]["faithfulness"][
                        "n_dropped"]
                    row.add(sc, r, pops[sc.name])
                row.seconds = time.monotonic() - t0
                ok, why = verdict(sc, row)
                rows.append((sc, row, ok, why))
                print(f"  score {sc.name} N={n}: {row.experiments} in {row.seconds:.0f}s, "
                      f"licence {row.licensed / row.experiments:.3f}", file=sys.stderr)
    if args.level in ("e2e", "both"):
        from fake_llm_server import FakeLLMServer

        os.environ["SIM_KEY"] = "sk-sim-not-a-secret"
        scen = [sc for sc in SCENARIOS if sc.e2e and (not args.only or sc.name in args.only)]
        with FakeLLMServer(max_seconds=None, keep_alive=True) as srv, \
                tempfile.TemporaryDirectory(prefix="abtest-sim-") as tmp:
            for sc in scen:
                row = Row(sc.name, "e2e", args.e2e_n)
                t0 = time.monotonic()
                for i in range(args.e2e_experiments):
                    r = e2e_experiment(sc, args.e2e_n, 7_000 + i, srv, Path(tmp))
                    row.add(sc, r, pops[sc.name])
                row.seconds = time.monotonic() - t0
                ok, why = verdict(sc, row)
                rows.append((sc, row, ok, why))
                print(f"  e2e {sc.name}: {row.experiments} in {row.seconds:.0f}s, licence "
                      f"{row.licensed}/{row.experiments}", file=sys.stderr)
    print_table(rows, pops, args)
    return 0 if all(ok for _, _, ok, _ in rows) else 1


def print_table(rows, pops, args) -> None:
    head = ["scenario", "level", "N", "experiments", "licence rate", "significant rate",
            "faithfulness A rep/true", "faithfulness B rep/true", "coverage B rep/true",
            "refusal B (answerable) rep/true", "CI covers true effect", "sound result", "met"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for sc, row, ok, why in rows:
        e = row.experiments or 1
        cover = f"{row.ci_cover / row.ci_total:.3f}" if row.ci_total else "n/a"
        extra = ""
        if sc.name == "position_biased_judge" and row.rep["pc"]:
            p = pops[sc.name]
            extra = (f" (consistency {sum(row.rep['pc']) / len(row.rep['pc']):.3f} vs "
                     f"{p['position_consistency']:.3f}; first-position "
                     f"{sum(row.rep['fp']) / len(row.rep['fp']):.3f} vs "
                     f"{p['first_position_win_rate']:.3f})")
        out.append("| " + " | ".join([
            sc.name, row.level, str(row.n), str(row.experiments), f"{row.licensed / e:.3f}",
            f"{row.significant / e:.3f}", _fmt_pair(row.rep["fa"], row.tru["fa"]),
            _fmt_pair(row.rep["fb"], row.tru["fb"]), _fmt_pair(row.rep["cb"], row.tru["cb"]),
            _fmt_pair(row.rep["rb"], row.tru["rb"]), cover, sc.sound + extra,
            "yes" if ok else f"**NO** ({why})"]) + " |")
    print("\n".join(out))
    for sc, row, _, _ in rows:
        if not row.old_n:
            continue
        e = row.old_n
        if sc.name in GROUPED:
            cover = f"{row.old_ci_cover / row.old_ci_total:.3f}" if row.old_ci_total else "n/a"
            ratio = (f"; the iid faithfulness CI is {_median(row.width_ratio):.2f}× as wide as "
                     f"the grouped one (median), design effect {_median(row.deff):.2f} (median)"
                     if row.width_ratio and row.deff else "")
            print(f"\n{sc.name} ignoring groups (the iid inference before groups, same "
                  f"experiments): licensed {row.old_licensed / e:.3f}, significant "
                  f"{row.old_significant / e:.3f}, CI covers true effect {cover}{ratio}.")
        elif sc.soft_refusal:
            rb = f"{sum(row.old_rb) / len(row.old_rb):.3f}" if row.old_rb else "n/a"
            print(f"\n{sc.name} under the rule before issue 43 (a soft refusal's claim overruled "
                  f"\"abstained\": counted as answered; same experiments): licensed "
                  f"{row.old_licensed / e:.3f}, significant {row.old_significant / e:.3f}, "
                  f"refusal B (answerable) reported {rb}, refusal non-inferiority held "
                  f"{row.old_ni / e:.3f}.")
        else:
            print(f"\n{sc.name} without the minimum-evidence floor (same experiments): licensed "
                  f"{row.old_licensed / e:.3f}.")
    effects = ", ".join(f"{k} {v['faith_effect']:+.4f}" for k, v in pops.items())
    print(f"\nα = {ALPHA}; rep/true = mean reported value / mean realised truth over the "
          "experiments; 'significant' = any Holm family member significant (either direction); "
          "CI coverage = share of faithfulness CIs containing the population effect "
          f"({effects}).")


def group_size_check(draws: int = 4000, seed: int = 43) -> str:
    """The size of abtest's grouped tests under no difference, with few groups
    (docs/STATISTICS.md §10): the cluster-robust t (CR2) read on G − 1 and on Bell–McCaffrey
    df, and Durkalski's McNemar, at G = 5 … 50 groups of unequal sizes."""
    import numpy as np

    from abtest import stats as S

    rng = np.random.default_rng(seed)
    designs = {"equal groups of 8": lambda g: np.full(g, 8),
               "sizes 1–12": lambda g: rng.integers(1, 13, g)}
    out = ["| design | groups | CR2, G − 1 df: 5 % / 1 % | CR2, Bell–McCaffrey df: 5 % / 1 % |",
           "|---|---|---|---|"]
    for name, skew in (("equal groups of 8", False), ("sizes 1–12", False),
                       ("sizes 1–12, skewed group effect", True)):
        sizes_of = designs["sizes 1–12" if skew else name]
        for g in (5, 10, 20, 30, 50):
            p = np.empty((draws, 2))
            for k in range(draws):
                sizes = sizes_of(g)
                lab = np.repeat(np.arange(g), sizes)
                u = (rng.choice([-0.3, 0.1], size=g, p=[0.25, 0.75]) if skew
                     else rng.normal(0, 0.2, g))
                x = rng.random(lab.size)
                d = np.clip(np.where(x < 0.15, -0.5, np.where(x < 0.3, 0.5, 0.0)) + u[lab], -1, 1)
                for j, dfm in enumerate(("G-1", "bm")):
                    r = S.clustered_paired_t(np.zeros(d.size), d, lab.tolist(), df_method=dfm)
                    p[k, j] = 1.0 if r.p_value is None else r.p_value
            out.append(f"| {name} | {g} | {np.mean(p[:, 0] <= 0.05):.3f} / "
                       f"{np.mean(p[:, 0] <= 0.01):.3f} | {np.mean(p[:, 1] <= 0.05):.3f} / "
                       f"{np.mean(p[:, 1] <= 0.01):.3f} |")
    out += ["", "| design | groups | Durkalski: 5 % / 1 % | McNemar ignoring groups: 5 % / 1 % |",
            "|---|---|---|---|"]
    for repeats in (False, True):
        for g in (10, 20, 30, 50, 100):
            p = np.empty((draws, 2))
            for k in range(draws):
                sizes = rng.integers(3, 7, g) if repeats else rng.integers(1, 13, g)
                b = np.zeros(g, int)
                c = np.zeros(g, int)
                for i, n_g in enumerate(sizes):
                    if repeats:   # a repeated case: all its copies discordant the same way, or none
                        if rng.random() < 0.15:
                            (b if rng.random() < 0.5 else c)[i] = n_g
                        continue
                    q = 0.5 + 0.35 * rng.choice([-1, 1])   # the group leans one way
                    disc = rng.random(n_g) < 0.15
                    side = rng.random(n_g) < q
                    b[i], c[i] = np.sum(disc & side), np.sum(disc & ~side)
                p[k, 0] = S.clustered_mcnemar(b.tolist(), c.tolist()).p_value
                p[k, 1] = S.mcnemar(int(b.sum()), int(c.sum()), method="chi2").p_value
            name = "repeats, 3–6 copies" if repeats else "sizes 1–12, group leans ±0.35"
            out.append(f"| {name} | {g} | {np.mean(p[:, 0] <= 0.05):.3f} / "
                       f"{np.mean(p[:, 0] <= 0.01):.3f} | {np.mean(p[:, 1] <= 0.05):.3f} / "
                       f"{np.mean(p[:, 1] <= 0.01):.3f} |")
    return "\n".join(out)


def _median(xs: list) -> float:
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--level", choices=("score", "e2e", "both"), default="both")
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                   default=[60, 100, 200, 400], help="score-level N values")
    p.add_argument("--score-experiments", type=int, default=500)
    p.add_argument("--e2e-experiments", type=int, default=20)
    p.add_argument("--e2e-n", type=int, default=200)
    p.add_argument("--only", nargs="*", help="end-to-end scenarios to run (default: all)")
    p.add_argument("--only-score", nargs="*", help="score-level scenarios to run (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="small counts for a smoke run: 40 score experiments at N=200, 1 e2e "
                        "experiment per scenario at N=140")
    p.add_argument("--sequential", action="store_true",
                   help="sequential runs (anytime-valid looks): validity_sim_sequential.py")
    p.add_argument("--look", type=int, default=20, help="--sequential: units per look")
    p.add_argument("--sequential-experiments", type=int, default=1000,
                   help="--sequential: experiments for NULL and ALT (the others a fifth)")
    p.add_argument("--small-n", action="store_true",
                   help="the small-N family of issue 53 (tied scores, rare refusals, few groups, "
                        "anytime looks): validity_sim_small.py")
    p.add_argument("--group-size-check", action="store_true",
                   help="only the size of the grouped tests with few groups (STATISTICS.md §10)")
    args = p.parse_args(argv)
    if args.group_size_check:
        print(group_size_check())
        return 0
    if args.small_n:
        import validity_sim_small as small

        return small.run(200 if args.quick else 2000)
    if args.sequential:
        import validity_sim_sequential as seq

        k = 60 if args.quick else args.sequential_experiments
        return seq.run(k, max(20, k // 5), args.look, min(300, k), args.quick)
    if args.quick:
        # 140 cases: 35 unanswerable, enough for the 0.10 abstention margin's floor (33)
        args.sizes, args.score_experiments = [200], 40
        args.e2e_experiments, args.e2e_n = 1, 140
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
