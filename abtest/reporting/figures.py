"""What the HTML report's templates draw from (`figures` in reporting.pages' environment): the
numbers and the geometry of its three inline SVG plots, and the rows its tables show, as plain
data; the markup is in templates/ (the plots in _plots.html). Numbers used as SVG coordinates
are validated as finite floats first.

Plots (differences are B − A):
  * ``svg#forest-plot``  — paired difference with its CI per metric, zero line;
  * ``svg#pairwise-bar`` — B wins / A wins / no preference / position-inconsistent;
  * ``svg#case-scatter`` — per-case faithfulness, A on x, B on y, with the diagonal.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from abtest.core.fmt import cost_line, interval, num, pct
from abtest.reporting.metrics import SCORE_JUDGES

# Okabe–Ito colours (colour-blind safe).
C_B = "#0072B2"      # B better / B wins
C_A = "#D55E00"      # A better / A wins
C_TIE = "#999999"
C_INCONS = "#E69F00"
C_EQUAL = "#555555"


# --------------------------------------------------------------------------- helpers


def _num(x: Any) -> float | None:
    """A finite float, or None (bools, strings, NaN and ±inf are not numbers here)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _d(obj: Any) -> dict:
    return obj if isinstance(obj, dict) else {}


def _l(obj: Any) -> list:
    return obj if isinstance(obj, list) else []


def _decimals(step: float) -> int:
    """The fewest decimals that print every multiple of `step` exactly (0.05 → 2, 0.1 → 1)."""
    for nd in range(0, 7):
        if abs(round(step, nd) - step) < 1e-9:
            return nd
    return 6


def _nice_step(span: float, target: int = 6) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def level_of(metrics: dict) -> str:
    """The CI level the metrics were computed at, as printed ('95%' at alpha 0.05)."""
    for mm in [*metrics.values(), *(metrics.get("abstention") or {}).values()]:
        if isinstance(mm, dict) and mm.get("conf_level"):
            return pct(mm["conf_level"])
    return "95%"


def live_level(r: dict) -> str:
    """The live metrics table's CI column: the level of the report's Holm alpha."""
    return f"{pct(1 - _d(r.get('holm')).get('alpha', 0.05))} CI"


# --------------------------------------------------------------------------- plots

# (key, label, +1 when a higher value is better, -1 when lower is): refusing an answerable
# question is a failure, so there B − A > 0 is worse for B
FOREST_KEYS = [
    ("pairwise", "pairwise win rate B − A", +1),
    ("faithfulness", "faithfulness", +1),
    ("coverage", "coverage", +1),
    ("quality", "quality", +1),
    ("relevance", "relevance", +1),
    ("conformance", "conformance", +1),
    ("abstention_answerable", "abstention (answerable)", -1),
    ("abstention_unanswerable", "abstention (unanswerable)", +1),
]

VERDICT = {"better": "better for B", "worse": "worse for B", "unclear": "CI includes 0"}


def for_b(d: float, lo: float, hi: float, better: int) -> str:
    """'better' / 'worse' for B when the interval excludes zero (by the metric's direction),
    else 'unclear'."""
    if lo <= 0 <= hi:
        return "unclear"
    return "better" if (d > 0) == (better > 0) else "worse"


def _metric(metrics: dict, key: str) -> dict | None:
    if key.startswith("abstention_"):
        m = _d(metrics.get("abstention")).get(key.split("_", 1)[1])
    else:
        m = metrics.get(key)
    return m if isinstance(m, dict) else None


def forest_rows(metrics: dict) -> tuple[list[dict], list[str]]:
    """Rows of the forest plot (difference and both CI limits present) and skipped metrics."""
    rows, skipped = [], []
    for key, label, better in FOREST_KEYS:
        m = _metric(metrics, key)
        if m is None:
            continue
        d, lo, hi = _num(m.get("difference")), _num(m.get("ci_low")), _num(m.get("ci_high"))
        if d is None or lo is None or hi is None:
            skipped.append(label)
            continue
        lo, hi = min(lo, hi), max(lo, hi)
        rows.append({"key": key, "label": label, "better": better,
                     "direction": "higher is better" if better > 0 else "lower is better",
                     "for_b": for_b(d, lo, hi, better), "d": d, "lo": lo, "hi": hi,
                     "n": m.get("n"),
                     "p": m.get("p_holm") if m.get("p_holm") is not None else m.get("p_value"),
                     "p_kind": "Holm p" if m.get("p_holm") is not None else "p"})
    return rows, skipped


