"""`abtest review export|import|status` round trip through the CLI validates the judge."""

from __future__ import annotations

import csv
import json
from pathlib import Path


from abtest import review as R
from abtest.store import Store
from support.review_data import _blind


def _cli(*args):
    from click.testing import CliRunner

    from abtest.cli import cli

    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def _fill_labels_csv(src: Path, dst: Path, truth: dict[str, str], only=None) -> int:
    """Copy the pack's labels.csv with the blind label of each item (of `only`, if given)."""
    with open(src, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    k = 0
    for r in rows:
        if only is None or r["item_id"] in only:
            r["label"] = truth[r["item_id"]]
            k += 1
    with open(dst, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return k


def test_cli_review_round_trip_validates_the_judge(project):
    """run → review export → labels.csv filled with the judge's own verdicts (blind space)
    → review import → status → report: each judge's validation reason goes once enough of
    its own labels agree.

    The report (and `review status`) read review.min_labels from the run's stored config,
    so the threshold is set in abtest.yaml before `abtest run`."""
    from support.fakes import Brain, install

    brain = install(Brain())
    plain_cov = brain.j_coverage

    def coverage(prompt):  # A's answer to q2 (no citation) misses its key point
        out = plain_cov(prompt)
        if "Rollo" in prompt and "[c2]" not in prompt:
            out = {"points": {k: False for k in out["points"]}}
        return out

    brain.j_coverage = coverage
    n_min = 5
    cfg = project / "abtest.yaml"
    cfg.write_text(cfg.read_text() + f"review: {{min_labels: {n_min}}}\n")
    code, out, err = _cli("run", "--fixture", "fixtures/small", "--a", "variants/a.yaml",
                          "--b", "variants/b.yaml")
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]

    code, out, err = _cli("review", "export", run_id, "--out", "pack")
    assert code == 0, err
    assert [Path(p).name for p in out.split()] == list(R.PACK_FILES)

    # the answer key: the judge's own label, mapped into the pack's blind space
    with Store(project / "results" / "abtest.duckdb", read_only=True) as s:
        items = {r["item_id"]: {**r, "m": json.loads(r["mapping_json"])} for r in s.review_items(run_id)}
    truth = {iid: _blind(it, it["judge_label"]) for iid, it in items.items()}
    from collections import Counter

    by_judge = Counter((it["judge"], it["judge_label"]) for it in items.values())
    # fake judge: B wins q1-q3 in both orders, q4 ties; q1-q3 claims supported, A's q4 not
    # (B's q4 is a refusal: no claim); key points of q1-q3 covered except A's q2; only B's
    # q4 answer abstains
    assert by_judge == {("pairwise", "B"): 3, ("pairwise", "tie"): 1,
                        ("faithfulness", "supported"): 6, ("faithfulness", "unsupported"): 1,
                        ("coverage", "covered"): 5, ("coverage", "not_covered"): 1,
                        ("abstention", "answered"): 7, ("abstention", "abstained"): 1}
    assert {truth[i] for i, it in items.items() if it["judge_label"] == "B"} <= {"1", "2"}

    # phase 1: fewer labels than review.min_labels for every judge
    first = {next(i for i, it in sorted(items.items()) if it["judge_label"] == lab)
             for lab in ("B", "tie", "supported", "unsupported", "covered", "not_covered",
                         "abstained", "answered")}
    few = _fill_labels_csv(project / "pack" / "labels.csv", project / "few.csv", truth, first)
    assert few == 8
    code, out, err = _cli("review", "import", run_id, "few.csv", "--reviewer", "alice")
    assert code == 0, err
    assert out.strip() == "imported 8 label(s)"
    code, out, err = _cli("review", "status", run_id, "--format", "json")
    assert code == 0, err
    st = json.loads(out)
    assert (st["n_items"], st["n_labelled_items"]) == (25, 8)
    assert (st["min_labels"], st["validated"]) == (n_min, False)
    for j in ("pairwise", "faithfulness", "coverage", "abstention"):
        assert st["validation"][j]["n_labels"] == 2 and st["validation"][j]["kappa"] == 1.0
        assert not st["validation"][j]["validated"]
    assert st["reviewers"] == ["alice"]
    code, out, err = _cli("report", run_id, "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["judge_validation"]["validated"] is False
    assert rep["judge_validation"]["faithfulness"]["n_labels"] == 2
    assert {r.split(":")[0] for r in rep["claim"]["reasons"] if "judge not validated" in r} == {
        "faithfulness judge not validated", "coverage judge not validated",
        "abstention judge not validated"}

    # phase 2: every item labelled (re-importing alice's eight replaces them)
    n_all = _fill_labels_csv(project / "pack" / "labels.csv", project / "all.csv", truth)
    assert n_all == len(items) == 25
    code, out, err = _cli("review", "import", run_id, "all.csv", "--reviewer", "alice")
    assert code == 0, err
    assert out.strip() == "imported 25 label(s)"
    code, out, err = _cli("review", "status", run_id, "--format", "json")
    assert code == 0, err
    st = json.loads(out)
    assert (st["n_labelled_items"], st["n_unlabelled_items"]) == (25, 0)
    assert st["by_judge"] == {"pairwise": {"items": 4, "labelled_items": 4, "labels": 4},
                              "faithfulness": {"items": 7, "labelled_items": 7, "labels": 7},
                              "coverage": {"items": 6, "labelled_items": 6, "labels": 6},
                              "abstention": {"items": 8, "labelled_items": 8, "labels": 8}}
    assert st["validated"] is True
    # pairwise has 4 < 5 labels: reported, not part of the claim
    assert st["validation"]["pairwise"]["validated"] is False
    code, out, err = _cli("report", run_id, "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    val = rep["judge_validation"]
    assert val["validated"] is True and val["min_labels"] == n_min
    for j, n in (("faithfulness", 7), ("coverage", 6), ("abstention", 8)):
        assert val[j]["validated"] and val[j]["n_labels"] == n and val[j]["kappa"] == 1.0
    assert not any("judge not validated" in r for r in rep["claim"]["reasons"])
    with Store(project / "results" / "abtest.duckdb", read_only=True) as s:
        stored = s.human_labels(run_id)
    assert len(stored) == 25 and {lab["reviewer"] for lab in stored} == {"alice"}
    assert all(lab["label"] == items[lab["item_id"]]["judge_label"] for lab in stored)
