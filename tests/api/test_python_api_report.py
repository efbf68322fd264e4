"""A report in a notebook and as an object (issue 45, items 7 and 5): a glance under 2 KB
(`_repr_markdown_`, `_repr_html_`) and a short `repr()`, `abtest.compare`, and the report's
own renderers, equal to what the CLI prints. All against one real run of 40 cases through the
in-process fake provider."""

from __future__ import annotations

import html
import re

import pytest

import abtest
from support.fakes import Brain, install, make_project, many_cases


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """(project folder, config path, run handle) of a finished 40-case run."""
    install(Brain())
    p = make_project(tmp_path_factory.mktemp("rep") / "p", many_cases(40))
    cfg = str(p / "abtest.yaml")
    h = abtest.run(p / "fixtures" / "small", p / "variants" / "a.yaml",
                   p / "variants" / "b.yaml", config=cfg, run_id="r1")
    assert h.status == "complete"
    return p, cfg, h


def _rows(r: dict) -> list[tuple[str, float | None, float | None]]:
    """(metric, A, B) of every main metric, straight from the report's JSON."""
    m = r["metrics"]
    out = [(k, m[k]["a"], m[k]["b"]) for k in ("pairwise", "faithfulness", "coverage",
                                               "quality", "relevance", "conformance") if m.get(k)]
    return out + [(f"abstention ({s})", m["abstention"][s]["a"], m["abstention"][s]["b"])
                  for s in ("answerable", "unanswerable")
                  if (m.get("abstention") or {}).get(s, {}).get("n")]


def test_a_notebook_shows_a_glance_under_2_kb_and_repr_is_one_short_line(real):
    p, cfg, h = real
    rep = h.report()
    r = rep.model_dump(mode="json")
    assert len(rep.model_dump_json()) > 20_000          # what the cell used to print
    for shown, unescape in ((rep._repr_markdown_(), str), (rep._repr_html_(), html.unescape)):
        assert len(shown.encode()) < 2048, len(shown.encode())
        text = unescape(re.sub(r"<[^>]+>", " ", shown))
        # the verdict sentence, the gate, N cases and groups
        lead = "Licensed claim:" if r["claim"]["licensed"] else "No claim is licensed."
        assert lead in text
        if not r["claim"]["licensed"]:
            assert r["claim"]["reasons"][0][:60] in text
        assert f"Gate: {r['gate']['decision']}" in " ".join(text.split()).replace("**", "")
        assert f"{r['n_finished']} of {r['n_cases']} cases finished" in text
        assert f"{r['groups']['n_groups']} groups" in text
        # every main metric with A and B as the report has them
        rows = _rows(r)
        assert len(rows) >= 3
        for name, a, b in rows:
            line = next(ln for ln in re.split(r"\n|</tr>", shown)
                        if re.match(rf"(\| |<tr><td>){re.escape(name)} ", ln + " ")
                        or f"<td>{name}</td>" in ln)
            cells = [c.strip() for c in re.split(r"\||</?t[dhr]>|</?table>", line) if c.strip()]
            assert cells[2:4] == [f"{a:.3f}", f"{b:.3f}"], (name, cells)
    rp = repr(rep)
    assert len(rp) < 300 and "\n" not in rp
    assert f"run='{r['run_id']}'" in rp and f"status='{r['status']}'" in rp
    assert f"gate='{r['gate']['decision']}'" in rp and f"cases='{r['n_finished']} of {r['n_cases']} cases finished'" in rp


def _cli(p, *args):
    from click.testing import CliRunner

    from abtest.cli import cli

    r = CliRunner().invoke(cli, ["--config", str(p / "abtest.yaml"), *args])
    assert r.exit_code == 0, r.stderr
    return r.stdout


def test_a_report_renders_as_the_cli_prints_it(real):
    p, cfg, h = real
    rep = h.report()
    for fmt, text in (("md", rep.to_markdown()), ("json", rep.to_json()),
                      ("html", rep.to_html())):
        out = _cli(p, "report", h.run_id, "--format", fmt)
        # each build stamps its own time; everything else is the same document
        out = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+(\+00:00|Z)?", "T", out)
        assert re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+(\+00:00|Z)?", "T", text) == out, fmt
        assert rep.run_id in text and len(text) > 2000
    assert abtest.Report.model_validate_json(rep.to_json()).run_id == rep.run_id


def test_compare_is_typed_and_says_what_abtest_compare_says(real):
    p, cfg, h = real
    # a second run whose B is the plain prompt under another name: it flips cases
    (p / "variants" / "b2.yaml").write_text((p / "variants" / "a.yaml").read_text()
                                            .replace("name: plain", "name: plain-too"))
    h2 = abtest.run(p / "fixtures" / "small", p / "variants" / "a.yaml",
                    p / "variants" / "b2.yaml", config=cfg, run_id="r2")
    cmp = abtest.compare(h.run_id, h2.run_id, config=cfg)
    assert isinstance(cmp, abtest.Comparison) and len(repr(cmp)) < 200
    assert all(isinstance(c, abtest.CaseChange) for c in cmp.cases)
    # expected from the two reports' per-case rows, independently of the comparison code
    by1 = {c.case_id: c for c in h.report().per_case}
    by2 = {c.case_id: c for c in h2.report().per_case}
    assert cmp.n_cases == len(by1) == 40
    want = sorted(c for c in by1 if by1[c].pairwise != by2[c].pairwise)
    assert cmp.flipped == want and want
    one = next(c for c in cmp.cases if c.case_id == want[0])
    assert (one.outcome_1, one.outcome_2) == (by1[want[0]].pairwise, by2[want[0]].pairwise)
    assert cmp.run_1["run_id"] == "r1" and cmp.run_2["variants"]["b"]["name"] == "plain-too"
    assert cmp.to_json() == _cli(p, "compare", "r1", "r2", "--format", "json")
    assert cmp.to_text() == _cli(p, "compare", "r1", "r2")
    assert cmp.to_text(changed_only=True) == _cli(p, "compare", "r1", "r2", "--changed-only")
