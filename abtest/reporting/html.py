"""Self-contained HTML report: the Markdown sections plus three inline SVG plots.

One file, no external CSS/JS/fonts/images and no script at all: the page is fully
readable offline and in any browser. Every value taken from the report dict goes
through ``esc`` (``html.escape(..., quote=True)``) before it reaches the page; numbers
used as SVG coordinates are validated as finite floats first. The output is also
well-formed XML (void elements self-closed, only XML character references), which the
tests use to check that no answer text can break the document structure.

Plots (differences are B − A):
  * ``svg#forest-plot``  — paired difference with its CI per metric, zero line;
  * ``svg#pairwise-bar`` — B wins / A wins / no preference / position-inconsistent;
  * ``svg#case-scatter`` — per-case faithfulness, A on x, B on y, with the diagonal.
"""

from __future__ import annotations

import math
import re
from html import escape as _escape
from typing import TYPE_CHECKING, Any, Iterable

from ..fmt import cost_line, interval, num, pct
from . import notes
from .pages import macro
from .metrics import SCORE_JUDGES
from .model import json_shape

if TYPE_CHECKING:
    from .model import LiveReport, Report


def level_of(metrics: dict) -> str:
    """The CI level the metrics were computed at, as printed ('95%' at alpha 0.05)."""
    for mm in [*metrics.values(), *(metrics.get("abstention") or {}).values()]:
        if isinstance(mm, dict) and mm.get("conf_level"):
            return pct(mm["conf_level"])
    return "95%"

__all__ = ["render_html", "esc"]

# Okabe–Ito colours (colour-blind safe).
C_B = "#0072B2"      # B better / B wins
C_A = "#D55E00"      # A better / A wins
C_TIE = "#999999"
C_INCONS = "#E69F00"
C_EQUAL = "#555555"

def _css() -> str:
    """The report's stylesheet (assets/report.css), inlined into every report."""
    from importlib.resources import files

    return (files(__package__) / "assets" / "report.css").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- helpers


_SPECIAL = re.compile("[&<>\"']").search


def esc(x: Any) -> str:
    """Escape anything for HTML text or a quoted attribute value; None → 'n/a'.

    Most values (ids, numbers, verdicts) have nothing to escape, and one regex scan finds
    that faster than html.escape's five str.replace passes. Where there is something, those
    passes (each a C memchr scan) beat str.translate, which maps character by character."""
    if x is None:
        return "n/a"
    s = x if type(x) is str else str(x)
    return _escape(s) if _SPECIAL(s) else s


def spans(sentence: notes.Sentence, strong_cls: str | None = None) -> str:
    """A sentence of `notes` through the shared macro (escaped there)."""
    return str(macro("spans")(sentence, strong_cls))