def forest(metrics: dict) -> dict:
    """The forest plot's geometry: its size, the x scale's ticks and zero line, and per row
    its band, interval and estimate (x), colour and tooltip; `rows` is empty when no metric
    has a difference with an interval."""
    rows, skipped = forest_rows(metrics)
    lvl = level_of(metrics)
    out: dict[str, Any] = {"rows": rows, "skipped": skipped, "level": lvl}
    if not rows:
        return out
    W, left, right_w, top, row_h = 1000, 230, 310, 34, 40
    x0, x1 = left, W - right_w
    H = top + row_h * len(rows) + 44
    lo = min(min(r["lo"] for r in rows), 0.0)
    hi = max(max(r["hi"] for r in rows), 0.0)
    span = max(hi - lo, 0.1)
    lo, hi = lo - 0.06 * span, hi + 0.06 * span
    step = _nice_step(hi - lo)
    lo, hi = math.floor(lo / step) * step, math.ceil(hi / step) * step

    def sx(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * (x1 - x0)

    nd = _decimals(step)
    first = round(lo / step)
    ticks = []
    for k in range(first, min(round(hi / step), first + 50) + 1):
        t = k * step   # from its index: a summed tick drifts off its label
        ticks.append({"x": sx(t), "label": num(t, nd, signed=True) if k else "0"})
    for i, r in enumerate(rows):
        cy = top + row_h * i + row_h / 2
        # coloured by what the difference means for B: B's colour when it is better for B,
        # A's when worse (on a lower-is-better metric a positive difference is worse)
        colour = {"better": C_B, "worse": C_A}.get(r["for_b"], C_EQUAL)
        verdict = VERDICT[r["for_b"]]
        r.update(cy=cy, band=i % 2 == 0, xl=sx(r["lo"]), xh=sx(r["hi"]), xd=sx(r["d"]),
                 colour=colour, verdict_colour=colour if r["for_b"] != "unclear" else "#57606a",
                 verdict=verdict, interval=interval(r["lo"], r["hi"]),
                 tip=f"{r['label']}: B − A = {num(r['d'], signed=True)}, {lvl} CI "
                     f"{interval(r['lo'], r['hi'])}, n = {num(r['n'])}, {r['p_kind']} = "
                     f"{num(r['p'])}; {r['direction']}: {verdict}")
    out.update(W=W, H=H, left=left, right=W - right_w, top=top, row_h=row_h, x0=x0, x1=x1,
               y_axis=top + row_h * len(rows) + 6, zero=sx(0.0), ticks=ticks,
               colours={"A": C_A, "B": C_B})
    return out


def pairwise_segments(pw: dict) -> list[tuple[str, str, int, str]]:
    """(key, label, count, colour); position-inconsistent pairs are part of no_preference."""
    b, a = int(_num(pw.get("b_wins")) or 0), int(_num(pw.get("a_wins")) or 0)
    ties, inc = int(_num(pw.get("no_preference")) or 0), int(_num(pw.get("position_inconsistent")) or 0)
    inc = min(inc, ties) if ties else inc
    return [("b_wins", "B wins", b, C_B), ("a_wins", "A wins", a, C_A),
            ("no_preference", "no preference (consistent)", max(ties - inc, 0), C_TIE),
            ("position_inconsistent", "position-inconsistent", inc, C_INCONS)]


def pairwise(pw: Any) -> dict:
    """The pairwise bar's geometry: its segments (x, width, colour, count) and legend; `total`
    is 0 when the judge scored no case, `segments` empty when there is no pairwise judgment."""
    if not isinstance(pw, dict) or not pw:
        return {"segments": [], "total": 0}
    segs = pairwise_segments(pw)
    total = sum(s[2] for s in segs)
    if total == 0:
        return {"segments": segs, "total": 0}
    W, H, x0, x1, y, h = 960, 112, 20, 940, 30, 40
    x = float(x0)
    segments: list[dict[str, Any]] = []
    for key, label, n, colour in segs:
        w = (x1 - x0) * n / total
        segments.append({"key": key, "label": label, "n": n, "colour": colour, "x": x, "w": w,
                         "ink": "#ffffff" if colour in (C_A, C_B) else "#1b1f24",
                         "legend_x": x0 + len(segments) * (x1 - x0) / len(segs)})
        x += w
    return {"segments": segments, "total": total, "W": W, "H": H, "x0": x0, "y": y, "h": h,
            "labelled": 26}


def scatter_points(per_case: list) -> tuple[list[tuple[str, float, float]], int]:
    """(case_id, faithfulness A, faithfulness B) for finished cases scored on both sides."""
    pts, missing = [], 0
    for row in per_case:
        if not isinstance(row, dict) or row.get("finished") is False:
            continue
        a, b = _num(row.get("faithfulness_a")), _num(row.get("faithfulness_b"))
        if a is None or b is None:
            missing += 1
            continue
        pts.append((str(row.get("case_id")), a, b))
    return pts, missing


def scatter(per_case: Any) -> dict:
    """The scatter plot's geometry: frame, gridlines and ticks on both axes, diagonal, and the
    points (x, y, colour); `points` is empty when no finished case is scored on both sides."""
    pts, missing = scatter_points(_l(per_case))
    if not pts:
        return {"points": [], "missing": missing}
    # Zoom to the data (scores cluster near 1) on a 0.1 grid, never below 0 nor above 1, and
    # always showing 0.5 to 1; points sit inside the frame (a dot at 1.0 is whole)
    lo = math.floor((min(min(a, b) for _, a, b in pts) - 0.05) * 10 + 1e-9) / 10
    lo = min(max(lo, 0.0), 0.5)
    hi = 1.0
    S, pad_l, pad_t, pad_b, inset = 360, 56, 16, 46, 9
    W, H = pad_l + S + 24, pad_t + S + pad_b

    def sx(v: float) -> float:
        return pad_l + inset + (v - lo) / (hi - lo) * (S - 2 * inset)

    def sy(v: float) -> float:
        return pad_t + S - inset - (v - lo) / (hi - lo) * (S - 2 * inset)

    step = _nice_step(hi - lo, 5)
    nd = _decimals(step)
    ticks = []
    for k in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1):
        t = k * step   # each tick from its index: no sum drifts a gridline off its label
        ticks.append({"x": sx(t), "y": sy(t), "label": num(t, nd)})
    # each point's attributes as printed, once here (a 10,000-case report has 10,000)
    points = [SimpleNamespace(case=cid, cx=f"{sx(a):.1f}", cy=f"{sy(b):.1f}",
                              title=f"{cid}: A {num(a, 2)}, B {num(b, 2)}",
                              colour=C_B if b > a else C_A if a > b else C_EQUAL)
              for cid, a, b in pts]
    return {"points": points, "missing": missing, "W": W, "H": H, "S": S, "left": pad_l,
            "top": pad_t, "bottom": pad_t + S, "right": pad_l + S, "ticks": ticks,
            "lo": (sx(lo), sy(lo)), "hi": (sx(hi), sy(hi)), "colours": {"A": C_A, "B": C_B}}


