"""Markdown report: executive summary first, then the evidence in reading order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from abtest.core.fmt import clip, cost_line, kappa_text, num, pct
from abtest.reporting.metrics import SCORE_JUDGES
from abtest.reporting import notes
from abtest.reporting.display import metric_rows
from abtest.reporting.model import json_shape
from tabulate import tabulate

if TYPE_CHECKING:
    from abtest.reporting.model import Report


md = notes.markdown


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

    claim = set(val.get("claim_judges") or [])
    rows = []
    for j in ("pairwise", "faithfulness", "coverage", "abstention"):
        b = val.get(j)
        if not b:
            continue
        rows.append([j, "yes" if j in claim else "no", b["n_labels"],
                     kappa_text(b.get("kappa"), b.get("ci_low"), b.get("ci_high")),
                     "validated" if b.get("validated") else f"not validated: {b.get('reason')}"])
    if not rows:
        return "No human labels."
    return (tabulate(rows, headers=["judge", "claim rests on it", "labels", "kappa [CI]",
                                    "decision"], tablefmt="github", disable_numparse=True)
            + f"\n\nRule: {val.get('rule')}.")


def render_markdown(report: Report) -> str:

    r = json_shape(report)
    L: list[str] = []
    add = L.append
    m = r["metrics"]
    add(f"# abtest report — run {r['run_id']}")
    add("")
    if r.get("demo_judge"):   # before anything else: no verdict below is evidence
        add(f"> **{r['demo_judge']}**")
        add("")
    add(f"- Evaluation date: {r['generated_at'][:10]} (run created {str(r['created_at'])[:19]})")
    add(f"- Status: **{r['status']}** — {notes.counts(r)}")
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
    grp = r.get("groups") or {}
    if grp and grp.get("n_groups", 0) < grp.get("n_cases", 0):
        add(f"- Groups: {grp['text']} — the unit of inference (docs/CLAIM_STATISTICS.md)")
    add(f"- Comparison kind: **{r['comparison_kind']}**")
    cost = cost_line(r)
    if cost:
        add(f"- Cost: {'**' + cost + '**' if (r.get('budget') or {}).get('stopped') else cost}")
    if fx.get("stale_at_run"):
        add("")
        add("> " + md(notes.stale_fixture(fx)))
    gold = r.get("golden") or {}
    if gold.get("is_draft"):
        add("")
        add("> " + md(notes.draft_golden(gold)))
    add("")
    add("## Executive summary")
    add("")
    add(md(notes.claim_heading(r["claim"])))
    for reason in notes.claim_reasons(r["claim"]):
        add(f"- {reason}")
    if r["comparison_kind"] == "pipeline_change":
        add("")
        add("> " + md(notes.pipeline_change()))
    if r["self_judge"]:
        add("")
        add("> " + md(notes.self_judge(r.get("self_judge_model"))))
    if r.get("estimates_withheld"):
        add("")
        add("> " + md(notes.withheld(r["estimates_withheld"])))
    pw = m.get("pairwise")
    if pw:
        add("")
        add(md(notes.pairwise_line(pw)))
        cav = (pw.get("length_bias") or {}).get("caveat")
        if cav:
            add("")
            add("> " + md(notes.length_caveat(cav)))
    g = r.get("gate")
    if g:
        add("")
        add(md(notes.gate_line(g)))
    seq = r.get("sequential")
    if seq:
        add("")
        add("## Sequential run")
        add("")
        for line in notes.sequential_lines(seq):
            add(f"- {md(line)}")
        if seq["looks"]:
            add("")
            add(tabulate(notes.sequential_rows(seq), headers=notes.SEQUENTIAL_HEADERS,
                         tablefmt="github", disable_numparse=True))
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
    elif checks_so_far := notes.progress_so_far(r, "Check results"):
        add(md(checks_so_far))
    else:
        add("No check applied to any case.")
    add("")
    add("## Metric scores")
    add("")
    rows = metric_rows(r)
    level = pct(1 - (r.get("holm") or {}).get("alpha", 0.05))
    so_far = notes.progress_so_far(r, "Metric scores")
    if not rows and so_far:
        add(md(so_far))
    else:
        add(tabulate(rows, headers=["metric", "N", "A", "B", "B − A", f"{level} CI", "test", "p",
                                    "Holm p"], tablefmt="github", disable_numparse=True))
    add("")
    add(md(notes.holm_note(r)))
    for note in notes.metric_notes(r) + notes.judge_notes(r):
        add(f"- {md(note)}")
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
    basis = notes.backlog_basis(r)
    if basis:
        add("")
        add(f"_{basis}_")
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
    add(f"_{md(notes.calls_line(r['calls']))}_")
    return "\n".join(L) + "\n"