def _num(x: Any) -> float | None:
    """A finite float, or None (bools, strings, NaN and ±inf are not numbers here)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _fv(x: Any, nd: int = 3, signed: bool = False) -> str:
    """Formatted value, with 'n/a' greyed out."""
    if type(x) is float and math.isfinite(x) and not 0 < abs(x) < 10 ** -nd:
        return f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"  # _f's result; digits need no escaping
    s = num(x, nd, signed)
    return '<span class="na">n/a</span>' if s == "n/a" else esc(s)


def _c(x: float) -> str:
    """SVG coordinate."""
    return f"{x:.1f}"


def _d(obj: Any) -> dict:
    return obj if isinstance(obj, dict) else {}


def _l(obj: Any) -> list:
    return obj if isinstance(obj, list) else []


def _table(headers: list[str], rows: Iterable[list[str]], num_cols: Iterable[int] = (),
           cls: str = "", row_classes: list[str] | None = None) -> str:
    """Cells are already-escaped HTML fragments; headers are escaped here."""
    num_cols = set(num_cols)
    num = ' class="num"'
    out = [f'<div class="table-wrap"><table class="{esc(cls)}">' if cls
           else '<div class="table-wrap"><table>', "<thead><tr>"]
    out += [f'<th{num if i in num_cols else ""}>{esc(h)}</th>' for i, h in enumerate(headers)]
    out.append("</tr></thead><tbody>")
    for k, row in enumerate(rows):
        rc = (row_classes or [])[k] if row_classes and k < len(row_classes) else ""
        out.append(f'<tr class="{esc(rc)}">' if rc else "<tr>")
        out += [f'<td{num if i in num_cols else ""}>{cell}</td>' for i, cell in enumerate(row)]
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


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


def svg_forest(metrics: dict) -> str:
    rows, skipped = forest_rows(metrics)
    lvl = level_of(metrics)
    if not rows:
        return ('<p class="note" id="forest-missing">No metric has a paired difference with a '
                "confidence interval; no forest plot.</p>")
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

    out = [f'<svg id="forest-plot" class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
           f'role="img" aria-labelledby="forest-title"><title id="forest-title">Paired differences '
           f"B − A with {lvl} confidence intervals</title>",
           f'<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>']
    # grid + ticks
    y_axis = top + row_h * len(rows) + 6
    nd = _decimals(step)
    first = round(lo / step)
    for k in range(first, min(round(hi / step), first + 50) + 1):
        t = k * step   # from its index: a summed tick drifts off its label
        x = sx(t)
        label = num(t, nd, signed=True) if k else "0"
        out.append(f'<line class="grid" data-value="{esc(label)}" x1="{_c(x)}" y1="{top - 8}" '
                   f'x2="{_c(x)}" y2="{y_axis}" stroke="#eaeef2" stroke-width="1"/>')
        out.append(f'<text class="tick" x="{_c(x)}" y="{y_axis + 16}" font-size="12" '
                   f'text-anchor="middle">{esc(label)}</text>')
    zx = sx(0.0)
    out.append(f'<line id="forest-zero" x1="{_c(zx)}" y1="{top - 12}" x2="{_c(zx)}" y2="{y_axis}" '
               'stroke="#24292f" stroke-width="1.5" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{_c(x0)}" y="{top - 16}" font-size="12" fill="{C_A}">← A higher</text>')
    out.append(f'<text x="{_c(x1)}" y="{top - 16}" font-size="12" text-anchor="end" fill="{C_B}">'
               "B higher →</text>")
    out.append(f'<text x="{W - right_w + 12}" y="{top - 16}" font-size="12" font-weight="600">'
               f"B − A  [{lvl} CI]  p (Holm when adjusted)</text>")
    out.append(f'<text x="{_c((x0 + x1) / 2)}" y="{H - 4}" font-size="12" text-anchor="middle">'
               "difference B − A (metric units)</text>")
    for i, r in enumerate(rows):
        cy = top + row_h * i + row_h / 2
        # coloured by what the difference means for B: B's colour when it is better for B,
        # A's when worse (on a lower-is-better metric a positive difference is worse)
        colour = {"better": C_B, "worse": C_A}.get(r["for_b"], C_EQUAL)
        verdict = {"better": "better for B", "worse": "worse for B",
                   "unclear": "CI includes 0"}[r["for_b"]]
        tip = (f"{r['label']}: B − A = {num(r['d'], signed=True)}, {lvl} CI "
               f"{interval(r['lo'], r['hi'])}, n = {num(r['n'])}, {r['p_kind']} = {num(r['p'])}; "
               f"{r['direction']}: {verdict}")
        out.append(f'<g class="forest-row" data-metric="{esc(r["key"])}" '
                   f'data-for-b="{esc(r["for_b"])}">')
        out.append(f"<title>{esc(tip)}</title>")
        if i % 2 == 0:
            out.append(f'<rect x="4" y="{_c(cy - row_h / 2)}" width="{W - 8}" height="{row_h}" '
                       'fill="#f6f8fa"/>')
        out.append(f'<text x="{left - 12}" y="{_c(cy - 2)}" font-size="13" text-anchor="end">'
                   f"{esc(r['label'])}</text>")
        out.append(f'<text x="{left - 12}" y="{_c(cy + 12)}" font-size="10" text-anchor="end" '
                   f'fill="#57606a">n = {esc(num(r["n"]))}; {esc(r["direction"])}</text>')
        xl, xh, xd = sx(r["lo"]), sx(r["hi"]), sx(r["d"])
        out.append(f'<line class="ci" x1="{_c(xl)}" y1="{_c(cy)}" x2="{_c(xh)}" y2="{_c(cy)}" '
                   f'stroke="{colour}" stroke-width="2.5"/>')
        for xe in (xl, xh):
            out.append(f'<line x1="{_c(xe)}" y1="{_c(cy - 7)}" x2="{_c(xe)}" y2="{_c(cy + 7)}" '
                       f'stroke="{colour}" stroke-width="2.5"/>')
        out.append(f'<rect class="estimate" x="{_c(xd - 5)}" y="{_c(cy - 5)}" width="10" height="10" '
                   f'fill="{colour}"/>')
        out.append(f'<text x="{W - right_w + 12}" y="{_c(cy - 2)}" font-size="12" class="mono">'
                   f"{esc(num(r['d'], signed=True))}  {esc(interval(r['lo'], r['hi']))}  "
                   f"{esc(r['p_kind'])} {esc(num(r['p']))}</text>")
        out.append(f'<text class="for-b" x="{W - right_w + 12}" y="{_c(cy + 12)}" font-size="11" '
                   f'style="fill:{colour if r["for_b"] != "unclear" else "#57606a"}">'
                   f"{esc(r['direction'])}: {esc(verdict)}</text>")
        out.append("</g>")
    out.append("</svg>")
    note = ""
    if skipped:
        note = (f'<p class="note">Not plotted (no difference or no CI): '
                f"{esc(', '.join(skipped))}.</p>")
    return "".join(out) + note


def pairwise_segments(pw: dict) -> list[tuple[str, str, int, str]]:
    """(key, label, count, colour); position-inconsistent pairs are part of no_preference."""
    b, a = int(_num(pw.get("b_wins")) or 0), int(_num(pw.get("a_wins")) or 0)
    ties, inc = int(_num(pw.get("no_preference")) or 0), int(_num(pw.get("position_inconsistent")) or 0)
    inc = min(inc, ties) if ties else inc
    return [("b_wins", "B wins", b, C_B), ("a_wins", "A wins", a, C_A),
            ("no_preference", "no preference (consistent)", max(ties - inc, 0), C_TIE),
            ("position_inconsistent", "position-inconsistent", inc, C_INCONS)]


def svg_pairwise(pw: dict | None) -> str:
    if not pw:
        return ('<p class="note" id="pairwise-missing">No pairwise judgment in this run; no '
                "pairwise outcome bar.</p>")
    segs = pairwise_segments(pw)
    total = sum(s[2] for s in segs)
    if total == 0:
        return '<p class="note" id="pairwise-missing">Pairwise judge scored no case; no bar.</p>'
    W, H, x0, x1, y, h = 960, 112, 20, 940, 30, 40
    out = [f'<svg id="pairwise-bar" class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
           'role="img" aria-labelledby="pairwise-title"><title id="pairwise-title">Pairwise '
           "outcomes over both presentation orders</title>",
           f'<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>',
           f'<text x="{x0}" y="18" font-size="13">{esc(total)} cases judged in both orders '
           "(a win needs agreement in both orders)</text>"]
    x = float(x0)
    for key, label, n, colour in segs:
        w = (x1 - x0) * n / total
        out.append(f'<g class="pw-seg" data-outcome="{esc(key)}" data-count="{esc(n)}">'
                   f"<title>{esc(label)}: {esc(n)}</title>")
        if n:
            out.append(f'<rect x="{_c(x)}" y="{y}" width="{_c(w)}" height="{h}" fill="{colour}" '
                       'stroke="#ffffff" stroke-width="1"/>')
            if w >= 26:
                out.append(f'<text x="{_c(x + w / 2)}" y="{y + h / 2 + 5}" font-size="14" '
                           f'font-weight="700" text-anchor="middle" '
                           f'style="fill:{"#ffffff" if colour in (C_A, C_B) else "#1b1f24"}">'
                           f"{esc(n)}</text>")
        out.append("</g>")
        x += w
    for i, (_key, label, n, colour) in enumerate(segs):
        lx = x0 + i * (x1 - x0) / len(segs)
        txt = f"{label}: {n}"
        out.append(f'<rect x="{_c(lx)}" y="{y + h + 14}" width="12" height="12" fill="{colour}"/>'
                   f'<text x="{_c(lx + 17)}" y="{y + h + 24}" font-size="12">{esc(txt)}</text>')
    out.append("</svg>")
    return "".join(out)


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


def svg_scatter(per_case: list) -> str:
    pts, missing = scatter_points(per_case)
    if not pts:
        return ('<p class="note" id="scatter-missing">No finished case has a faithfulness score '
                "for both variants; no scatter plot.</p>")
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

    out = [f'<svg id="case-scatter" class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
           'role="img" aria-labelledby="scatter-title"><title id="scatter-title">Per-case '
           "faithfulness: A (x) against B (y)</title>",
           f'<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>',
           f'<polygon points="{_c(sx(lo))},{_c(sy(lo))} {_c(sx(lo))},{_c(sy(hi))} '
           f'{_c(sx(hi))},{_c(sy(hi))}" fill="{C_B}" fill-opacity="0.05"/>']
    step = _nice_step(hi - lo, 5)
    nd = _decimals(step)
    frame_lo, frame_hi = pad_t + S, pad_t   # the frame's bottom and top (y), left and right (x)
    for k in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1):
        t = k * step   # each tick from its index: no sum drifts a gridline off its label
        label = esc(num(t, nd))
        out.append(f'<line class="grid" data-value="{label}" x1="{_c(sx(t))}" y1="{frame_lo}" '
                   f'x2="{_c(sx(t))}" y2="{frame_hi}" stroke="#eaeef2"/>'
                   f'<line class="grid" data-value="{label}" x1="{pad_l}" y1="{_c(sy(t))}" '
                   f'x2="{pad_l + S}" y2="{_c(sy(t))}" stroke="#eaeef2"/>'
                   f'<text class="tick-x" x="{_c(sx(t))}" y="{frame_lo + 16}" font-size="11" '
                   f'text-anchor="middle">{label}</text>'
                   f'<text class="tick-y" x="{pad_l - 6}" y="{_c(sy(t) + 4)}" font-size="11" '
                   f'text-anchor="end">{label}</text>')
    out.append(f'<rect id="scatter-frame" x="{pad_l}" y="{pad_t}" width="{S}" height="{S}" '
               'fill="none" stroke="#8c959f"/>')
    out.append(f'<line id="scatter-diagonal" x1="{_c(sx(lo))}" y1="{_c(sy(lo))}" x2="{_c(sx(hi))}" '
               f'y2="{_c(sy(hi))}" stroke="#24292f" stroke-width="1.2" stroke-dasharray="5 4"/>')
    out.append(f'<text x="{_c(pad_l + 24)}" y="{_c(pad_t + 30)}" font-size="12" fill="{C_B}">'
               "B higher ↑</text>")
    out.append(f'<text x="{_c(pad_l + S - 8)}" y="{_c(pad_t + S - 8)}" font-size="12" '
               f'fill="{C_A}" text-anchor="end">A higher ↓</text>')
    out.append(f'<text x="{_c(pad_l + S / 2)}" y="{H - 6}" font-size="12" text-anchor="middle">'
               "faithfulness A</text>")
    out.append(f'<text x="14" y="{_c(pad_t + S / 2)}" font-size="12" text-anchor="middle" '
               f'transform="rotate(-90 14 {_c(pad_t + S / 2)})">faithfulness B</text>')
    for cid, a, b in pts:
        colour = C_B if b > a else C_A if a > b else C_EQUAL
        out.append(f'<circle class="case-point" data-case="{esc(cid)}" cx="{_c(sx(a))}" '
                   f'cy="{_c(sy(b))}" r="6" fill="{colour}" fill-opacity="0.75" stroke="#ffffff" '
                   f'stroke-width="1"><title>{esc(cid)}: A {esc(num(a, 2))}, B {esc(num(b, 2))}'
                   "</title></circle>")
    out.append("</svg>")
    note = (f'<p class="note">{esc(len(pts))} finished case(s) plotted; {esc(missing)} finished '
            "case(s) lack a faithfulness score on one or both sides (e.g. refusals, which have no "
            "factual claim) and are not shown.</p>")
    return "".join(out) + note


# --------------------------------------------------------------------------- sections

SECTIONS = [("summary", "Executive summary"), ("fixture", "Fixture"), ("checks", "Checks"),
            ("metrics", "Metric scores"), ("gate", "Gate"), ("incidents", "Incidents"),
            ("remediation", "Remediation"), ("flipped", "Flipped cases"),
            ("unfinished", "Unfinished"), ("next-evaluation", "Next evaluation"),
            ("cases", "All cases")]


def _header(r: dict) -> str:
    v = _d(r.get("variants"))
    va, vb = _d(v.get("a")), _d(v.get("b"))
    fx = _d(r.get("fixture"))
    models = _d(r.get("models"))
    items = [
        ("Evaluation date", f"{esc(str(r.get('generated_at') or 'n/a')[:10])} (run created "
                            f"{esc(str(r.get('created_at') or 'n/a')[:19])})"),
        ("Status", f'<strong>{esc(r.get("status"))}</strong> — {esc(num(r.get("n_finished")))}/'
                   f'{esc(num(r.get("n_cases")))} cases finished'),
        ("Variant A", f"<code>{esc(va.get('name'))}</code> (sha256 "
                      f"<span class=\"mono\">{esc(str(va.get('sha256') or 'n/a')[:12])}</span>)"),
        ("Variant B", f"<code>{esc(vb.get('name'))}</code> (sha256 "
                      f"<span class=\"mono\">{esc(str(vb.get('sha256') or 'n/a')[:12])}</span>)"),
        ("Git commit", esc(r.get("git_commit") or "n/a (not a git repository)")),
    ]
    for role in ("generator", "judge"):
        mm = _d(models.get(role))
        resolved = ", ".join(f"<code>{esc(x)}</code>" for x in _l(mm.get("resolved"))) or "n/a"
        items.append((role.capitalize(), f"requested <code>{esc(mm.get('requested'))}</code>, "
                                         f"resolved {resolved}"))
    items.append(("Fixture", f"<code>{esc(fx.get('name'))}</code>, corpus version "
                             f"{esc(fx.get('corpus_version'))}, retriever <code>"
                             f"{esc(fx.get('retriever'))}</code>, cases_sha256 <span class=\"mono\">"
                             f"{esc(str(fx.get('cases_sha256') or 'n/a')[:16])}…</span>"))
    items.append(("Comparison kind", f"<strong>{esc(r.get('comparison_kind'))}</strong>"))
    cost = cost_line(r)
    if cost:
        stopped = _d(r.get("budget")).get("stopped")
        items.append(("Cost", f'<strong class="warn" id="budget-stop">{esc(cost)}</strong>'
                              if stopped else f'<span id="cost">{esc(cost)}</span>'))
    if fx.get("stale_at_run") is True:
        items.append(("Stale fixture", f'<strong class="warn" id="stale">captured '
                                       f"{esc(fx.get('captured_at'))}, due for re-capture on "
                                       f"{esc(fx.get('next_evaluation_date'))}</strong>; this run "
                                       "started after that date, so it describes retrieval as it "
                                       "was then (capture again, then re-run)"))
    out = [f"<header><h1>abtest report — run {esc(r.get('run_id'))}</h1><dl class=\"meta\">"]
    out += [f"<dt>{esc(k)}</dt><dd>{val}</dd>" for k, val in items]
    out.append('</dl><nav class="toc">')
    out += [f'<a href="#{esc(sid)}">{esc(title)}</a>' for sid, title in SECTIONS]
    out.append("</nav></header>")
    return "".join(out)


def _summary(r: dict) -> str:
    out = ['<section id="summary"><h2>Executive summary</h2>']
    c = _d(r.get("claim"))
    out.append(str(macro("claim_box")(c)))
    if c.get("scope"):
        out.append(f'<p class="note">Scope: {esc(c.get("scope"))}</p>')
    if r.get("comparison_kind") == "pipeline_change":
        reasons = "; ".join(str(x) for x in _l(r.get("pipeline_reasons")))
        out.append(f'<div class="callout warn">{spans(notes.pipeline_change())}'
                   f"{(' (' + esc(reasons) + ')') if reasons else ''}</div>")
    if r.get("self_judge"):
        out.append('<div class="callout warn" id="self-judge">'
                   f"{spans(notes.self_judge(r.get('self_judge_model')))}</div>")
    if r.get("estimates_withheld"):
        out.append('<div class="callout warn" id="withheld">'
                   f"{spans(notes.withheld(r.get('estimates_withheld')))}</div>")
    pw = _d(_d(r.get("metrics")).get("pairwise"))
    if pw:
        out.append(f"<p>{spans(notes.pairwise_line(pw))}</p>")
        cav = _d(pw.get("length_bias")).get("caveat")
        if cav:
            out.append('<div class="callout warn" id="length-caveat">'
                       f"{spans(notes.length_caveat(cav))}</div>")
    g = _d(r.get("gate"))
    if g:
        out.append(f"<p>{spans(notes.gate_line(g), strong_cls=str(g.get('decision')))}</p>")
    out.append("</section>")
    return "".join(out)


def _fixture(r: dict) -> str:
    cats: dict[str, int] = {}
    n_un = 0
    for row in _l(r.get("per_case")):
        row = _d(row)
        cat = str(row.get("category") or "uncategorised")
        cats[cat] = cats.get(cat, 0) + 1
        n_un += 1 if row.get("answerable") is False else 0
    n = _num(r.get("n_cases"))
    n_ans = f"{int(n) - n_un}" if n is not None else "n/a"
    cat_txt = ", ".join(f"{k} {v}" for k, v in sorted(cats.items())) or "none"
    fx = _d(r.get("fixture"))
    extra = ""
    if fx.get("captured_at"):
        extra = f" Contexts captured {esc(fx.get('captured_at'))}."
    return (f'<section id="fixture"><h2>Fixture / golden set summary</h2><p>{esc(num(r.get("n_cases")))} '
            f"cases: {esc(n_ans)} answerable, {esc(n_un)} unanswerable. Categories: {esc(cat_txt)}."
            f"{extra}</p></section>")


def judge_validation_html(jv: dict) -> str:
    """Per-judge agreement with the human labels of its own items (frozen and live reports)."""
    claim = set(_l(jv.get("claim_judges")))
    rows = []
    for j in ("pairwise", "faithfulness", "coverage", "abstention"):
        b = _d(jv.get(j))
        if not b:
            continue
        rows.append([esc(j), "yes" if j in claim else "no", esc(num(b.get("n_labels"))),
                     _fv(b.get("kappa")), esc(interval(b.get("ci_low"), b.get("ci_high"))),
                     "validated" if b.get("validated") else
                     f"<strong>not validated</strong>: {esc(b.get('reason'))}"])
    if not rows:
        return '<p id="judge-validation">Judge validation: no human labels.</p>'
    return ('<div id="judge-validation"><h3>Judge validation (human labels, per judge)</h3>'
            + _table(["judge", "claim rests on it", "labels", "kappa", "CI", "decision"], rows,
                     num_cols=(2, 3)) + f'<p class="note">Rule: {esc(jv.get("rule"))}.</p></div>')


def checks_section(m: dict) -> str:
    out = ['<section id="checks"><h2>Deterministic checks (before any judge)</h2>']
    rows = []
    for name, s in _d(m.get("checks")).items():
        s = _d(s)
        if not (s.get("n_a_applicable") or s.get("n_b_applicable") or s.get("n")):
            continue
        nf = [str(x) for x in _l(s.get("newly_failing"))]
        rows.append([esc(name), esc(num(s.get("n_a_applicable", s.get("n")))),
                     esc(num(s.get("n_b_applicable", s.get("n")))), _fv(s.get("pass_rate_a")),
                     _fv(s.get("pass_rate_b")), esc(num(s.get("n"))), _fv(s.get("p_value")),
                     esc(", ".join(nf[:5]) + ("…" if len(nf) > 5 else "")) or "—"])
    if rows:
        out.append(_table(["check", "applies A", "applies B", "pass A", "pass B", "paired n",
                           "McNemar mid-p", "newly failing in B"], rows,
                          num_cols=(1, 2, 3, 4, 5, 6)))
    else:
        out.append("<p>No check applied to any case.</p>")
    out.append("</section>")
    return "".join(out)


def metrics_section(r: dict) -> str:
    m = _d(r.get("metrics"))
    out = ['<section id="metrics"><h2>Metric scores</h2>',
           '<figure id="forest-figure">', svg_forest(m),
           f"<figcaption>Paired differences B − A with unadjusted {level_of(m)} confidence intervals (the "
           "pairwise row is B's win rate minus A's, ties counted half). An interval excluding zero is "
           "coloured by what it means for B given the metric's direction (each row says it): B's "
           "blue when better for B, A's orange when worse; grey intervals include zero. For "
           "abstention on answerable cases a lower rate is better.</figcaption></figure>"]
    rows = []
    for key in ("pairwise", "faithfulness", "coverage", "quality", "relevance", "conformance"):
        mm = m.get(key)
        if not isinstance(mm, dict):
            continue
        rows.append([esc(key), esc(num(mm.get("n"))), _fv(mm.get("a")), _fv(mm.get("b")),
                     _fv(mm.get("difference"), signed=True),
                     esc(interval(mm.get("ci_low"), mm.get("ci_high"))),
                     esc(str(mm.get("test") or "n/a").split(" ")[0]), _fv(mm.get("p_value")),
                     _fv(mm.get("p_holm"))])
    for sub in ("answerable", "unanswerable"):
        mm = _d(m.get("abstention")).get(sub)
        if isinstance(mm, dict) and mm.get("n"):
            rows.append([esc(f"abstention ({sub})"), esc(num(mm.get("n"))), _fv(mm.get("a")),
                         _fv(mm.get("b")), _fv(mm.get("difference"), signed=True),
                         esc(interval(mm.get("ci_low"), mm.get("ci_high"))), esc(mm.get("test")),
                         _fv(mm.get("p_value")), _fv(mm.get("p_holm"))])
    if rows:
        out.append(_table(["metric", "N", "A", "B", "B − A", f"{level_of(m)} CI", "test", "p",
                           "Holm p"], rows,
                          num_cols=(1, 2, 3, 4, 5, 7, 8), cls="metrics"))
    else:
        out.append("<p>No metric was measured.</p>")
    out.append(f'<p class="note">{spans(notes.holm_note(r))}</p>')
    stat = notes.metric_notes(r)
    if stat:
        out.append("<ul>" + "".join(f"<li>{spans(n)}</li>" for n in stat) + "</ul>")
    pw = m.get("pairwise")
    out.append("<h3>Pairwise outcomes</h3>")
    out.append('<figure id="pairwise-figure">' + svg_pairwise(pw if isinstance(pw, dict) else None))
    if isinstance(pw, dict):
        out.append("<figcaption>B wins / A wins count only verdicts that agree in both presentation "
                   "orders; position-inconsistent pairs are counted as no preference.</figcaption>")
    out.append("</figure>")
    diag = notes.judge_notes(r)
    if diag:
        out.append("<ul>" + "".join(f"<li>{spans(d)}</li>" for d in diag) + "</ul>")
    out.append("<h3>Per-case faithfulness</h3>")
    out.append('<figure id="scatter-figure">' + svg_scatter(_l(r.get("per_case"))) +
               "<figcaption>Each point is one finished case; points above the dashed diagonal scored "
               "higher with B.</figcaption></figure>")
    jv = _d(r.get("judge_validation"))
    if jv:
        out.append(judge_validation_html(jv))
    pd = r.get("prompt_diff")
    if isinstance(pd, dict):
        parts = ", ".join(str(x) for x in _l(pd.get("changed_parts"))) or "none"
        out.append(f'<h3>Rendered prompt differences</h3><p>Case {esc(pd.get("case_id"))}; parts '
                   f"changed: {esc(parts)}.</p>")
        lines = []
        for line in str(pd.get("diff") or "").rstrip().splitlines() or ["(identical)"]:
            cls = ("hunk" if line.startswith("@@") else "add" if line.startswith("+") and
                   not line.startswith("+++") else "del" if line.startswith("-") and
                   not line.startswith("---") else "")
            lines.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
        out.append('<pre class="diff" id="prompt-diff">' + "\n".join(lines) + "</pre>")
    out.append("</section>")
    return "".join(out)


def _gate(r: dict) -> str:
    g = _d(r.get("gate"))
    out = ['<section id="gate"><h2>Gate decision</h2>']
    if not g:
        out.append("<p>No gate was evaluated.</p></section>")
        return "".join(out)
    out.append(f'<p><span class="badge {esc(g.get("decision"))}" id="gate-decision">'
               f'{esc(g.get("decision"))}</span> (exit code {esc(num(g.get("exit_code")))})</p>')
    rows = []
    for x in _l(g.get("rules")):
        x = _d(x)
        thr = f"{x.get('op', '')} {num(x.get('threshold'))}".strip()
        rows.append([esc(x.get("name")), _fv(x.get("value")), esc(thr),
                     f'<span class="badge {esc(x.get("status"))}">{esc(x.get("status"))}</span>',
                     esc(x.get("note") or "")])
    if rows:
        out.append(_table(["rule", "B value", "threshold", "status", "note"], rows, num_cols=(1, 2)))
    reasons = _l(g.get("reasons"))
    if reasons:
        out.append("<p>Reasons:</p><ul>" + "".join(f"<li>{esc(x)}</li>" for x in reasons) + "</ul>")
    out.append("</section>")
    return "".join(out)


def _incidents(r: dict) -> str:
    out = ['<section id="incidents"><h2>Hallucination incidents</h2>']
    incs = _l(r.get("incidents"))
    if not incs:
        out.append("<p>None (no answer with faithfulness below the incident threshold).</p>")
    for inc in incs:
        inc = _d(inc)
        ctx = ", ".join(str(x) for x in _l(inc.get("context_ids"))) or "(none)"
        out.append(f'<div class="incident" data-case="{esc(inc.get("case_id"))}">'
                   f"<p><strong>{esc(inc.get('case_id'))}</strong> (variant {esc(inc.get('variant'))}, "
                   f"faithfulness {esc(num(inc.get('faithfulness'), 2))}): {esc(inc.get('question'))}</p>")
        uns = _l(inc.get("unsupported"))
        if uns:
            out.append("<ul>" + "".join(f"<li><em>{esc(_d(u).get('verdict'))}</em>: "
                                        f"{esc(_d(u).get('claim'))}</li>" for u in uns[:10]) + "</ul>")
        chunks = [_d(ch) for ch in _l(inc.get("context"))]
        if chunks:
            out.append('<p>Context the statements were checked against:</p><ul class="context">'
                       + "".join(f'<li><span class="mono">{esc(ch.get("id"))}</span>: '
                                 f'{esc(ch.get("text"))}</li>' for ch in chunks) + "</ul>")
        else:
            out.append(f"<p>Context: <span class=\"mono\">{esc(ctx)}</span></p>")
        if inc.get("answer") is not None:
            out.append(f'<details><summary>Answer</summary><div class="answer">{esc(inc.get("answer"))}'
                       "</div></details>")
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


def _remediation(r: dict) -> str:
    out = ['<section id="remediation"><h2>Remediation backlog</h2>']
    rows = [[esc(_d(x).get("priority")), esc(_d(x).get("item")), esc(_d(x).get("likely_cause")),
             esc(_d(x).get("remedy"))] for x in _l(r.get("remediation"))]
    out.append(_table(["priority", "item", "likely cause", "remedy"], rows) if rows
               else "<p>Nothing to remediate.</p>")
    out.append("</section>")
    return "".join(out)


def _flipped(r: dict) -> str:
    out = ['<section id="flipped"><h2>Cases that flipped</h2>']
    rows = []
    for row in _l(r.get("per_case")):
        row = _d(row)
        if not row.get("flipped"):
            continue
        newly = sorted(set(map(str, _l(row.get("checks_failed_b")))) -
                       set(map(str, _l(row.get("checks_failed_a")))))
        rows.append([f'<a href="#case-{esc(row.get("case_id"))}">{esc(row.get("case_id"))}</a>',
                     _fv(row.get("faithfulness_a"), 2), _fv(row.get("faithfulness_b"), 2),
                     esc(row.get("pairwise") or ""), esc(", ".join(newly))])
    out.append(_table(["case", "faith A", "faith B", "pairwise", "newly failing checks"], rows,
                      num_cols=(1, 2)) if rows else
               "<p>No case crossed the faithfulness threshold or newly failed a check.</p>")
    out.append("</section>")
    return "".join(out)


def _unfinished(r: dict) -> str:
    ids = _l(r.get("unfinished_cases"))
    out = ['<section id="unfinished"><h2>Unfinished cases (not scored, not counted)</h2>']
    if not ids:
        out.append("<p>None: every case finished.</p>")
    else:
        reasons = _d(r.get("unfinished_reasons"))
        out.append("<ul>")
        for cid in ids:
            why = "; ".join(str(x) for x in _l(reasons.get(cid)))[:300]
            out.append(f"<li><strong>{esc(cid)}</strong>: {esc(why or 'no reason recorded')}</li>")
        out.append("</ul>")
    out.append("</section>")
    return "".join(out)


def _next_date(r: dict) -> str:
    fx = _d(r.get("fixture"))
    nd = fx.get("next_evaluation_date")
    txt = (f"{esc(nd)} (fixture refresh every {esc(num(fx.get('refresh_every_days')))} days)"
           if nd else "n/a")
    return f'<section id="next-evaluation"><h2>Next evaluation date</h2><p>{txt}</p></section>'


SHORT = {"faithfulness": "faith", "coverage": "cov", "quality": "qual", "relevance": "rel",
         "conformance": "conf"}


def _bool_txt(x: Any) -> str:
    return '<span class="na">n/a</span>' if x is None else ("yes" if x else "no")


def _cases(r: dict) -> str:
    """Scores on one row per case; the question and both answers in a collapsed row below."""
    rows_in = [_d(x) for x in _l(r.get("per_case"))]
    judges = [j for j in SCORE_JUDGES
              if any(f"{j}_a" in row or f"{j}_b" in row for row in rows_in)]
    has_abst = any("abstained_a" in row or "abstained_b" in row for row in rows_in)
    headers = ["case", "category", "answerable", "finished"]
    for j in judges:
        headers += [f"{SHORT[j]} A", f"{SHORT[j]} B"]
    if has_abst:
        headers += ["abst. A", "abst. B"]
    headers += ["pairwise AB / BA → outcome", "checks failed"]
    num_cols = set(range(4, 4 + 2 * len(judges)))
    out = ['<section id="cases"><h2>Per-case results</h2>',
           '<p class="note">Scores are judge scores in [0, 1] (' +
           esc(", ".join(f"{SHORT[j]} = {j}" for j in judges) +
               ("; abst. = abstained" if has_abst else "")) +
           "). Unfinished rows (yellow) are never counted in any statistic; flipped cases (red "
           "left edge) crossed the faithfulness threshold between A and B or newly fail a check "
           "in B. Open a case's question to read both answers.</p>"]
    if not rows_in:
        out.append("<p>No cases.</p></section>")
        return "".join(out)
    out.append('<div class="table-wrap"><table class="per-case"><thead><tr>')
    num = ' class="num"'
    out += [f'<th{num if i in num_cols else ""}>{esc(h)}</th>' for i, h in enumerate(headers)]
    out.append("</tr></thead>")
    td_open = [f'<td{num if i in num_cols else ""}>' for i in range(len(headers))]
    for row in rows_in:
        cid = esc(row.get("case_id"))
        cells = [f"<strong>{cid}</strong>", esc(row.get("category") or "—"),
                 _bool_txt(row.get("answerable")), _bool_txt(row.get("finished"))]
        for j in judges:
            cells += [_fv(row.get(f"{j}_a"), 2), _fv(row.get(f"{j}_b"), 2)]
        if has_abst:
            cells += [_bool_txt(row.get("abstained_a")), _bool_txt(row.get("abstained_b"))]
        if "pairwise_ab" in row or "pairwise_ba" in row:
            cells.append(f'<span class="nowrap">{esc(row.get("pairwise_ab"))} / '
                         f'{esc(row.get("pairwise_ba"))} → <strong>{esc(row.get("pairwise"))}'
                         "</strong></span>")
        else:
            cells.append('<span class="na">n/a</span>')
        failed = [f"{v}: {esc(', '.join(map(str, _l(row.get('checks_failed_' + v.lower())))))}"
                  for v in ("A", "B") if _l(row.get("checks_failed_" + v.lower()))]
        cells.append("<br/>".join(failed) or "—")
        cls = " ".join(c for c, on in (("unfinished", row.get("finished") is False),
                                       ("flipped", bool(row.get("flipped")))) if on)
        q = " ".join(str(row.get("question") or "").split())
        errs = _l(row.get("errors"))
        detail = [f"<details><summary>{esc(q or '(no question)')}</summary>",
                  f'<div><strong>A:</strong><div class="answer answer-a">{esc(row.get("answer_a"))}'
                  "</div></div>",
                  f'<div><strong>B:</strong><div class="answer answer-b">{esc(row.get("answer_b"))}'
                  "</div></div>"]
        if errs:
            detail.append("<p><strong>Errors:</strong></p><ul>" +
                          "".join(f"<li>{esc(e)}</li>" for e in errs) + "</ul>")
        detail.append("</details>")
        cls_attr = f' class="{esc(cls)}"' if cls else ""
        out.append(f'<tbody id="case-{cid}" class="case" data-case="{cid}"><tr{cls_attr}>'
                   + "".join(f"{o}{c}</td>" for o, c in zip(td_open, cells)))
        out.append(f'</tr><tr class="detail{(" " + esc(cls)) if cls else ""}"><td colspan="'
                   f'{len(headers)}">{"".join(detail)}</td></tr></tbody>')
    out.append("</table></div></section>")
    return "".join(out)


def _footer(r: dict) -> str:
    calls = _d(r.get("calls"))
    return (f"<footer><p>{spans(notes.calls_line(calls))}</p>"
            f"<p>Report schema version {esc(num(r.get('schema_version')))}; generated by abtest. This "
            "page is self-contained: no script, no external resources.</p></footer>")


def render_html(report: Report) -> str:
    """One self-contained HTML document for a report (see build.build_report)."""
    r = json_shape(report)
    body = [_header(r), _summary(r), _fixture(r), checks_section(_d(r.get("metrics"))),
            metrics_section(r),
            _gate(r), _incidents(r), _remediation(r), _flipped(r), _unfinished(r), _next_date(r),
            _cases(r), _footer(r)]
    return _page(f"abtest report — run {r.get('run_id')}", body)


# --------------------------------------------------------------------------- live report

def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8"/>'
            '<meta name="viewport" content="width=device-width, initial-scale=1"/>'
            '<meta name="referrer" content="no-referrer"/>'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'\"/>"
            f"<title>{esc(title)}</title>"
            f"<style>\n{_css()}</style></head><body><main>" + "\n".join(body) +
            "</main></body></html>\n")


def _live_metric_rows(m: dict) -> list[list[str]]:
    rows = []
    ab, retr = _d(m.get("abstention")), _d(m.get("retrieval"))
    for label, mm in (("pairwise (win rate)", m.get("pairwise")),
                      *((k, m.get(k)) for k in ("faithfulness", "coverage", "quality", "relevance")),
                      ("refusals, answerable", ab.get("answerable")),
                      ("refusals, out of scope", ab.get("unanswerable")),
                      ("context precision", retr.get("context_precision")),
                      ("context recall", retr.get("context_recall"))):
        mm = _d(mm)
        if not mm:
            continue
        rows.append([esc(label), _fv(mm.get("n")), _fv(mm.get("a")), _fv(mm.get("b")),
                     _fv(mm.get("difference"), signed=True),
                     esc(interval(mm.get("ci_low"), mm.get("ci_high"))),
                     f"{_fv(mm.get('p_value'))} ({_fv(mm.get('p_holm'))})"])
    return rows


def live_sections(r: dict) -> list[str]:
    """The live report's claims (frozen and live kept apart), frozen vs live, and its metrics:
    the live page's body, and `abtest view`'s page of a live run."""
    r = _d(r)
    m = _d(r.get("metrics"))
    out: list[str] = []
    claims = _d(r.get("claims"))
    out.append('<section id="claims"><h2>Claims</h2>')
    fc = _d(claims.get("frozen"))
    if fc:
        out.append(f'<div class="callout" id="frozen-claim"><strong>Frozen (run '
                   f"{esc(fc.get('run_id'))}):</strong> {esc(fc.get('statement'))}</div>")
    lc = _d(r.get("claim"))
    out.append(f'<div class="callout {"ok" if lc.get("licensed") else "no"}" id="live-claim">'
               f"<strong>Live:</strong> {esc(lc.get('statement'))}</div>")
    out.append('<p class="note">The two claims are kept apart: the frozen one is about '
               "generation given fixed contexts, the live one about the whole system end to "
               "end (expect a smaller effect).</p></section>")

    rows = _l(r.get("frozen_comparison"))
    if rows or r.get("frozen_comparison_note"):
        out.append('<section id="frozen-vs-live"><h2>Frozen vs live (B − A)</h2>')
        cc = _d(r.get("frozen_comparison_cases"))
        if cc:
            out.append(f"<p>Over the {_fv(cc.get('n'))} case(s) both runs finished "
                       f"({_fv(cc.get('frozen_only'))} only in the frozen run, "
                       f"{_fv(cc.get('live_only'))} only in the live run); each row uses those "
                       "with the metric's value in both.</p>")
        if rows:
            out.append(_table(["metric", "n", "frozen", "live", "ratio (live/frozen)", "",
                               "measure"],
                              [[esc(_d(x).get("metric")), _fv(_d(x).get("n")),
                                _fv(_d(x).get("frozen_difference"), signed=True),
                                _fv(_d(x).get("live_difference"), signed=True),
                                _fv(_d(x).get("ratio"), 2), esc(_d(x).get("survival")),
                                esc(_d(x).get("measure") or "")] for x in rows],
                              num_cols=(1, 2, 3, 4)))
        else:
            out.append(f"<p><em>{esc(r.get('frozen_comparison_note'))}</em></p>")
        out.append("</section>")

    out.append('<section id="metrics"><h2>Live metrics</h2>')
    lvl = f"{pct(1 - _d(r.get('holm')).get('alpha', 0.05))} CI"
    mrows = _live_metric_rows(m)
    out.append(_table(["metric", "n", "A", "B", "B − A", lvl, "p (Holm p)"], mrows,
                      num_cols=(1, 2, 3, 4)) if mrows else "<p>No metric.</p>")
    if r.get("estimates_withheld"):
        out.append(f"<p><em>{esc(r.get('estimates_withheld'))}</em></p>")
    else:
        out.append('<figure id="forest-figure">' + svg_forest(m) + "</figure>")
    retr, ca, lat = _d(m.get("retrieval")), _d(_d(m.get("checks")).get("citation_accuracy")), \
        _d(m.get("latency"))
    notes = [f"Retrieval metrics exclude {_fv(_d(retr.get('context_precision')).get('n_excluded_no_relevant_ids'))} "
             "question(s) without relevant_chunk_ids; A and B retrieved the same chunks for "
             f"{_fv(retr.get('same_retrieval_share'), 2)} of questions."]
    if ca.get("n"):
        notes.append(f"Citation accuracy (expected citations all cited): A "
                     f"{_fv(ca.get('pass_rate_a'))}, B {_fv(ca.get('pass_rate_b'))} over "
                     f"{_fv(ca.get('n'))} question(s).")
    notes.append(f"Latency ({esc(', '.join(str(x) for x in _l(lat.get('latency_kind'))) or 'n/a')}): "
                 f"p50 A {_fv(lat.get('p50_ms_a'), 0)} ms, p95 A {_fv(lat.get('p95_ms_a'), 0)} ms; "
                 f"p50 B {_fv(lat.get('p50_ms_b'), 0)} ms, p95 B {_fv(lat.get('p95_ms_b'), 0)} ms.")
    out.append("<ul>" + "".join(f"<li>{n}</li>" for n in notes) + "</ul>")
    jv = _d(r.get("judge_validation"))
    if jv:
        out.append(judge_validation_html(jv))
    out.append("</section>")
    return out


def render_live_html(report: LiveReport) -> str:
    """The live report as a page like the frozen one: the frozen and live claims kept apart,
    frozen vs live over the cases both finished, metrics with CIs, gate, per question."""
    r = json_shape(report)
    golden, variants, versions = _d(r.get("golden")), _d(r.get("variants")), _d(r.get("versions"))
    items = [("Status", f"<strong>{esc(r.get('status'))}</strong> — {_fv(r.get('n_finished'))}/"
                        f"{_fv(r.get('n_cases'))} questions finished"
                        + (f" — incomplete: {esc(r.get('incomplete_reason'))}"
                           if r.get("incomplete_reason") else "")),
             ("Golden questions", f"<code>{esc(golden.get('name'))}</code> (sha256 "
                                  f'<span class="mono">{esc(str(golden.get("sha256") or "")[:12])}'
                                  "</span>)"),
             ("Retriever", f"{esc(r.get('retriever'))}; corpus {esc(r.get('corpus_version'))}")]
    for s in ("a", "b"):
        vv = ", ".join(str(x) for x in _l(versions.get(s))) or "not reported"
        items.append((s.upper(), f"<code>{esc(_d(variants.get(s)).get('target'))}</code> "
                                 f"(assistant version {esc(vv)})"))
    items.append(("Judge", f"<code>{esc(_d(_d(r.get('models')).get('judge')).get('requested'))}"
                           "</code>"))
    out = [f"<header><h1>abtest live report — run {esc(r.get('run_id'))}</h1><dl class=\"meta\">"]
    out += [f"<dt>{esc(k)}</dt><dd>{val}</dd>" for k, val in items]
    out.append("</dl></header>")

    out += live_sections(r)
    out.append(_gate(r))
    out.append(_incidents(r))

    out.append('<section id="cases"><h2>Per question</h2>')
    qrows = []
    for row in (_d(x) for x in _l(r.get("per_case"))):
        q = " ".join(str(row.get("question") or "").split())
        detail = (f"<details><summary>{esc(q or '(no question)')}</summary>"
                  f'<div><strong>A:</strong><div class="answer answer-a">{esc(row.get("answer_a"))}'
                  f'</div></div><div><strong>B:</strong><div class="answer answer-b">'
                  f"{esc(row.get('answer_b'))}</div></div></details>")
        qrows.append([f"<strong>{esc(row.get('case_id'))}</strong>", _bool_txt(row.get("finished")),
                      esc(", ".join(str(x) for x in _l(row.get("retrieved_a")))),
                      esc(", ".join(str(x) for x in _l(row.get("retrieved_b")))),
                      _fv(row.get("latency_ms_a"), 0), _fv(row.get("latency_ms_b"), 0),
                      esc(row.get("pairwise") or "—"), detail])
    out.append(_table(["id", "finished", "retrieved A", "retrieved B", "latency A (ms)",
                       "latency B (ms)", "pairwise", "question and answers"], qrows,
                      num_cols=(4, 5)) if qrows else "<p>No questions.</p>")
    out.append("</section>")
    out.append(_footer(r))
    return _page(f"abtest live report — run {r.get('run_id')}", out)