# --------------------------------------------------------------------------- sections

SECTIONS = [("summary", "Executive summary"), ("fixture", "Fixture"), ("checks", "Checks"),
            ("metrics", "Metric scores"), ("gate", "Gate"), ("incidents", "Incidents"),
            ("remediation", "Remediation"), ("flipped", "Flipped cases"),
            ("unfinished", "Unfinished"), ("next-evaluation", "Next evaluation"),
            ("cases", "All cases")]

SHORT = {"faithfulness": "faith", "coverage": "cov", "quality": "qual", "relevance": "rel",
         "conformance": "conf"}


def cost(r: dict) -> str | None:
    """What the run cost (fmt.cost_line), None when nothing is known."""
    return cost_line(r)


def fixture_counts(r: dict) -> dict:
    """Cases by answerability and by category, as the fixture section says them."""
    cats: dict[str, int] = {}
    n_un = 0
    for row in _l(r.get("per_case")):
        row = _d(row)
        cat = str(row.get("category") or "uncategorised")
        cats[cat] = cats.get(cat, 0) + 1
        n_un += 1 if row.get("answerable") is False else 0
    n = _num(r.get("n_cases"))
    return {"answerable": f"{int(n) - n_un}" if n is not None else "n/a", "unanswerable": n_un,
            "categories": ", ".join(f"{k} {v}" for k, v in sorted(cats.items())) or "none"}


