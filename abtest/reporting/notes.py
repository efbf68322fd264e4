"""Every sentence a report says in words, written once: Markdown, HTML, the PR comment and the
view all take them from here, so no two formats can drift apart.

A sentence is a tuple of spans, (style, text) with style "" (plain), "strong" or "code";
each format renders the spans its own way (and escapes them), so no markup lives here.
Functions read a report's JSON shape (`model.json_shape`): a report file from another
version renders too.
"""

from __future__ import annotations

from typing import Any

from abtest.core.fmt import num, pct

Span = tuple[str, str]
Sentence = tuple[Span, ...]


def plain(*parts: str) -> Sentence:
    return tuple(("", p) for p in parts if p)


def strong(text: str) -> Span:
    return ("strong", text)


def code(text: str) -> Span:
    return ("code", text)


def text_of(sentence: Sentence) -> str:
    """The sentence without emphasis."""
    return "".join(t for _, t in sentence)


def markdown(sentence: Sentence) -> str:
    marks = {"": "{}", "strong": "**{}**", "code": "`{}`"}
    return "".join(marks[style].format(t) for style, t in sentence)


def _d(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


# --------------------------------------------------------------------------- the claim


def claim_heading(claim: dict) -> Sentence:
    """The claim box's first line: the licensed sentence, or the lead-in to its reasons."""
    c = _d(claim)
    if c.get("licensed"):
        return (strong("Licensed claim:"), ("", f" {c.get('sentence')}"))
    return (strong("No claim is licensed."), ("", " Why:"))


def claim_reasons(claim: dict) -> list[str]:
    """Why the claim is withheld (empty when licensed)."""
    c = _d(claim)
    return [] if c.get("licensed") else [str(x) for x in c.get("reasons") or []]


# --------------------------------------------------------------------------- caveats


def pipeline_change() -> Sentence:
    return plain("This is a pipeline change, re-measure end to end; the frozen claim does not "
                 "apply.")


def self_judge(model: Any) -> Sentence:
    return (("", "The judge is the generator model (self-judging: "), code(str(model)),
            ("", "): its verdicts on its own answers demonstrate the machinery; they are not "
                 "evidence."))


def demo_judge(model: Any) -> Sentence:
    return (strong("Demonstration only:"),
            ("", " the judge is the embedded model ("), code(str(model)),
            ("", ") because the config names none; its verdicts demonstrate the machinery and "
                 "are not evidence. Set `judge:` to a real model (or `judge: embedded` to mean "
                 "it)."))


def withheld(text: Any) -> Sentence:
    return (strong("No estimate is shown:"), ("", f" {text}."))


def length_caveat(caveat: Any) -> Sentence:
    return (strong("Length caveat:"), ("", f" {caveat}."))


def stale_fixture(fx: dict) -> Sentence:
    return (strong("Stale fixture:"),
            ("", f" captured {fx.get('captured_at')}, due for re-capture on "
                 f"{fx.get('next_evaluation_date')}; this run started after that date, so it "
                 "describes retrieval as it was then (`abtest capture` again, then re-run)."))


def draft_golden(gold: dict) -> Sentence:
    return (strong("Unconfirmed draft golden set:"),
            ("", f" {gold.get('n_draft')} of {gold.get('n_cases')} questions are model-written "
                 "drafts not yet confirmed by a person (`abtest golden confirm`)."))


# --------------------------------------------------------------------------- summary lines


def pairwise_line(pw: dict) -> Sentence:
    return plain(
        f"Pairwise (blind, both orders): B won {num(pw.get('b_wins'))}, A won "
        f"{num(pw.get('a_wins'))}, no preference {num(pw.get('no_preference'))} (of which "
        f"position-inconsistent {num(pw.get('position_inconsistent'))}); sign test p = "
        f"{num(pw.get('p_value'))}, Holm p = {num(pw.get('p_holm'))}"
        + (f" — significant, in {pw['direction']}'s favour" if pw.get("direction") else "")
        + ".")


def gate_line(g: dict) -> Sentence:
    """'Gate: DECISION — the first three reasons'; the decision is the emphasised span."""
    reasons = [str(x) for x in g.get("reasons") or []]
    return (("", "Gate: "), strong(str(g.get("decision"))),
            ("", f" — {'; '.join(reasons[:3])}" if reasons else ""))


def frozen_vs_live_cases(cc: dict) -> Sentence:
    """Which cases the frozen vs live comparison is over."""
    return plain(f"Over the {num(cc.get('n'))} case(s) both runs finished "
                 f"({num(cc.get('frozen_only'))} only in the frozen run, "
                 f"{num(cc.get('live_only'))} only in the live run); each row uses those with "
                 "the metric's value in both.")


def counts(r: dict) -> str:
    """The run's counts as every surface prints them (runstate.RunProgress.counts): "16 of 30
    cases finished", or a stopped sequential run's "60 of 120 used, 60 not needed
    (futility)"; a report from before the counts were kept says finished of all."""
    got = _d(r.get("progress")).get("counts")
    return str(got) if got else f"{num(r.get('n_finished'))} of {num(r.get('n_cases'))} " \
        "cases finished"


def backlog_basis(r: dict) -> str | None:
    """What an unfinished run's remediation backlog rests on (None for a complete run)."""
    if r.get("status") == "complete":
        return None
    return (f"From the {num(r.get('n_finished'))} finished case(s) only ({counts(r)}): it "
            "grows as the rest finish, and no item in it is an estimate for the run.")


def progress_so_far(r: dict, what: str) -> Sentence | None:
    """On an unfinished run, where a section would say "none measured": what exists so far,
    as counts (never an estimate). None on a complete run or a report without progress."""
    p = _d(r.get("progress"))
    if not p or r.get("status") == "complete":
        return None
    judged = _d(p.get("judged"))
    done = ", ".join(f"{k} {num(v)}" for k, v in judged.items()) or "none"
    return (strong(f"{p.get('state')}:"),
            ("", f" {counts(r)}, {num(p.get('started'))} with answers; cases judged so "
                 f"far: {done}. "
                 f"{what} wait until every case is finished."))


def live_withheld(r: dict) -> Sentence:
    """An incomplete live run's estimates are withheld: what to do about it."""
    return (("", "No estimate is shown for an incomplete live run: finished questions are listed "
                 "below; "), code(f"abtest live … --run-id {r.get('run_id')} --resume"),
            ("", " continues."))


def live_system_notes(m: dict) -> list[Sentence]:
    """What a live run measured of the real system besides the judges: retrieval (how often
    A and B retrieved the same chunks), citation accuracy where expected citations were
    given, and latency."""
    retr, lat = _d(m.get("retrieval")), _d(m.get("latency"))
    cp, ca = _d(retr.get("context_precision")), _d(_d(m.get("checks")).get("citation_accuracy"))
    out = [plain(f"Retrieval metrics exclude {num(cp.get('n_excluded_no_relevant_ids'))} "
                 "question(s) without relevant_chunk_ids; A and B retrieved the same chunks for "
                 f"{num(retr.get('same_retrieval_share'), 2)} of questions.")]
    if ca.get("n"):
        out.append(plain(f"Citation accuracy (expected citations all cited): A "
                         f"{num(ca.get('pass_rate_a'))}, B {num(ca.get('pass_rate_b'))} over "
                         f"{num(ca.get('n'))} question(s)."))
    kinds = ", ".join(str(k) for k in lat.get("latency_kind") or []) or "n/a"
    out.append(plain(f"Latency ({kinds}): p50 A {num(lat.get('p50_ms_a'), 0)} ms, p95 A "
                     f"{num(lat.get('p95_ms_a'), 0)} ms; p50 B {num(lat.get('p50_ms_b'), 0)} ms, "
                     f"p95 B {num(lat.get('p95_ms_b'), 0)} ms."))
    return out


def calls_line(calls: dict) -> Sentence:
    return plain(f"Calls: {calls.get('distinct_calls')} distinct LLM calls "
                 f"({calls.get('calls_per_case')} per case), {calls.get('provider_attempts')} "
                 "provider attempts. Frozen result: a claim about generation given these "
                 "contexts, never an end-to-end effect.")


# --------------------------------------------------------------------------- statistical notes


def holm_note(r: dict) -> Sentence:
    holm = _d(r.get("holm"))
    return plain("Pairwise A/B columns are win rates with ties counted half; abstention columns "
                 "are rates (lower is better on answerable cases, higher on unanswerable). CIs "
                 "are unadjusted; Holm family (fixed from the configured judges): "
                 f"{', '.join(holm.get('family') or []) or 'none'} ({holm.get('rule', 'n/a')}).")


def metric_notes(r: dict) -> list[Sentence]:
    """The notes under the metric table, in reading order: per score metric the dropped
    pairs, the worst case for one-sided drops, non-inferiority and the detectable effect;
    abstention's non-inferiority (`judge_notes` follow them)."""
    m = _d(r.get("metrics"))
    out: list[Sentence] = []
    for key in ("faithfulness", "coverage"):
        mm = _d(m.get(key))
        if mm.get("n_dropped"):
            dr = _d(mm.get("dropped"))
            why = "; ".join(f"{v}: " + ", ".join(f"{k} {n}" for k, n in c.items())
                            for v, c in _d(dr.get("reasons")).items() if c)
            out.append(plain(f"{key}: {mm['n_dropped']} pair(s) dropped (no score on A only: "
                             f"{len(dr.get('a_only') or [])}, on B only: "
                             f"{len(dr.get('b_only') or [])}, on both: "
                             f"{len(dr.get('both') or [])}" + (f"; {why}" if why else "") + ")."))
        bound = _d(mm.get("drop_bound"))
        if bound.get("imputed_a") or bound.get("imputed_b"):
            out.append(plain(f"{key}: worst case for the one-sided drops (B = 0 where only B "
                             "has no score, A = 1 where only A has none): B − A = "
                             f"{num(bound.get('difference'), signed=True)}, p = "
                             f"{num(bound.get('p_value'))} — "
                             f"{'holds' if bound.get('holds') else 'does not hold'}."))
        ni = _d(mm.get("noninferiority"))
        if ni:
            out.append(plain(f"{key} non-inferiority (margin {ni.get('margin')}): "
                             f"{'holds' if ni.get('holds') else 'not shown'} (lower one-sided "
                             f"{pct(ni.get('conf_level', 0.95))} limit {num(ni.get('ci_low'))})."))
        mde = _d(mm.get("mde"))
        if mde and not mm.get("significant"):
            if mde.get("mde") is None:
                out.append(plain(f"{key}: not significant; {mde.get('note', 'MDE undefined')}."))
            elif mde.get("effective_n") is not None:   # grouped: the effective N decides
                out.append(plain(
                    f"{key}: not significant. With {mm.get('n')} paired questions in "
                    f"{mm.get('n_groups')} groups (an effective N of {num(mde['effective_n'], 1)}, "
                    f"{num(mde.get('df'), 1)} df), α = {mde['alpha']:.3f} (Holm-conservative), "
                    f"two-sided, 80% power, the study can detect a mean difference of ≥ "
                    f"{num(mde['mde'])} (d_z = {num(mde.get('d_z'))}, sd_d = {num(mde.get('sd_d'))})."))
            else:
                out.append(plain(
                    f"{key}: not significant. With N = {mm.get('n')} paired questions, α = "
                    f"{mde['alpha']:.3f} (Holm-conservative), two-sided, 80% power, the study can "
                    f"detect a mean difference of ≥ {num(mde['mde'])} (d_z = {num(mde.get('d_z'))}, "
                    f"sd_d = {num(mm.get('sd_d'))})."))
    for sub in ("answerable", "unanswerable"):
        ni = _d(_d(_d(m.get("abstention")).get(sub)).get("noninferiority"))
        if ni:
            lim = ni.get("upper") if sub == "answerable" else ni.get("lower")
            out.append(plain(f"abstention ({sub}) non-inferiority (margin {ni.get('margin')}; "
                             f"{ni.get('rule')}): {'holds' if ni.get('holds') else 'not shown'} "
                             f"(limit {num(lim)}; needs at least {ni.get('min_n')} such cases to "
                             "be able to hold)."))
    for key, mm in _grouped_metrics(m):
        out.append(plain(
            f"{key}: {mm.get('n')} cases in {mm.get('n_groups')} groups — design effect "
            f"{num(mm.get('design_effect'), 2)}, effective N {num(mm.get('effective_n'), 1)}; "
            f"inference: {mm.get('inference')}."))
    for w in r.get("stat_warnings") or []:
        out.append(plain(f"The statistics library warned while computing these figures: {w}."))
    return out


def _grouped_metrics(m: dict) -> list[tuple[str, dict]]:
    """The metrics whose cases share groups (their unit of inference is the group)."""
    out = []
    for key in ("pairwise", "faithfulness", "coverage", "quality", "relevance", "conformance"):
        mm = _d(m.get(key))
        if mm.get("n_groups") is not None:
            out.append((key, mm))
    for sub in ("answerable", "unanswerable"):
        mm = _d(_d(m.get("abstention")).get(sub))
        if mm.get("n_groups") is not None:
            out.append((f"abstention ({sub})", mm))
    return out


def judge_notes(r: dict) -> list[Sentence]:
    """The pairwise judge's position and length diagnostics, then the extra judges."""
    pw = _d(_d(r.get("metrics")).get("pairwise"))
    out: list[Sentence] = []
    if pw:
        pc = _d(pw.get("position_consistency"))
        # which way an inconsistent judge leans: always the first-shown answer, or the second
        lean = (f"; of the {num(pw.get('position_inconsistent'))} position-inconsistent pairs, "
                f"{num(pc.get('biased_to_first'))} picked the answer shown first both times, "
                f"{num(pc.get('biased_to_second'))} the one shown second"
                if pw.get("position_inconsistent") else "")
        out.append(plain(f"Judge diagnostics: position consistency {num(pc.get('estimate'))} "
                         f"(Wilson CI {num(pc.get('ci_low'))}–{num(pc.get('ci_high'))}{lean}), "
                         f"first-position win rate {num(pw.get('first_position_win_rate'))}, "
                         f"answer length ratio B/A {num(pw.get('length_ratio_b_over_a'), 2)}."))
        lb = _d(pw.get("length_bias"))
        if lb:
            out.append((("", f"Length: of {lb.get('n_decisive')} decisive pairs B's answer was "
                             f"longer in {lb.get('b_longer')}, shorter in {lb.get('b_shorter')}, "
                             f"about equal in {lb.get('equal_length')}. "
                             + (f"Length-controlled B share {num(lb.get('lc_share_b'))} "
                                f"({num(lb.get('lc_ci_low'))} to {num(lb.get('lc_ci_high'))})."
                                if lb.get("separable") else
                                "Preference and length cannot be separated in these data.")),
                        *(((("", " "), strong(f"{lb['caveat']}."))) if lb.get("caveat") else ())))
    out += [plain(line) for line in extra_judge_lines(r)]
    return out


def extra_judge_lines(r: dict) -> list[str]:
    """Judge test-retest noise and the keyword-quality judge (neither enters the claim)."""
    out = []
    jn = _d(r.get("judge_noise"))
    if jn:
        out.append(f"Judge test-retest: the pairwise judge re-asked {num(jn.get('repeats'))}x on "
                   f"{num(jn.get('n_items'))} case(s); {num(jn.get('n_comparisons'))} repeated "
                   f"verdicts agree with the first in {num(jn.get('agreement'))} of them.")
    kw = _d(r.get("metrics")).get("keywords")
    if isinstance(kw, dict):
        s = _d(kw.get("summary"))
        out.append(f"Search-keyword quality (the captured keywords, the same for A and B): "
                   f"average {num(s.get('average'))}, median {num(s.get('median'))} over "
                   f"{num(kw.get('n'))} case(s).")
    rub = _d(_d(_d(r.get("metrics")).get("conformance")).get("rubric"))
    if rub.get("note"):
        out.append(f"Conformance: {rub['note']}")
    return out


# --------------------------------------------------------------------------- sequential runs

SEQUENTIAL_HEADERS = ["look", "groups", "cases", "faithfulness B − A (anytime CS)",
                      "always-valid p", "coverage: lower limit", "refusals (answerable): upper",
                      "abstention (unanswerable): lower", "conditions"]


def sequential_lines(seq: dict) -> list[Sentence]:
    """Why a sequential run stopped, what it used and saved, and how to read its intervals."""
    s = _d(seq)
    out: list[Sentence] = []
    if s.get("stop_text"):
        text = str(s["stop_text"])
        out.append((strong(text[:1].upper() + text[1:]),
                    ("", f" at look {s.get('looks_done')} (a look every {s.get('look_units')} "
                         f"groups, seed {s.get('seed')}).")))
    else:
        out.append(plain(f"Still looking: {s.get('looks_done')} look(s) so far, a look every "
                         f"{s.get('look_units')} groups (seed {s.get('seed')})."))
    saved = []
    if s.get("calls_saved") is not None:
        saved.append(f"about {s['calls_saved']} calls")
    if s.get("cost_saved_usd") is not None:
        saved.append(f"about ${s['cost_saved_usd']:.4f}")
    if s.get("cases_not_needed") is None:   # still looking: what is not taken may be needed
        out.append(plain(f"Taken so far: {s.get('cases_used')} of {s.get('cases_total')} cases "
                         f"({s.get('units_used')} of {s.get('units_total')} groups at the "
                         "last look)."))
    else:
        out.append(plain(f"Used {s.get('cases_used')} of {s.get('cases_total')} cases "
                         f"({s.get('units_used')} of {s.get('units_total')} groups); "
                         f"{s.get('cases_not_needed')} not needed"
                         + (f", saving {' and '.join(saved)} against the whole fixture"
                            if saved and s.get("cases_not_needed") else "") + "."))
    out.append(plain(str(s.get("note") or "")))
    return out


def sequential_rows(seq: dict) -> list[list[str]]:
    """One row per look: the claim metrics' anytime-valid figures and each condition."""
    rows = []
    for lk in _d(seq).get("looks") or []:
        sq = _d(lk.get("sequences"))
        f = _d(sq.get("faithfulness"))
        cs = (f"{num(f.get('mean'))} [{num(f.get('ci_low'))}, {num(f.get('ci_high'))}]"
              if f.get("ci_low") is not None else "—")
        states = ", ".join(f"{k} {v}" for k, v in _d(lk.get("conditions")).items()
                           if v != "holds") or "all hold"
        rows.append([str(lk.get("look")), str(lk.get("units")), str(lk.get("cases")), cs,
                     num(f.get("p_value")), num(_d(sq.get("coverage")).get("lower")),
                     num(_d(sq.get("abstention_answerable")).get("upper")),
                     num(_d(sq.get("abstention_unanswerable")).get("lower")),
                     states + (f"; stop: {lk['stop']}" if lk.get("stop") else "")])
    return rows
