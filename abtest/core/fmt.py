"""The one number formatter: every report, status line and claim sentence prints numbers
the same way, so a value reads the same in Markdown, HTML, the CLI and the JSON's text."""

from __future__ import annotations

import math
from typing import Any


def num(x: Any, nd: int = 3, signed: bool = False, missing: str = "n/a") -> str:
    """None → `missing`, bools → yes/no, ints as they are, floats to `nd` decimals (a non-zero
    value too small for them in scientific notation, so it never reads as 0)."""
    if x is None:
        return missing
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:+d}" if signed else str(x)
    if not isinstance(x, float) or not math.isfinite(x):
        return str(x)
    if 0 < abs(x) < 10 ** -nd:
        if nd == 0:  # a count-like figure (ms, tokens) below 1: two significant digits
            return f"{x:+.2g}" if signed else f"{x:.2g}"
        return f"{x:+.1e}" if signed else f"{x:.1e}"
    return f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"


def signed(x: Any, nd: int = 3) -> str:
    return num(x, nd, signed=True)


def p_value(p: Any, missing: str = "n/a") -> str:
    """Three decimals, or two significant digits below 0.001 (never '0.000')."""
    if p is None:
        return missing
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def _finite(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def interval(lo: Any, hi: Any, nd: int = 3) -> str:
    """'[lo, hi]', or 'n/a' when either end is missing or not a finite number. The ends are
    rounded to `nd` decimals, as the estimate they bracket is: an interval is never printed in
    scientific notation (a kappa interval of ±1.8e-09 is float noise around 0: [0.000, 0.000])."""
    if not (_finite(lo) and _finite(hi)):
        return "n/a"
    return f"[{_end(lo, nd)}, {_end(hi, nd)}]"


def _end(x: Any, nd: int) -> str:
    if isinstance(x, int):
        return str(x)
    r = round(float(x), nd)
    return f"{r + 0.0 if r else 0.0:.{nd}f}"   # never "-0.000"


def kappa_text(k: Any, lo: Any = None, hi: Any = None) -> str:
    """A judge's agreement with humans, worded the same on every page: "no agreement
    measured" when kappa is undefined (no labels, or both raters used one label), the value
    without an interval when it has none, else the value and its interval."""
    if not _finite(k):
        return "no agreement measured"
    if not (_finite(lo) and _finite(hi)):
        return f"{num(float(k))} (no interval)"
    return f"{num(float(k))} {interval(lo, hi)}"


def clip(text: Any, n: int) -> str:
    """Text on one line (whitespace runs collapsed), cut to n characters with an ellipsis."""
    t = " ".join(str(text or "").split())
    return t if len(t) <= n else t[: n - 1] + "…"


def pct(level: float) -> str:
    """A confidence level as people write it: 0.95 -> '95%', 0.9 -> '90%', 0.98 -> '98%'."""
    return f"{100 * level:.10g}%"


def cost_line(report: dict) -> str | None:
    """What the run cost, by variant and judge, and its budget; None when nothing is known."""
    cost = ((report.get("calls") or {}).get("cost_usd") or {})
    budget = report.get("budget") or {}
    parts = []
    if cost.get("total") is not None:
        by = [f"{k} ${v:.4f}" for k, v in (cost.get("by_variant") or {}).items()]
        by += [f"{k} ${v:.4f}" for k, v in (cost.get("by_judge") or {}).items()]
        parts.append(f"${cost['total']:.4f}" + (f" ({', '.join(by)})" if by else ""))
    if budget:
        parts.append(f"budget ${budget.get('max_usd', 0):.2f}, spent ${budget.get('spent_usd', 0):.4f}"
                     + (f" — {budget['stopped']}" if budget.get("stopped") else ""))
    return "; ".join(parts) or None