def labelled_judges(jv: dict) -> list[tuple[str, dict]]:
    """(judge, its agreement with the human labels) of each judge with labels."""
    return [(j, _d(jv.get(j))) for j in ("pairwise", "faithfulness", "coverage", "abstention")
            if _d(jv.get(j))]


def check_rows(m: dict) -> list[dict]:
    """The checks that applied to some case: name, its summary, the newly failing cases (the
    first five, '…' after them)."""
    rows = []
    for name, s in _d(m.get("checks")).items():
        s = _d(s)
        if not (s.get("n_a_applicable") or s.get("n_b_applicable") or s.get("n")):
            continue
        nf = [str(x) for x in _l(s.get("newly_failing"))]
        rows.append({"name": name, "s": s, "n_a": s.get("n_a_applicable", s.get("n")),
                     "n_b": s.get("n_b_applicable", s.get("n")),
                     "newly": ", ".join(nf[:5]) + ("…" if len(nf) > 5 else "")})
    return rows


def metric_rows(m: dict) -> list[dict]:
    """The metric table's rows: label, the metric's summary and its test's name."""
    rows: list[dict[str, Any]] = []
    for key in ("pairwise", "faithfulness", "coverage", "quality", "relevance", "conformance"):
        mm = m.get(key)
        if isinstance(mm, dict):
            rows.append({"label": key, "m": mm,
                         "test": str(mm.get("test") or "n/a").split(" ")[0]})
    for sub in ("answerable", "unanswerable"):
        mm = _d(m.get("abstention")).get(sub)
        if isinstance(mm, dict) and mm.get("n"):
            rows.append({"label": f"abstention ({sub})", "m": mm,
                         "test": "n/a" if mm.get("test") is None else mm.get("test")})
    return rows


def diff_lines(diff: Any) -> list[tuple[str, str]]:
    """(class, line) of a unified diff: hunk headers, added and removed lines marked."""
    out = []
    for line in str(diff or "").rstrip().splitlines() or ["(identical)"]:
        cls = ("hunk" if line.startswith("@@") else "add" if line.startswith("+") and
               not line.startswith("+++") else "del" if line.startswith("-") and
               not line.startswith("---") else "")
        out.append((cls, line))
    return out


def flipped(per_case: Any) -> list[dict]:
    """The cases that flipped (crossed the faithfulness threshold, or newly fail a check)."""
    return [row for row in map(_d, _l(per_case)) if row.get("flipped")]


def newly_failing(row: dict) -> str:
    """The checks B fails on a case and A does not, sorted, comma-separated."""
    return ", ".join(sorted(set(map(str, _l(row.get("checks_failed_b")))) -
                            set(map(str, _l(row.get("checks_failed_a"))))))


def case_columns(per_case: Any) -> dict:
    """The per-case table's columns: the judges scored on some case, whether abstention is
    recorded, the headers and which columns are numbers."""
    rows_in = [_d(x) for x in _l(per_case)]
    judges = [j for j in SCORE_JUDGES
              if any(f"{j}_a" in row or f"{j}_b" in row for row in rows_in)]
    has_abst = any("abstained_a" in row or "abstained_b" in row for row in rows_in)
    headers = ["case", "category", "answerable", "finished"]
    for j in judges:
        headers += [f"{SHORT[j]} A", f"{SHORT[j]} B"]
    if has_abst:
        headers += ["abst. A", "abst. B"]
    headers += ["pairwise AB / BA → outcome", "checks failed"]
    legend = (", ".join(f"{SHORT[j]} = {j}" for j in judges)
              + ("; abst. = abstained" if has_abst else ""))
    return {"rows": rows_in, "judges": judges, "abstention": has_abst, "headers": headers,
            "num_cols": list(range(4, 4 + 2 * len(judges))), "legend": legend}


def case_class(row: dict) -> str:
    """A case row's classes: unfinished (never counted), flipped."""
    return " ".join(c for c, on in (("unfinished", row.get("finished") is False),
                                    ("flipped", bool(row.get("flipped")))) if on)


def one_line(text: Any) -> str:
    """Text on one line (a question in a summary): whitespace runs collapsed."""
    return " ".join(str(text or "").split())


