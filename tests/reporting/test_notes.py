"""Every sentence is written once (abtest.reporting.notes): Markdown, HTML and the PR comment
show the very words notes.py gives, so the formats cannot drift apart again."""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path

from abtest.reporting import notes, render
from support.fakes import DATA

ROOT = Path(__file__).resolve().parents[2]


def _sample() -> dict:
    return json.loads((DATA / "sample_report.json").read_text(encoding="utf-8"))


def _page_text(page: str) -> str:
    """The HTML's text with tags removed and entities decoded (emphasis tags vanish)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_claim_and_reasons_come_from_notes_in_every_format():
    r = _sample()
    want = [notes.text_of(notes.claim_heading(r["claim"])), *notes.claim_reasons(r["claim"])]
    assert want[0] == "No claim is licensed. Why:" and len(want) > 3
    md, page, gh = (render(r, f) for f in ("md", "html", "github"))
    assert notes.markdown(notes.claim_heading(r["claim"])) in md
    assert notes.markdown(notes.claim_heading(r["claim"])) in gh
    text = _page_text(page)
    for line in want:
        assert line in text, line
        assert f"- {line}" in md or line == want[0]


def test_a_licensed_sentence_reads_the_same_everywhere():
    r = copy.deepcopy(_sample())
    r["claim"] = {"licensed": True, "reasons": [],
                  "sentence": "Given these contexts, B is more faithful than A (+0.1)."}
    line = notes.markdown(notes.claim_heading(r["claim"]))
    assert line == "**Licensed claim:** Given these contexts, B is more faithful than A (+0.1)."
    assert line in render(r, "md") and line in render(r, "github")
    assert notes.text_of(notes.claim_heading(r["claim"])) in _page_text(render(r, "html"))


def test_statistical_notes_and_caveats_are_one_text_in_markdown_and_html():
    r = _sample()
    sentences = [notes.holm_note(r), *notes.metric_notes(r), *notes.judge_notes(r),
                 notes.calls_line(r["calls"]), notes.pairwise_line(r["metrics"]["pairwise"])]
    assert len(sentences) >= 6
    md, text = render(r, "md"), _page_text(render(r, "html"))
    for s in sentences:
        assert notes.markdown(s) in md, notes.text_of(s)
        assert notes.text_of(s) in text, notes.text_of(s)


def test_withheld_estimates_read_the_same_in_all_three():
    r = copy.deepcopy(_sample())
    r["estimates_withheld"] = "incomplete run: 2 case(s) unfinished"
    s = notes.withheld(r["estimates_withheld"])
    assert notes.markdown(s) in render(r, "md")
    assert notes.text_of(s) in render(r, "github")
    assert notes.text_of(s) in _page_text(render(r, "html"))


# the Python that renders pages carries no markup: their pages are templates and asset files
# (every module of reporting, view and review, and the report command)
NO_MARKUP = sorted({str(p.relative_to(ROOT)) for d in ("reporting", "view", "review")
                    for p in (ROOT / "abtest" / d).rglob("*.py")} | {"abtest/cli/report.py"})
MARKUP = re.compile(r"<(div|table|thead|tbody|tr|td|th|ul|ol|li|dl|dt|dd|section|header|footer"
                    r"|nav|main|h[1-6]|p|a|br|span|strong|em|code|pre|details|summary|sub|sup"
                    r"|figure|figcaption|form|input|button|select|option|label|html|head|body"
                    r"|meta|link|title|style|script|svg|g|rect|line|circle|polygon|path|text)\b"
                    r"|\besc\(|\{\s*[a-z-]+\s*:\s*[^}]*;\s*\}", re.I)


def test_no_html_css_or_js_in_the_python_that_renders_pages():
    assert {"abtest/reporting/html.py", "abtest/reporting/github.py", "abtest/view/app.py",
            "abtest/review/pack.py"} <= set(NO_MARKUP)
    found = {p: MARKUP.findall((ROOT / p).read_text(encoding="utf-8")) for p in NO_MARKUP}
    assert {p: f for p, f in found.items() if f} == {}


def test_judge_diagnostics_say_which_way_inconsistent_pairs_lean_only_when_there_are_some():
    r = copy.deepcopy(_sample())
    pw = r["metrics"]["pairwise"]
    pw["position_inconsistent"] = 7
    pw["position_consistency"].update(biased_to_first=5, biased_to_second=1)
    line = notes.text_of(notes.judge_notes(r)[0])
    assert ("; of the 7 position-inconsistent pairs, 5 picked the answer shown first both "
            "times, 1 the one shown second)") in line
    assert line in render(r, "md") and line in _page_text(render(r, "html"))
    pw["position_inconsistent"] = 0
    pw["position_consistency"].update(biased_to_first=0, biased_to_second=0)
    assert "picked" not in notes.text_of(notes.judge_notes(r)[0])


def test_statistics_warnings_become_report_notes_never_stderr(ran, monkeypatch):
    """scipy warns (precision loss over identical data) while the metrics are computed: the
    report carries the warning as a note in every format, and `abtest report` prints nothing
    of it on stderr."""
    import json as _json

    from click.testing import CliRunner

    import abtest.reporting.build as B
    from abtest.cli import cli
    real = B.compute_metrics

    def warning_metrics(*a, **k):
        import scipy.stats as st

        st.skew([1.0, 1.0, 1.0])          # scipy's RuntimeWarning: precision loss
        return real(*a, **k)

    monkeypatch.setattr(B, "compute_metrics", warning_metrics)
    out = CliRunner().invoke(cli, ["report", "latest", "--format", "json"])
    rep = _json.loads(out.stdout)
    assert len(rep["stat_warnings"]) == 1
    assert rep["stat_warnings"][0].startswith("RuntimeWarning: Precision loss")
    assert "Precision loss" not in out.stderr
    md = CliRunner().invoke(cli, ["report", "latest"])
    assert "The statistics library warned while computing these figures: RuntimeWarning: " \
           "Precision loss" in md.stdout and "Precision loss" not in md.stderr
