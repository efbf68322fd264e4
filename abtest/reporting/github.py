"""The report as a pull-request comment (`abtest report RUN --format github`).

What a reviewer needs on the PR, in order: the claim (or why none is licensed), the gate, the
metric table, and at most ten flipped cases folded away; the full report stays a command away.
A hidden marker on the first line lets the GitHub Action find and update its own comment.

Model and question text is data: every cell is HTML-escaped (a `</details>` in a question
cannot break the page), and `@` is written as an entity so a question naming a team or a user
never notifies anyone. The comment stays under GitHub's 65,536-character limit with room to
spare (≤ 60,000): every part is clipped before it is escaped, so even text made only of
characters that escape longest cannot push it over.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from ..fmt import clip, interval, num
from . import notes
from .model import json_shape

if TYPE_CHECKING:
    from .model import Report

MARKER = "<!-- abtest-report -->"
MAX_CHARS = 60_000
FLIPPED_SHOWN = 10
_METRICS = ("pairwise", "faithfulness", "coverage", "quality", "relevance", "conformance")


def text(value, n: int = 300) -> str:
    """One line of model or user text, safe in a comment: escaped, no mentions, clipped."""
    one = " ".join(str("" if value is None else value).split())
    return html.escape(clip(one, n), quote=False).replace("@", "&#64;").replace("|", "&#124;")


def sentence(s: notes.Sentence, n: int = 300, emphasis: bool = True) -> str:
    """A sentence of `notes` in the comment: each span escaped and clipped to `n`, bold kept
    (or dropped) and the space between spans kept."""
    out = []
    for style, t in s:
        body = text(t, n)
        lead = " " if t[:1].isspace() and body else ""
        out.append(f"**{body}**" if style == "strong" and emphasis else lead + body)
    return "".join(out)


def _metric_rows(m: dict) -> list[list[str]]:
    rows: list[tuple[str, dict]] = []
    for key in _METRICS:
        mm = m.get(key)
        if isinstance(mm, dict) and mm.get("n"):
            rows.append((key, mm))
    for sub in ("answerable", "unanswerable"):
        mm = (m.get("abstention") or {}).get(sub)
        if isinstance(mm, dict) and mm.get("n"):
            rows.append((f"abstention ({sub})", mm))
    return [[name, num(mm.get("n")), num(mm.get("a")), num(mm.get("b")),
             num(mm.get("difference"), signed=True), interval(mm.get("ci_low"), mm.get("ci_high")),
             num(mm.get("p_holm"))] for name, mm in rows]


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
            + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def render_github(report: Report) -> str:
    """PR-comment Markdown for a frozen run's report."""
    r = json_shape(report)
    v = r.get("variants") or {}
    fx = r.get("fixture") or {}
    c = r.get("claim") or {}
    g = r.get("gate") or {}
    m = r.get("metrics") or {}
    L = [MARKER,
         f"### abtest: B `{text((v.get('b') or {}).get('name'), 80)}` vs A "
         f"`{text((v.get('a') or {}).get('name'), 80)}` on `{text(fx.get('name'), 80)}`", ""]
    L.append(sentence(notes.claim_heading(c), 2000))
    L += [f"- {text(reason, 300)}" for reason in notes.claim_reasons(c)[:12]]
    L += ["", f"**Gate: {text(g.get('decision') or 'n/a', 20)}**"
          + (" — " + "; ".join(text(x, 300) for x in (g.get("reasons") or [])[:5])
             if g.get("reasons") else "")]
    if r.get("estimates_withheld"):
        L += ["", "> " + sentence(notes.withheld(r["estimates_withheld"]), 400, emphasis=False)]
    rows = _metric_rows(m)
    if rows and not r.get("estimates_withheld"):
        L += ["", *_table(["metric", "N", "A", "B", "B − A", "CI", "Holm p"], rows)]
    flipped = [row for row in r.get("per_case") or [] if row.get("flipped")]
    if flipped:
        shown = flipped[:FLIPPED_SHOWN]
        L += ["", f"<details><summary>Flipped cases ({len(shown)} of {len(flipped)} shown)"
                  "</summary>", ""]
        L += _table(["case", "question", "pairwise", "faithfulness A → B", "checks newly failing in B"],
                    [[text(x.get("case_id"), 60), text(x.get("question"), 160),
                      text(x.get("pairwise") or "—", 20),
                      f"{num(x.get('faithfulness_a'))} → {num(x.get('faithfulness_b'))}",
                      text(", ".join(x.get("checks_failed_b") or []) or "—", 120)] for x in shown])
        L += ["", "</details>"]
    models = r.get("models") or {}
    gen, judge = models.get("generator") or {}, models.get("judge") or {}
    L += ["", f"<sub>run `{text(r.get('run_id'), 140)}` · {text(r.get('status'), 20)}, "
              f"{num(r.get('n_finished'))}/{num(r.get('n_cases'))} cases · corpus "
              f"{text(fx.get('corpus_version'), 60)} · generator `{text(gen.get('requested'), 80)}`"
              f" · judge `{text(judge.get('requested'), 80)}` · full report: "
              f"`abtest report {text(r.get('run_id'), 140)} --format html`</sub>", ""]
    # every part is capped (escaping at most sextuples a character): under MAX_CHARS always
    return "\n".join(L)
