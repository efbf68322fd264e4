"""The report as a pull-request comment (`abtest report RUN --format github`).

What a reviewer needs on the PR, in order: the claim (or why none is licensed), the gate, the
metric table, and at most ten flipped cases folded away; the full report stays a command away.
A hidden marker on the first line lets the GitHub Action find and update its own comment. The
comment's layout is templates/github.md; this module gives it the cells, already escaped.

Model and question text is data: every cell is HTML-escaped (a `</details>` in a question
cannot break the page), and `@` is written as an entity so a question naming a team or a user
never notifies anyone. The comment stays under GitHub's 65,536-character limit with room to
spare (≤ 60,000): every part is clipped before it is escaped, so even text made only of
characters that escape longest cannot push it over.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from abtest.core.fmt import clip, interval, num
from abtest.reporting import notes
from abtest.reporting.model import json_shape
from abtest.reporting.pages import environment

if TYPE_CHECKING:
    from abtest.reporting.model import Report

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


def _flipped_rows(flipped: list[dict]) -> list[list[str]]:
    return [[text(x.get("case_id"), 60), text(x.get("question"), 160),
             text(x.get("pairwise") or "—", 20),
             f"{num(x.get('faithfulness_a'))} → {num(x.get('faithfulness_b'))}",
             text(", ".join(x.get("checks_failed_b") or []) or "—", 120)]
            for x in flipped[:FLIPPED_SHOWN]]


def render_github(report: Report) -> str:
    """PR-comment Markdown for a frozen run's report (templates/github.md). Every part is
    capped (escaping at most sextuples a character): under MAX_CHARS always."""
    r = json_shape(report)
    flipped = [row for row in r.get("per_case") or [] if row.get("flipped")]
    return environment().get_template("github.md").render(
        r=r, marker=MARKER, text=text, sentence=sentence,
        metric_rows=_metric_rows(r.get("metrics") or {}), flipped=flipped,
        flipped_rows=_flipped_rows(flipped))
