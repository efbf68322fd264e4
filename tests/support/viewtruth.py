"""What both halves of the view's truth tests share (tests/view/test_view_truth*.py):
stores built by hand, answers read back from their rows, page text, Chromium's flags."""

from __future__ import annotations

import os
from pathlib import Path

from support.viewstore import SCase, Side, make_store



def shots(tmp_path) -> Path:
    d = Path(os.environ.get("ABTEST_SCREENSHOTS") or tmp_path / "screens")
    d.mkdir(parents=True, exist_ok=True)
    return d

def plots_store(tmp_path):
    """60 answerable cases: B refuses 13 that A answers (higher is worse there), B's answers
    are more faithful; one case has A at 0 and B at 1."""
    cases = []
    for i in range(60):
        refuse = i < 13
        a = Side(answer=f"A answers {i}.", faith=0.0 if i == 20 else 0.7 + (i % 3) * 0.05)
        b = Side(answer="I don't know." if refuse else f"B answers {i}.",
                 faith=None if refuse else (1.0 if i == 20 else 0.9 + (i % 2) * 0.1),
                 abstained=refuse)
        cases.append(SCase(id=f"c{i:02d}", a=a, b=b, pairwise=("B", "B") if i % 2 else ("A", "A")))
    return make_store(tmp_path / "plots", {"r1": cases}), cases

def incidents_store(tmp_path, status="incomplete"):
    """34 fixture cases: A's answers to c00–c23 score below 0.85 (24 incidents in A), B's to
    c05 too (1 in B: 25 incidents in 24 cases); c30 sits exactly at 0.85 (no incident); c31's
    A judge failed and c32's B answer failed (unfinished, B scores 0.1 on c31: not counted);
    c33 never started."""
    cases = []
    for i in range(34):
        cid = f"c{i:02d}"
        a = Side(answer=f"Alpha answer number {i} about the harbour.",
                 faith=0.5 + (i % 5) * 0.05 if i < 24 else (0.85 if i == 30 else 0.95),
                 claims=[(f"claim {i} of A", "not_in_context" if i < 24 else "supported",
                          None if i < 24 else "c1")])
        b = Side(answer=f"Bravo answer number {i} about the harbour.",
                 faith=0.5 if i == 5 else (0.1 if i == 31 else 0.9),
                 claims=[(f"claim {i} of B", "supported", "c1")])
        if i == 31:
            a.judge_error = "judge timed out after 3 attempts"
        if i == 32:
            b.error = "provider 503 after 6 retries"
        cases.append(SCase(id=cid, question=f"Question {i} about the harbour?", a=a, b=b,
                           pairwise=("B", "B") if i % 3 == 0 else ("A", "B"),
                           started=i != 33))
    path = make_store(tmp_path / "inc", {"r1": cases}, status=status)
    return path, cases


def db(path, sql, params=()):
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def finished(path, run_id="r1"):
    """Finished cases from the store's rows (both answers, no answer or judge error)."""
    gens = db(path, "SELECT case_id, variant, error FROM generations WHERE run_id = ?", [run_id])
    errs = {c for c, in db(path, "SELECT case_id FROM judgments WHERE run_id = ? AND "
                                  "error IS NOT NULL", [run_id])}
    by: dict[str, list] = {}
    for c, _v, e in gens:
        by.setdefault(c, []).append(e)
    return {c for c, es in by.items() if len(es) == 2 and not any(es) and c not in errs}


def incidents_from_rows(path, run_id="r1", threshold=0.85):
    fin = finished(path, run_id)
    return {(v, c) for c, v, score in db(
        path, "SELECT case_id, subject, score FROM judgments WHERE run_id = ? AND judge = "
              "'faithfulness' AND score IS NOT NULL", [run_id])
            if c in fin and score < threshold}

def text(html):
    import html as _h
    import re


    return re.sub(r"\s+", " ", _h.unescape(re.sub(r"<[^>]+>", " ", html)))