def live_metric_rows(m: dict) -> list[tuple[str, dict]]:
    """(label, summary) of each live metric measured."""
    ab, retr = _d(m.get("abstention")), _d(m.get("retrieval"))
    rows = []
    for label, mm in (("pairwise (win rate)", m.get("pairwise")),
                      *((k, m.get(k)) for k in ("faithfulness", "coverage", "quality", "relevance")),
                      ("refusals, answerable", ab.get("answerable")),
                      ("refusals, out of scope", ab.get("unanswerable")),
                      ("context precision", retr.get("context_precision")),
                      ("context recall", retr.get("context_recall"))):
        if _d(mm):
            rows.append((label, _d(mm)))
    return rows


def joined(items: Any, sep: str = ", ") -> str:
    """A list's items as strings, joined (a missing list: empty)."""
    return sep.join(str(x) for x in _l(items))


def _yes_no(x: Any) -> str | None:
    return None if x is None else ("yes" if x else "no")


def case_cells(cols: dict) -> list[SimpleNamespace]:
    """Each per-case row's cells as the table writes them (None where it shows a grey n/a).
    Computed here, not by macros per cell, and read as attributes (a dict's key read as
    `c.cid` costs Jinja a failed getattr first): a 10,000-case report renders 5× faster."""
    out = []
    for x in cols["rows"]:
        cid = x.get("case_id")
        has_pw = "pairwise_ab" in x or "pairwise_ba" in x
        scores = []
        for j in cols["judges"]:
            for side in ("a", "b"):
                s = num(x.get(f"{j}_{side}"), 2)
                scores.append(None if s == "n/a" else s)
        out.append(SimpleNamespace(
            cid="n/a" if cid is None else cid, cls=case_class(x),
            category=x.get("category") or "—",
            answerable=_yes_no(x.get("answerable")), finished=_yes_no(x.get("finished")),
            scores=scores,
            abst=(_yes_no(x.get("abstained_a")), _yes_no(x.get("abstained_b"))),
            pw=[("n/a" if x.get(k) is None else x.get(k))
                for k in ("pairwise_ab", "pairwise_ba", "pairwise")] if has_pw else None,
            failed_a=joined(x.get("checks_failed_a") or []) if x.get("checks_failed_a") else None,
            failed_b=joined(x.get("checks_failed_b") or []) if x.get("checks_failed_b") else None,
            question=one_line(x.get("question")) or "(no question)",
            answer_a="n/a" if x.get("answer_a") is None else x.get("answer_a"),
            answer_b="n/a" if x.get("answer_b") is None else x.get("answer_b"),
            errors=["n/a" if e is None else e for e in x.get("errors") or []]))
    return out


def _na(x: Any) -> Any:
    return "n/a" if x is None else x


def incident_cells(incidents: Any) -> list[SimpleNamespace]:
    """Each incident's fields as the incidents section writes them, computed in one pass
    (per-field lookups in the template cost ~0.9 s over a few thousand incidents)."""
    out = []
    for inc in map(_d, _l(incidents)):
        context = inc.get("context")
        out.append(SimpleNamespace(
            case_id=_na(inc.get("case_id")), variant=_na(inc.get("variant")),
            faithfulness=num(inc.get("faithfulness"), 2), question=_na(inc.get("question")),
            unsupported=[(_na(u.get("verdict")), _na(u.get("claim")))
                         for u in map(_d, _l(inc.get("unsupported"))[:10])],
            context=[(_na(ch.get("id")), _na(ch.get("text"))) for ch in map(_d, _l(context))]
            if context else None,
            context_ids=joined(inc.get("context_ids")) or "(none)",
            answer=inc.get("answer")))
    return out


def flipped_cells(per_case: Any) -> list[SimpleNamespace]:
    """The flipped cases' table cells (scores None where the table shows a grey n/a)."""
    out = []
    for x in flipped(per_case):
        fa, fb = num(x.get("faithfulness_a"), 2), num(x.get("faithfulness_b"), 2)
        out.append(SimpleNamespace(cid=_na(x.get("case_id")), fa=None if fa == "n/a" else fa,
                                   fb=None if fb == "n/a" else fb,
                                   pairwise=x.get("pairwise") or "", newly=newly_failing(x)))
    return out


# --------------------------------------------------------------------------- sequential runs

SEQUENCE_METRICS = (("faithfulness", "Faithfulness B − A", "futility"),
                    ("coverage", "Coverage B − A", "coverage"),
                    ("abstention_answerable", "Refusals on answerable cases B − A",
                     "abstention_answerable"),
                    ("abstention_unanswerable", "Correct abstention on unanswerable cases B − A",
                     "abstention_unanswerable"))


