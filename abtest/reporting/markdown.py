"""Markdown report: executive summary first, then the evidence in reading order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..fmt import clip, cost_line, interval, num, pct
from .metrics import SCORE_JUDGES
from .model import json_shape

if TYPE_CHECKING:
    from .model import Report


def cell(text, n=160):
    """Text for a Markdown table cell or list line: one line, pipes escaped, clipped."""
    return clip(str(text or "").replace("|", "\\|"), n)


def _score_summaries(m: dict) -> list[list]:
    """Rows (metric, A|B, average … low) from each continuous metric's summary_a / summary_b.

    A metric that is absent, None or carries no summaries is skipped."""
    rows = []
    for key in SCORE_JUDGES:
        mm = m.get(key)
        if not isinstance(mm, dict):
            continue
        for v in ("a", "b"):
            s = mm.get(f"summary_{v}")
            if not isinstance(s, dict) or not s.get("n"):
                continue
            rows.append([key, v.upper()]
                        + [num(s.get(k)) for k in ("average", "median", "p25", "p75", "min", "max")]
                        + [num(s.get(k)) for k in ("high", "medium", "low")])
    return rows


FLIPPED_SHOWN = 200  # a longer table is unreadable in Markdown; JSON and HTML keep every case


def _text_table(rows: list[list], headers: list[str]) -> str:
    """A GitHub pipe table of text cells, laid out as tabulate's "github" format.

    The remediation backlog has a row per hallucination incident (8,000 at 10,000 cases), where
    tabulate's per-cell type inference took ~0.4 s; a "|" in a cell is escaped, a line break
    becomes a space."""
    cells = [[str("" if c is None else c).strip().replace("|", "\\|").replace("\n", " ") for c in row]
             for row in rows]
    widths = [max([len(h) + 2] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]

    def line(vals):
        return "| " + " | ".join(v.ljust(w) for v, w in zip(vals, widths)) + " |"

    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(row) for row in cells])


def judge_validation_md(val: dict) -> str:
    """The per-judge validation table (frozen and live reports)."""
    from tabulate import tabulate

    claim = set(val.get("claim_judges") or [])
    rows = []
    for j in ("pairwise", "faithfulness", "coverage", "abstention"):
        b = val.get(j)
        if not b:
            continue
        rows.append([j, "yes" if j in claim else "no", b["n_labels"], num(b.get("kappa")),
                     f"[{num(b.get('ci_low'))}, {num(b.get('ci_high'))}]",
                     "validated" if b.get("validated") else f"not validated: {b.get('reason')}"])
    if not rows:
        return "No human labels."
    return (tabulate(rows, headers=["judge", "claim rests on it", "labels", "kappa", "CI",
                                    "decision"], tablefmt="github", disable_numparse=True)
            + f"\n\nRule: {val.get('rule')}.")


def extra_judge_lines(r: dict) -> list[str]:
    """Judge test-retest noise and the keyword-quality judge, as plain sentences (both
    renderers show them; neither enters the claim)."""
    out = []
    jn = r.get("judge_noise") if isinstance(r.get("judge_noise"), dict) else None
    if jn:
        out.append(f"Judge test-retest: the pairwise judge re-asked {num(jn.get('repeats'))}x on "
                   f"{num(jn.get('n_items'))} case(s); {num(jn.get('n_comparisons'))} repeated "
                   f"verdicts agree with the first in {num(jn.get('agreement'))} of them.")
    kw = (r.get("metrics") or {}).get("keywords")
    if isinstance(kw, dict):
        s = kw.get("summary") if isinstance(kw.get("summary"), dict) else {}
        out.append(f"Search-keyword quality (the captured keywords, the same for A and B): "
                   f"average {num(s.get('average'))}, median {num(s.get('median'))} over "
                   f"{num(kw.get('n'))} case(s).")
    rub = ((r.get("metrics") or {}).get("conformance") or {}).get("rubric")
    if isinstance(rub, dict) and rub.get("note"):
        out.append(f"Conformance: {rub['note']}")
    return out


def render_markdown(report: Report) -> str:
    from tabulate import tabulate

    r = json_shape(report)
    L: list[str] = []
    add = L.append
    m = r["metrics"]
    add(f"# abtest report — run {r['run_id']}")
    add("")
    add(f"- Evaluation date: {r['generated_at'][:10]} (run created {str(r['created_at'])[:19]})")
    add(f"- Status: **{r['status']}** — {r['n_finished']}/{r['n_cases']} cases finished")
    add(f"- Variants: A = `{r['variants']['a']['name']}` (sha256 {r['variants']['a']['sha256'][:12]}), "
        f"B = `{r['variants']['b']['name']}` (sha256 {r['variants']['b']['sha256'][:12]})")
    add(f"- Git commit: {r.get('git_commit') or 'n/a (not a git repository)'}")
    for role in ("generator", "judge"):
        mm = r["models"][role]
        add(f"- {role.capitalize()}: requested `{mm['requested']}`, resolved "
            f"{', '.join(f'`{x}`' for x in mm['resolved']) or 'n/a'}")
    fx = r["fixture"]
    add(f"- Fixture: `{fx['name']}`, corpus version {fx['corpus_version']}, retriever "
        f"`{fx.get('retriever')}`, cases_sha256 {fx['cases_sha256'][:16]}…")
    add(f"- Comparison kind: **{r['comparison_kind']}**")
    cost = cost_line(r)
    if cost:
        add(f"- Cost: {'**' + cost + '**' if (r.get('budget') or {}).get('stopped') else cost}")
    if fx.get("stale_at_run"):
        add("")
        add(f"> **Stale fixture:** captured {fx.get('captured_at')}, due for re-capture on "
            f"{fx.get('next_evaluation_date')}; this run started after that date, so it describes "
            "retrieval as it was then (`abtest capture` again, then re-run).")
    gold = r.get("golden") or {}
    if gold.get("is_draft"):
        add("")
        add(f"> **Unconfirmed draft golden set:** {gold['n_draft']} of {gold['n_cases']} questions are "
            "model-written drafts not yet confirmed by a person (`abtest golden confirm`).")
    add("")
    add("## Executive summary")
    add("")
    c = r["claim"]
    if c["licensed"]:
        add(f"**Licensed claim:** {c['sentence']}")
    else:
        add("**No claim is licensed.** Why:")
        for reason in c["reasons"]:
            add(f"- {reason}")
    if r["comparison_kind"] == "pipeline_change":
        add("")
        add("> This is a pipeline change, re-measure end to end; the frozen claim does not apply.")
    if r["self_judge"]:
        add("")
        add(f"> The judge is the generator model (self-judging: `{r.get('self_judge_model')}`): "
            "its verdicts on its own answers demonstrate the machinery; they are not evidence.")
    if r.get("estimates_withheld"):
        add("")
        add(f"> **No estimate is shown:** {r['estimates_withheld']}.")
    pw = m.get("pairwise")
    if pw:
        add("")
        add(f"Pairwise (blind, both orders): B won {pw['b_wins']}, A won {pw['a_wins']}, no preference "
            f"{pw['no_preference']} (of which position-inconsistent {pw['position_inconsistent']}); "
            f"sign test p = {num(pw['p_value'])}, Holm p = {num(pw.get('p_holm'))}"
            + (f" — significant, in {pw['direction']}'s favour" if pw.get("direction") else "")
            + ".")
        cav = (pw.get("length_bias") or {}).get("caveat")
        if cav:
            add("")
            add(f"> **Length caveat:** {cav}.")
    g = r.get("gate")
    if g:
        add("")
        add(f"Gate: **{g['decision']}**" + (f" — {'; '.join(g['reasons'][:3])}" if g["reasons"] else ""))
    add("")
    add("## Fixture / golden set summary")
    add("")
    cats: dict[str, int] = {}
    n_un = 0
    for row in r["per_case"]:
        cats[row.get("category") or "uncategorised"] = cats.get(row.get("category") or "uncategorised", 0) + 1
        n_un += 1 if row.get("answerable") is False else 0
    add(f"{r['n_cases']} cases: {r['n_cases'] - n_un} answerable, {n_un} unanswerable. Categories: "
        + ", ".join(f"{k} {v}" for k, v in sorted(cats.items())) + ".")
    add("")
    add("## Deterministic checks (before any judge)")
    add("")
    rows = []
    for name, s in (m.get("checks") or {}).items():
        if not (s.get("n_a_applicable") or s.get("n_b_applicable")):
            continue
        rows.append([name, s.get("n_a_applicable", s["n"]), s.get("n_b_applicable", s["n"]),
                     num(s["pass_rate_a"]), num(s["pass_rate_b"]), s["n"], num(s.get("p_value")),
                     ", ".join(s.get("newly_failing", [])[:5]) or "—"])
    if rows:
        add(tabulate(rows, headers=["check", "applies A", "applies B", "pass A", "pass B",
                                    "paired n", "McNemar mid-p", "newly failing in B"],
                     tablefmt="github", disable_numparse=True))
    else:
        add("No check applied to any case.")
    add("")
    add("## Metric scores")
    add("")
    rows = []
    for key in ("pairwise", "faithfulness", "coverage", "quality", "relevance", "conformance"):
        mm = m.get(key)
        if not mm:
            continue
        rows.append([key, mm["n"], num(mm["a"]), num(mm["b"]), num(mm["difference"], signed=True),
                     interval(mm.get("ci_low"), mm.get("ci_high")), mm["test"].split(" ")[0],
                     num(mm["p_value"]), num(mm.get("p_holm"))])
    for sub in ("answerable", "unanswerable"):
        mm = (m.get("abstention") or {}).get(sub)
        if mm and mm["n"]:
            rows.append([f"abstention ({sub})", mm["n"], num(mm["a"]), num(mm["b"]),
                         num(mm["difference"], signed=True),
                         interval(mm.get("ci_low"), mm.get("ci_high")), mm["test"],
                         num(mm["p_value"]), num(mm.get("p_holm"))])
    level = pct(1 - (r.get("holm") or {}).get("alpha", 0.05))
    add(tabulate(rows, headers=["metric", "N", "A", "B", "B − A", f"{level} CI", "test", "p",
                                "Holm p"], tablefmt="github", disable_numparse=True))
    add("")
    add("Pairwise A/B columns are win rates with ties counted half; abstention columns are rates "
        "(lower is better on answerable cases, higher on unanswerable). CIs are unadjusted; Holm "
        f"family (fixed from the configured judges): {', '.join(r['holm'].get('family') or []) or 'none'}"
        f" ({r['holm'].get('rule', 'n/a')}).")
    for key in ("faithfulness", "coverage"):
        mm = m.get(key)
        if mm and mm.get("n_dropped"):
            dr = mm["dropped"]
            why = "; ".join(f"{v}: " + ", ".join(f"{k} {n}" for k, n in c.items())
                            for v, c in (dr.get("reasons") or {}).items() if c)
            add(f"- {key}: {mm['n_dropped']} pair(s) dropped (no score on A only: "
                f"{len(dr['a_only'])}, on B only: {len(dr['b_only'])}, on both: {len(dr['both'])}"
                + (f"; {why}" if why else "") + ").")
        bound = (mm or {}).get("drop_bound") or {}
        if mm and (bound.get("imputed_a") or bound.get("imputed_b")):
            add(f"- {key}: worst case for the one-sided drops (B = 0 where only B has no score, "
                f"A = 1 where only A has none): B − A = {num(bound.get('difference'), signed=True)}, "
                f"p = {num(bound.get('p_value'))} — {'holds' if bound.get('holds') else 'does not hold'}.")
        ni = (mm or {}).get("noninferiority")
        if ni:
            add(f"- {key} non-inferiority (margin {ni['margin']}): "
                f"{'holds' if ni.get('holds') else 'not shown'} (lower {pct(ni.get('conf_level', 0.9))} "
                f"limit {num(ni.get('ci_low'))}).")
        if mm and mm.get("mde") and not mm.get("significant"):
            if mm["mde"].get("mde") is None:
                add(f"- {key}: not significant; {mm['mde'].get('note', 'MDE undefined')}.")
            else:
                add(f"- {key}: not significant. With N = {mm['n']} paired questions, α = "
                    f"{mm['mde']['alpha']:.3f} (Holm-conservative), two-sided, 80% power, the study "
                    f"can detect a mean difference of ≥ {num(mm['mde']['mde'])} (d_z = "
                    f"{num(mm['mde']['d_z'])}, sd_d = {num(mm['sd_d'])}).")
    for sub in ("answerable", "unanswerable"):
        ni = ((m.get("abstention") or {}).get(sub) or {}).get("noninferiority")
        if ni:
            lim = ni.get("upper") if sub == "answerable" else ni.get("lower")
            add(f"- abstention ({sub}) non-inferiority (margin {ni['margin']}; {ni['rule']}): "
                f"{'holds' if ni.get('holds') else 'not shown'} (limit {num(lim)}; needs at least "
                f"{ni.get('min_n')} such cases to be able to hold).")
    if pw:
        pc = pw["position_consistency"]
        add(f"- Judge diagnostics: position consistency {num(pc['estimate'])} "
            f"(Wilson CI {num(pc['ci_low'])}–{num(pc['ci_high'])}), first-position win rate "
            f"{num(pw['first_position_win_rate'])}, answer length ratio B/A "
            f"{num(pw['length_ratio_b_over_a'], 2)}.")
        lb = pw.get("length_bias") or {}
        if lb:
            add(f"- Length: of {lb.get('n_decisive')} decisive pairs B's answer was longer in "
                f"{lb.get('b_longer')}, shorter in {lb.get('b_shorter')}, about equal in "
                f"{lb.get('equal_length')}. "
                + (f"Length-controlled B share {num(lb['lc_share_b'])} ({num(lb['lc_ci_low'])} to "
                   f"{num(lb['lc_ci_high'])})." if lb.get("separable") else
                   "Preference and length cannot be separated in these data.")
                + (f" **{lb['caveat']}.**" if lb.get("caveat") else ""))
    for line in extra_judge_lines(r):
        add(f"- {line}")
    summaries = _score_summaries(m)
    if summaries:
        add("")
        add("### Score summaries")
        add("")
        add(tabulate(summaries, headers=["metric", "variant", "average", "median", "p25", "p75",
                                         "min", "max", "high (≥0.8)", "medium (0.6–0.8)",
                                         "low (<0.6)"], tablefmt="github", disable_numparse=True,
                     colalign=("left", "left") + ("right",) * 9))
        add("")
        add("Per-variant descriptive summaries over the paired questions of each metric; high / "
            "medium / low count answers scoring ≥ 0.8, 0.6–0.8 and < 0.6.")
    if r.get("prompt_diff"):
        pd = r["prompt_diff"]
        add("")
        add(f"Rendered prompt differences (case {pd['case_id']}; parts changed: "
            f"{', '.join(pd['changed_parts']) or 'none'}):")
        add("")
        add("```diff")
        add(pd["diff"].rstrip() or "(identical)")
        add("```")
    add("")
    add("## Judge validation (human labels, per judge)")
    add("")
    add(judge_validation_md(r.get("judge_validation") or {}))
    add("")
    add("## Gate decision")
    add("")
    if g:
        add(f"**{g['decision']}** (exit code {g['exit_code']})")
        add("")
        add(tabulate([[x["name"], num(x["value"]), x["threshold"], x["status"], x.get("note", "")]
                      for x in g["rules"]], headers=["rule", "B value", "threshold", "status", "note"],
                     tablefmt="github"))
    add("")
    add("## Hallucination incidents")
    add("")
    if not r["incidents"]:
        add("None (no answer with faithfulness below the incident threshold).")
    for inc in r["incidents"]:
        add(f"- **{inc['case_id']}** (variant {inc['variant']}, faithfulness {num(inc['faithfulness'], 2)}): "
            f"{cell(inc['question'])}")
        for u in inc["unsupported"][:5]:
            add(f"  - {u['verdict']}: {cell(u['claim'])}")
        chunks = inc.get("context") or [{"id": c, "text": ""} for c in inc["context_ids"]]
        if not chunks:
            add("  - context: (none)")
        for ch in chunks:
            add(f"  - context `{ch['id']}`: {cell(ch['text'], 400)}")
    add("")
    add("## Remediation backlog")
    add("")
    if r["remediation"]:
        add(_text_table([[x["priority"], x["item"], x["likely_cause"], x["remedy"]]
                         for x in r["remediation"]], ["priority", "item", "likely cause", "remedy"]))
    else:
        add("Nothing to remediate.")
    add("")
    add("## Cases that flipped")
    add("")
    flipped = [row for row in r["per_case"] if row.get("flipped")]
    if flipped:
        shown = flipped[:FLIPPED_SHOWN]
        add(tabulate([[row["case_id"], num(row.get("faithfulness_a"), 2), num(row.get("faithfulness_b"), 2),
                       row.get("pairwise") or "", ", ".join(sorted(set(row["checks_failed_b"]) -
                                                              set(row["checks_failed_a"])))]
                      for row in shown], headers=["case", "faith A", "faith B", "pairwise",
                                                  "newly failing checks"], tablefmt="github",
                     disable_numparse=True, colalign=("left", "right", "right", "left", "left")))
        if len(flipped) > len(shown):
            add("")
            add(f"… and {len(flipped) - len(shown)} more; every case is in the JSON report's "
                "`per_case` and in the HTML report.")
    else:
        add("No case crossed the faithfulness threshold or newly failed a check.")
    if r["unfinished_cases"]:
        add("")
        add("## Unfinished cases (not scored, not counted)")
        add("")
        for cid in r["unfinished_cases"]:
            add(f"- {cid}: {'; '.join(r['unfinished_reasons'].get(cid, []))[:200]}")
    add("")
    add("## Next evaluation date")
    add("")
    nd = r["fixture"].get("next_evaluation_date")
    add(f"{nd} (fixture refresh every {r['fixture'].get('refresh_every_days')} days)" if nd else "n/a")
    add("")
    add(f"_Calls: {r['calls']['distinct_calls']} distinct LLM calls ({r['calls']['calls_per_case']} per "
        f"case), {r['calls']['provider_attempts']} provider attempts. Frozen result: a claim about "
        "generation given these contexts, never an end-to-end effect._")
    return "\n".join(L) + "\n"
