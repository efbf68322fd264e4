"""Write every rendering of a few varied reports to a folder, to diff two versions of abtest.

Runs the real CLI over the tests' scripted fake provider (no network, no model): a complete
run with a flipped case, a run with incidents and significant differences, an incomplete
run, a licensed claim (a complete report with its claim set), the tests' sample report, a
live run beside a frozen one, a review pack and the view's run pages. Run ids are fixed, so
two trees' outputs differ only where their code does (and in timestamps).

    PYTHONPATH=TREE python scripts/report_snapshot.py OUT_DIR [--tree TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--render-from", default=None,
                    help="a snapshot folder: render its *.json reports only (deterministic)")
    args = ap.parse_args()
    tree = Path(args.tree).resolve()
    sys.path[:0] = [str(tree), str(tree / "tests"), str(tree / "scripts")]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    import abtest

    assert Path(abtest.__file__).resolve().is_relative_to(tree), abtest.__file__
    if args.render_from:
        _rerender(Path(args.render_from), out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        _frozen(Path(tmp), out)
        _sample(tree, out)
        _live(Path(tmp), out)
    print(f"wrote {len(list(out.iterdir()))} files to {out}")


def _cli(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from abtest.cli import cli

    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def _report_all(run_id: str, name: str, out: Path, github: bool = True) -> dict:
    for fmt, ext in (("json", "json"), ("md", "md"), ("html", "html"),
                     *((("github", "github.md"),) if github else ())):
        code, text, err = _cli("report", run_id, "--format", fmt)
        assert code == 0, err
        (out / f"{name}.{ext}").write_text(text, encoding="utf-8")
    return json.loads((out / f"{name}.json").read_text(encoding="utf-8"))


def _render_dict(rep: dict, name: str, out: Path) -> None:
    """Render a report dict (not built from a store) through the public renderer, typed when
    the renderer takes the typed report."""
    from abtest import reporting

    for fmt, ext in (("md", "md"), ("html", "html"), ("github", "github.md")):
        try:
            text = reporting.render(rep, fmt)
        except (TypeError, AttributeError):
            from abtest.reporting.model import Report

            text = reporting.render(Report.model_validate(rep), fmt)
        (out / f"{name}.{ext}").write_text(text, encoding="utf-8")


def _rerender(src: Path, out: Path) -> None:
    """Every report JSON of an earlier snapshot through this tree's renderers."""
    for p in sorted(src.glob("*.json")):
        rep = json.loads(p.read_text(encoding="utf-8"))
        if rep.get("kind") == "live":
            from abtest.reporting.live import render_live

            for fmt in ("md", "html"):
                try:
                    text = render_live(rep, fmt)
                except (TypeError, AttributeError):
                    from abtest.reporting.model import LiveReport  # type: ignore[attr-defined]

                    text = render_live(LiveReport.model_validate(rep), fmt)
                (out / f"{p.stem}.{fmt}").write_text(text, encoding="utf-8")
        else:
            _render_dict(rep, p.stem, out)


def _frozen(tmp: Path, out: Path) -> None:
    try:
        from support.fakes import VARIANT_B, Brain, install, make_project
    except ImportError:      # a tree from before tests/support (the helpers sat in tests/)
        from fakes import VARIANT_B, Brain, install, make_project  # type: ignore[no-redef]

    p = make_project(tmp / "p")
    os.chdir(p)
    brain = install(Brain())
    (p / "variants" / "b.yaml").write_text(VARIANT_B + "checks:\n  must_not_say: [Normandy]\n")
    base = ["run", "--fixture", "fixtures/small", "--a", "variants/a.yaml", "--b", "variants/b.yaml"]

    # an incomplete run: generation fails on one case (an error whose text holds markup)
    def fail_q3(messages, req):
        import litellm

        if "What language" in messages[-1]["content"] and not req.get("response_format"):
            return litellm.InternalServerError("boom <b>500</b>", llm_provider="fake",
                                               model="gen")
        return None

    brain.override = fail_q3
    _cli(*base, "--run-id", "snap-incomplete")
    _report_all("snap-incomplete", "incomplete", out)
    brain.override = None
    code, _, err = _cli(*base, "--run-id", "snap-complete")
    assert code == 0, err
    rep = _report_all("snap-complete", "complete", out)
    # the review pack of that run, and the view's pages over the store
    code, _, err = _cli("review", "export", "snap-complete", "--out", str(tmp / "pack"))
    assert code == 0, err
    (out / "review.html").write_text((tmp / "pack" / "review.html").read_text(encoding="utf-8"),
                                     encoding="utf-8")
    # a licensed claim: the same report with its claim set as a licensed one reads
    lic = json.loads(json.dumps(rep))
    lic["claim"] = {"licensed": True, "reasons": [], "scope": rep["claim"].get("scope"),
                    "sentence": "Given these contexts, B (grounded) is more faithful than A "
                                "(plain): B − A = +0.250 (95% CI +0.100 to +0.400, Holm p = 0.010)."}
    _render_dict(lic, "licensed", out)

    _view(p, out)

    # significant differences, incidents in A, refusals (tests/reporting/test_verdict_real_runs)
    from reporting.test_verdict_real_runs import _cases, _override

    q = make_project(tmp / "q", cases=_cases())
    os.chdir(q)
    brain.override = _override
    code, _, err = _cli(*base, "--run-id", "snap-verdict")
    assert code == 0, err
    _report_all("snap-verdict", "verdict", out)
    brain.override = None


def _view(p: Path, out: Path) -> None:
    from starlette.testclient import TestClient

    from abtest.view.app import create_app

    app = create_app(p / "results" / "abtest.duckdb", frozenset({"127.0.0.1:8000"}))
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        for name, url in (("view-run-complete", "/runs/snap-complete"),
                          ("view-run-incomplete", "/runs/snap-incomplete"),
                          ("view-report-complete", "/runs/snap-complete/report"),
                          ("view-review", "/runs/snap-complete/review")):
            r = c.get(url)
            (out / f"{name}.html").write_text(f"<!-- status {r.status_code} -->\n{r.text}",
                                              encoding="utf-8")


def _sample(tree: Path, out: Path) -> None:
    rep = json.loads((tree / "tests" / "data" / "sample_report.json").read_text(encoding="utf-8"))
    _render_dict(rep, "sample", out)


def _live(tmp: Path, out: Path) -> None:
    try:
        from support.fakes import Brain, install, make_project
        from support.livetools import frozen_run_id, invoke_live, make_live_project, servers
    except ImportError:      # a tree from before tests/support (the helpers sat in tests/)
        from fakes import Brain, install, make_project  # type: ignore[no-redef]
        from livetools import (frozen_run_id, invoke_live,  # type: ignore[no-redef]
                               make_live_project, servers)

    p = make_project(tmp / "live")
    os.chdir(p)
    install(Brain())
    make_live_project()
    fid = frozen_run_id()
    a, b = servers()
    with a, b:
        code, _, err = invoke_live("--golden", "golden.jsonl", "--a", a.url, "--b", b.url,
                                   "--frozen-run", fid, "--retriever", "bm25@k=2",
                                   "--corpus-version", "tiny-v1", "--run-id", "snap-live")
    assert code in (0, 1), err
    for fmt in ("json", "md", "html"):
        code, text, err = _cli("report", "snap-live", "--format", fmt)
        assert code == 0, err
        (out / f"live.{fmt}").write_text(text.replace(fid, "FROZEN-RUN-ID"), encoding="utf-8")


if __name__ == "__main__":
    main()