def sequences(seq: dict, margins: dict | None = None) -> list[dict]:
    """One chart per claim metric that has an interval: faithfulness with ±futility, the
    non-inferiority metrics with their margin (the side the condition reads), each guide
    labelled with what it is."""
    out = []
    for metric, title, guide in SEQUENCE_METRICS:
        if guide == "futility":
            fut = _num((seq or {}).get("futility")) or 0.0
            lines = [(fut, f"futility +{num(fut, 2)}"), (-fut, f"futility −{num(fut, 2)}")] \
                if fut else []
        else:
            m = _num((margins or {}).get(guide))
            lines = [] if m is None else [(m, f"margin +{num(m, 2)}")
                                          if guide == "abstention_answerable"
                                          else (-m, f"margin −{num(m, 2)}")]
        g = sequence(seq, metric, lines)
        if g["points"]:
            g["title"] = title
            out.append(g)
    return out


def sequence(seq: dict, metric: str = "faithfulness",
             guides: list[tuple[float, str]] | None = None) -> dict:
    """The sequence chart's geometry: per look (x: groups taken) the metric's anytime-valid
    interval (a band) and its estimate (a line); the y axis with ticks and gridlines, the zero
    line, the x axis with ticks, and the labelled guide lines (±futility, or the margin);
    `points` is empty before the first look with an interval. Its width follows the page."""
    pts = []
    for lk in (seq or {}).get("looks") or []:
        s = ((lk.get("sequences") or {}).get(metric) or {})
        lo, hi, d = _num(s.get("ci_low")), _num(s.get("ci_high")), _num(s.get("mean"))
        if lo is not None and hi is not None and d is not None:
            pts.append({"look": lk.get("look"), "units": lk.get("units") or 0, "lo": lo,
                        "hi": hi, "d": d, "stop": lk.get("stop")})
    out: dict[str, Any] = {"points": pts, "metric": metric}
    if not pts:
        return out
    W, H, left, right, top, bottom = 1000, 280, 70, 130, 16, 44
    if guides is None:
        fut = _num((seq or {}).get("futility")) or 0.0
        guides = [(fut, f"futility +{num(fut, 2)}"), (-fut, f"futility −{num(fut, 2)}")] \
            if fut else []
    values = [g for g, _ in guides]
    lo = float(min([p["lo"] for p in pts] + values + [0.0]))
    hi = float(max([p["hi"] for p in pts] + values + [0.0]))
    step = _nice_step(max(hi - lo, 0.1))
    lo, hi = math.floor(lo / step - 0.25) * step, math.ceil(hi / step + 0.25) * step
    x_max = max(p["units"] for p in pts) or 1

    def sx(u: float) -> float:
        return left + (u / x_max) * (W - left - right)

    def sy(v: float) -> float:
        return top + (hi - v) / (hi - lo) * (H - top - bottom)

    nd = _decimals(step)
    first = round(lo / step)
    y_ticks = [{"y": sy(k * step), "label": num(k * step, nd, signed=True) if k else "0"}
               for k in range(first, min(round(hi / step), first + 40) + 1)]
    x_step = max(1, int(_nice_step(x_max)))
    x_ticks = [{"x": sx(u), "label": str(u)} for u in range(0, x_max + 1, x_step)]
    for p in pts:
        p.update(x=sx(p["units"]), y=sy(p["d"]), ylo=sy(p["lo"]), yhi=sy(p["hi"]),
                 tip=f"look {p['look']}, {p['units']} groups: B − A = "
                     f"{num(p['d'], signed=True)}, anytime-valid interval "
                     f"{interval(p['lo'], p['hi'])}" + (f"; stop: {p['stop']}" if p["stop"] else ""))
    band = ([f"{p['x']:.1f},{p['yhi']:.1f}" for p in pts]
            + [f"{p['x']:.1f},{p['ylo']:.1f}" for p in reversed(pts)])
    out.update(W=W, H=H, left=left, right=W - right, top=top, bottom=H - bottom,
               zero=sy(0.0), guides=[{"y": sy(g), "label": label} for g, label in guides],
               y_ticks=y_ticks, x_ticks=x_ticks,
               band=" ".join(band), line=" ".join(f"{p['x']:.1f},{p['y']:.1f}" for p in pts),
               y_lo=lo, y_hi=hi, x_max=x_max, colour=C_B)
    return out
