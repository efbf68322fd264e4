"""HTML report: escaping, inline SVG plots, None handling, self-containedness.

The fast tests parse the page as XML (the renderer emits well-formed XHTML-style
markup), so an unescaped ``</td>`` or ``<script>`` from an answer would break the parse
or show up as an element. The ``chromium`` test renders the page in headless Chromium
and checks the DOM the browser actually built.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from support.browser import CHROMIUM, chromium_cli as _chromium

from abtest.reporting.html import render_html
from support.fakes import ROOT
from support.fakes import DATA as TEST_DATA

DATA = TEST_DATA / "sample_report.json"


@pytest.fixture(scope="module")
def sample() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def page(sample) -> str:
    return render_html(sample)


def parse(html_text: str) -> ET.Element:
    assert html_text.startswith("<!DOCTYPE html>\n")
    return ET.fromstring(html_text.split("\n", 1)[1])


def by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(tag) if cls in (e.get("class") or "").split()]


def svg(root: ET.Element, svg_id: str) -> ET.Element | None:
    return next((e for e in root.iter("svg") if e.get("id") == svg_id), None)


def text_of(root: ET.Element) -> str:
    return "".join(root.itertext())


# --------------------------------------------------------------------------- sample sanity


def test_sample_report_has_the_contract_keys(sample):
    for key in ("schema_version", "run_id", "status", "n_cases", "n_finished", "unfinished_cases",
                "fixture", "variants", "models", "comparison_kind", "pipeline_reasons",
                "self_judge", "judge_validation", "metrics", "holm", "incidents", "claim",
                "taxonomy", "remediation", "per_case", "flipped", "gate", "calls", "prompt_diff"):
        assert key in sample, key
    m = sample["metrics"]
    assert {"answerable", "unanswerable"} <= set(m["abstention"])
    assert "position_consistency" in m["pairwise"]
    assert len(sample["per_case"]) == 12 and len(sample["incidents"]) == 1
    assert any("<script>" in (r.get("answer_a") or "") for r in sample["per_case"])
    assert any("</td>" in (r.get("answer_b") or "") for r in sample["per_case"])


# --------------------------------------------------------------------------- structure


def test_page_is_well_formed_and_has_all_sections_in_order(page):
    root = parse(page)
    ids = [s.get("id") for s in root.iter("section")]
    assert ids == ["summary", "fixture", "checks", "metrics", "gate", "incidents", "remediation",
                   "flipped", "unfinished", "next-evaluation", "cases"]
    headings = [text_of(h) for h in root.iter("h2")]
    assert headings[0] == "Executive summary"
    assert "Next evaluation date" in headings
    assert root.find(".//h1") is not None and "run r-20250611-<demo>&1" in text_of(root.find(".//h1"))


def test_escaping_of_report_text(page):
    # nothing from the data becomes a tag
    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    assert "</td><td>injected" not in page
    assert "<b>90-day</b>" not in page
    assert "<html>502" not in page
    # ... but the text is there, escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;/td&gt;&lt;td&gt;injected" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "grounded&lt;cite&gt;" in page
    assert "r-20250611-&lt;demo&gt;&amp;1" in page
    assert "claude-3-5-sonnet-&lt;new&gt;" in page
    root = parse(page)
    assert not list(root.iter("script")) and not list(root.iter("img"))
    # the escaped answer reads back as the original text inside its collapsed <details>
    answers = [text_of(d) for d in root.iter("div") if "answer-a" in (d.get("class") or "")]
    assert "Yes. <script>alert(1)</script> Latency is under 200 ms." in answers


def test_attribute_values_are_escaped():
    r = json.loads(DATA.read_text(encoding="utf-8"))
    evil = 'x" onmouseover="alert(3)'
    r["per_case"][0]["case_id"] = evil
    out = render_html(r)
    assert 'onmouseover="alert(3)' not in out
    root = parse(out)
    assert any(c.get("data-case") == evil for c in by_class(root, "circle", "case-point"))
    for el in root.iter():
        assert "onmouseover" not in el.attrib


def test_no_external_resources(page):
    assert not re.search(r"""(?:src|href|action|xlink:href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", page, re.I)
    assert "@import" not in page
    root = parse(page)
    for el in root.iter():
        for attr in ("src", "href"):
            v = el.get(attr)
            if v is not None:
                assert v.startswith("#"), (el.tag, attr, v)
    assert not list(root.iter("link"))
    csp = [m for m in root.iter("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0].get("content")


def test_forest_plot_rows(page, sample):
    root = parse(page)
    forest = svg(root, "forest-plot")
    assert forest is not None
    rows = by_class(forest, "g", "forest-row")
    assert [g.get("data-metric") for g in rows] == [
        "pairwise", "faithfulness", "coverage", "quality", "abstention_answerable",
        "abstention_unanswerable"]
    zero = [e for e in forest.iter("line") if e.get("id") == "forest-zero"]
    assert len(zero) == 1
    # the pairwise row is B's win rate minus A's, with its CI on the same scale
    pw = sample["metrics"]["pairwise"]
    row_text = text_of(rows[0])
    assert f"{pw['difference']:+.3f}" in row_text
    assert f"{pw['ci_low']:.3f}" in row_text and f"{pw['ci_high']:.3f}" in row_text
    # whiskers enclose the estimate and the zero line sits inside the axis
    for g in rows:
        ci = by_class(g, "line", "ci")[0]
        est = by_class(g, "rect", "estimate")[0]
        cx = float(est.get("x")) + float(est.get("width")) / 2
        assert float(ci.get("x1")) <= cx + 0.2 and cx - 0.2 <= float(ci.get("x2"))


def test_pairwise_bar(page, sample):
    root = parse(page)
    bar = svg(root, "pairwise-bar")
    assert bar is not None
    segs = {g.get("data-outcome"): int(g.get("data-count")) for g in by_class(bar, "g", "pw-seg")}
    pw = sample["metrics"]["pairwise"]
    assert segs == {"b_wins": pw["b_wins"], "a_wins": pw["a_wins"],
                    "no_preference": pw["no_preference"] - pw["position_inconsistent"],
                    "position_inconsistent": pw["position_inconsistent"]}
    assert sum(segs.values()) == pw["n"]
    widths = [float(r.get("width")) for g in by_class(bar, "g", "pw-seg") for r in g.iter("rect")]
    assert abs(sum(widths) - 920) < 1          # the stacked bar fills its track
    assert f"B wins: {pw['b_wins']}" in text_of(bar)


def test_case_scatter(page, sample):
    root = parse(page)
    sc = svg(root, "case-scatter")
    assert sc is not None
    pts = by_class(sc, "circle", "case-point")
    expected = [r["case_id"] for r in sample["per_case"] if r["finished"]
                and r.get("faithfulness_a") is not None and r.get("faithfulness_b") is not None]
    assert [p.get("data-case") for p in pts] == expected and len(expected) == 7
    assert any(e.get("id") == "scatter-diagonal" for e in sc.iter("line"))
    # B above the diagonal is higher up (smaller y); c05 (B 0.60 < A 0.92) is below it
    p05 = next(p for p in pts if p.get("data-case") == "c05")
    p01 = next(p for p in pts if p.get("data-case") == "c01")
    assert float(p05.get("cy")) > float(p01.get("cy"))
    assert float(p05.get("cx")) > float(p01.get("cx"))


def test_per_case_table_collapses_answers(page, sample):
    root = parse(page)
    table = by_class(root, "table", "per-case")[0]
    bodies = by_class(table, "tbody", "case")
    assert [b.get("data-case") for b in bodies] == [r["case_id"] for r in sample["per_case"]]
    for b in bodies:
        det = list(b.iter("details"))
        assert len(det) == 1 and det[0].get("open") is None
        assert by_class(det[0], "div", "answer-a") and by_class(det[0], "div", "answer-b")
    c12 = bodies[-1]
    assert "unfinished" in (next(c12.iter("tr")).get("class") or "")
    assert "judge returned invalid JSON" in text_of(c12)


def test_none_values_render_as_na(page):
    root = parse(page)
    table = by_class(root, "table", "per-case")[0]
    c10 = next(b for b in by_class(table, "tbody", "case") if b.get("data-case") == "c10")
    cells = [text_of(td) for td in next(c10.iter("tr")).iter("td")]
    assert cells[4:8] == ["n/a", "n/a", "n/a", "n/a"]       # faith A/B, cov A/B
    metrics = by_class(root, "table", "metrics")[0]
    quality = next(tr for tr in metrics.iter("tr") if text_of(tr).startswith("quality"))
    assert text_of(list(quality.iter("td"))[-1]) == "n/a"   # quality is outside the Holm family
    gate = next(s for s in root.iter("section") if s.get("id") == "gate")
    assert "n/a" in text_of(gate) and "None" not in text_of(gate)
    assert "None" not in text_of(root.find(".//main"))


def test_missing_metrics_are_skipped_gracefully(sample):
    r = copy.deepcopy(sample)
    del r["metrics"]["pairwise"]
    r["metrics"]["coverage"]["ci_low"] = None                 # no CI → no row, but a note
    r["metrics"]["abstention"]["unanswerable"] = {"metric": "abstention_unanswerable", "n": 0,
                                                  "a": None, "b": None, "difference": None,
                                                  "ci_low": None, "ci_high": None,
                                                  "test": "mcnemar_midp", "p_value": None,
                                                  "p_holm": None, "note": "no cases in this subset"}
    del r["metrics"]["quality"]
    r["metrics"]["conformance"] = None
    out = render_html(r)
    root = parse(out)
    assert svg(root, "pairwise-bar") is None
    assert any(p.get("id") == "pairwise-missing" for p in root.iter("p"))
    forest = svg(root, "forest-plot")
    assert [g.get("data-metric") for g in by_class(forest, "g", "forest-row")] == [
        "faithfulness", "abstention_answerable"]
    assert "Not plotted (no difference or no CI): coverage, abstention (unanswerable)" in out
    assert "sign test" not in text_of(next(s for s in root.iter("section")
                                           if s.get("id") == "summary"))


def test_no_scores_at_all():
    """A bare report (nothing measured, nothing judged) still renders every section."""
    r = {"run_id": "empty", "status": "incomplete", "n_cases": 0, "n_finished": 0,
         "unfinished_cases": [], "metrics": {}, "per_case": [], "incidents": [],
         "remediation": [], "claim": {"licensed": False, "reasons": ["nothing measured"]}}
    out = render_html(r)
    root = parse(out)
    assert svg(root, "forest-plot") is None and svg(root, "case-scatter") is None
    assert svg(root, "pairwise-bar") is None
    ids = {p.get("id") for p in root.iter("p")}
    assert {"forest-missing", "pairwise-missing", "scatter-missing"} <= ids
    assert len(list(root.iter("section"))) == 11


def test_licensed_claim_and_banners(sample):
    r = copy.deepcopy(sample)
    r["claim"] = {"licensed": True, "sentence": "Given these contexts, B <won>.", "reasons": []}
    r["self_judge"] = True
    r["comparison_kind"] = "pipeline_change"
    r["pipeline_reasons"] = ["retriever changed: bm25 → <dense>"]
    out = render_html(r)
    assert "Licensed claim:" in out and "B &lt;won&gt;." in out
    assert "self-judging" in out and "re-measure end to end" in out
    assert "bm25 → &lt;dense&gt;" in out


def test_non_numeric_values_do_not_reach_svg_coordinates(sample):
    r = copy.deepcopy(sample)
    r["metrics"]["faithfulness"]["difference"] = "0.1\"/><script>x</script>"
    r["per_case"][0]["faithfulness_a"] = float("nan")
    r["per_case"][1]["faithfulness_b"] = True
    out = render_html(r)
    root = parse(out)
    assert "<script" not in out
    rows = by_class(svg(root, "forest-plot"), "g", "forest-row")
    assert "faithfulness" not in [g.get("data-metric") for g in rows]
    assert len(by_class(svg(root, "case-scatter"), "circle", "case-point")) == 5


def test_judge_validation_per_judge_and_length_caveat(page, sample):
    root = parse(page)
    box = next(e for e in root.iter("div") if e.get("id") == "judge-validation")
    rows = [[text_of(td) for td in tr.iter("td")] for tr in box.iter("tr")][1:]
    assert [r[0] for r in rows] == ["pairwise", "faithfulness", "coverage", "abstention"]
    assert [r[1] for r in rows] == ["no", "yes", "yes", "yes"]
    assert rows[1][4] == "validated" and rows[2][4].startswith("not validated")
    assert "< 0.6 <judge>" in rows[2][4]  # escaped text, no element built from it
    assert not any(e.tag == "judge" for e in box.iter())
    cav = next(e for e in root.iter("div") if e.get("id") == "length-caveat")
    assert "cannot be separated from answer length" in text_of(cav)
    assert not any(e.tag == "i" for e in cav.iter())
    assert "abstained <b>x</b> 3" in text_of(root) and "does not hold" in text_of(root)


def test_withheld_estimates_banner(sample):
    r = copy.deepcopy(sample)
    r["metrics"], r["status"] = {}, "incomplete"
    r["estimates_withheld"] = "incomplete run: 2 case(s) unfinished; no metric <x>"
    root = parse(render_html(r))
    w = next(e for e in root.iter("div") if e.get("id") == "withheld")
    assert "no metric <x>" in text_of(w)


def test_render_dispatch(sample):
    from abtest.reporting import render

    assert render(sample, "html") == render_html(sample)


# --------------------------------------------------------------------------- chromium


@pytest.mark.chromium
@pytest.mark.skipif(not CHROMIUM.exists(),
                    reason="/usr/bin/chromium not installed (CI installs Debian 'chromium')")
def test_chromium_renders_the_plots(page, sample, tmp_path):
    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")
    proc = _chromium(["--dump-dom", report.as_uri()], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert "<svg" in dom, proc.stderr[-2000:]
    for svg_id in ("forest-plot", "pairwise-bar", "case-scatter"):
        assert re.search(rf'<svg[^>]*\bid="{svg_id}"', dom), svg_id
    points = re.findall(r'<circle[^>]*\bclass="case-point"[^>]*>', dom)
    assert len(points) == 7
    assert len(re.findall(r'<g[^>]*\bclass="forest-row"', dom)) == 6
    assert len(re.findall(r'<details\b', dom)) == len(sample["per_case"]) + len(sample["incidents"])
    # the browser built no element from report text
    assert "<script" not in dom.lower() and "<img" not in dom.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert "injected cell" in dom and "<td>injected" not in dom
    # the per-judge validation table and the length caveat, as the browser built them
    jv = dom.split('id="judge-validation"')[1].split("</table>")[0]
    assert len(re.findall(r"<tr\b", jv)) == 5 and "not validated" in jv
    assert "&lt;judge&gt;" in jv and "<judge>" not in jv
    assert re.search(r'id="length-caveat"[^>]*>.*cannot be separated from answer length', dom)


@pytest.mark.chromium
@pytest.mark.skipif(not CHROMIUM.exists(),
                    reason="/usr/bin/chromium not installed (CI installs Debian 'chromium')")
def test_screenshot_script(page, tmp_path):
    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")
    out = tmp_path / "shot" / "report.png"
    script = ROOT / "scripts" / "screenshot_report.sh"
    proc = subprocess.run(["bash", str(script), str(report), str(out)], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1200, 2400)


def test_compiled_templates_are_kept_and_a_cache_that_cannot_be_kept_costs_only_a_compile(
        monkeypatch, tmp_path):
    """Jinja's bytecode cache (core.pages._compiled) saves each later process the
    templates' compile; a temporary directory that is not the user's own, or a disk that
    cannot be written, must never stop a report."""
    import tempfile

    import jinja2

    from abtest.core import pages

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cache = pages._compiled()
    assert cache is not None and cache.directory.startswith(str(tmp_path))
    env = jinja2.Environment(loader=jinja2.DictLoader({"t": "{{ x }}!"}), bytecode_cache=cache,
                             autoescape=True)
    assert env.get_template("t").render(x="<b>") == "&lt;b&gt;!"
    kept = list(Path(cache.directory).glob("__jinja2_*.cache"))
    assert len(kept) == 1
    fresh = jinja2.Environment(loader=jinja2.DictLoader({"t": "{{ x }}!"}), bytecode_cache=cache,
                               autoescape=True)
    seen = []
    monkeypatch.setattr(fresh, "_compile", lambda *a: seen.append(a) or None)
    assert fresh.get_template("t").render(x="y") == "y!" and not seen  # loaded, not compiled

    def unwritable(*a, **k):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", unwritable)
    other = jinja2.Environment(loader=jinja2.DictLoader({"u": "{{ x }}?"}), bytecode_cache=cache)
    assert other.get_template("u").render(x=1) == "1?"

    def not_own(self):
        raise RuntimeError("Cannot determine safe temp directory.")

    monkeypatch.setattr(jinja2.FileSystemBytecodeCache, "_get_default_cache_dir", not_own)
    assert pages._compiled() is None
