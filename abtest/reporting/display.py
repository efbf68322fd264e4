"""A report at a glance, for a notebook cell or a `repr()`: the verdict sentence, the gate, N
(cases and groups) and the main metrics table, in under 2 KB, where the full report is tens
of kilobytes. Reads a report's JSON shape (`model.json_shape`) and takes every sentence from
`notes` and every row from `metric_rows`, the Markdown report's own, so a glance never says
something the report does not."""

from __future__ import annotations

from abtest.core.fmt import clip, interval, num, pct
from abtest.reporting import notes
from abtest.reporting.pages import environment

MAIN_METRICS = ("pairwise", "faithfulness", "coverage", "quality", "relevance", "conformance")
METRIC_HEADERS = ["metric", "N", "A", "B", "B − A", "CI", "test", "p", "Holm p"]
REASONS_SHOWN = 2     # a glance shows the first reasons; the report has them all
REASON_CHARS = 160


def metric_rows(r: dict) -> list[list]:
    """(metric, N, A, B, B − A, CI, test, p, Holm p) for each main metric and abstention
    subgroup a report has: the Markdown report's "Metric scores" table."""
    m = r.get("metrics") or {}
    rows = []
    for key in MAIN_METRICS:
        mm = m.get(key)
        if not mm:
            continue
        rows.append([key, mm["n"], num(mm["a"]), num(mm["b"]), num(mm["difference"], signed=True),
                     interval(mm.get("ci_low"), mm.get("ci_high")), mm["test"].split(" ")[0],
                     num(mm["p_value"]), num(mm.get("p_holm"))])
    for sub in ("answerable", "unanswerable"):
        mm = (m.get("abstention") or {}).get(sub)
        if mm and mm["n"]:
            rows.append([f"abstention ({sub})", mm["n"], num(mm["a"]), num(mm["b"]),
                         num(mm["difference"], signed=True),
                         interval(mm.get("ci_low"), mm.get("ci_high")), mm["test"],
                         num(mm["p_value"]), num(mm.get("p_holm"))])
    return rows


def _glance_rows(r: dict) -> list[list[str]]:
    """The glance's table: metric, N, A, B, B − A and its interval (p values are the full
    report's)."""
    return [[str(x) for x in row[:6]] for row in metric_rows(r)]


def _header(r: dict) -> str:
    grp = r.get("groups") or {}
    groups = f", {grp['n_groups']} groups" if grp.get("n_groups") is not None else ""
    v = r.get("variants") or {}
    return (f"run {clip(r.get('run_id'), 60)} ({r.get('status')}): "
            f"{notes.counts(r)}{groups}; "
            f"A = {clip((v.get('a') or {}).get('name'), 40)}, "
            f"B = {clip((v.get('b') or {}).get('name'), 40)}")


def _reasons(r: dict) -> tuple[list[str], int]:
    rs = notes.claim_reasons(r.get("claim") or {})
    return [clip(x, REASON_CHARS) for x in rs[:REASONS_SHOWN]], max(0, len(rs) - REASONS_SHOWN)


def _gate(r: dict) -> notes.Sentence:
    g = dict(r.get("gate") or {})
    g["reasons"] = [clip(x, REASON_CHARS) for x in (g.get("reasons") or [])[:1]]
    return notes.gate_line(g)


def _level(r: dict) -> str:
    return pct(1 - (r.get("holm") or {}).get("alpha", 0.05))


def glance_markdown(r: dict) -> str:
    """The glance in Markdown (a notebook's `_repr_markdown_`)."""
    md = notes.markdown
    out = [f"**abtest report** — {_header(r)}", ""]
    if r.get("demo_judge"):
        out += [f"> {clip(r['demo_judge'], 300)}", ""]
    out += [md(_claim(r))]
    reasons, more = _reasons(r)
    out += [f"- {x}" for x in reasons] + ([f"- … {more} more in the full report"] if more else [])
    out += ["", md(_gate(r))]
    rows = _glance_rows(r)
    if rows:
        heads = METRIC_HEADERS[:5] + [f"{_level(r)} CI"]
        out += ["", "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def _claim(r: dict) -> notes.Sentence:
    c = dict(r.get("claim") or {})
    if c.get("sentence"):
        c["sentence"] = clip(c["sentence"], 300)
    return notes.claim_heading(c)


def glance(r: dict) -> dict:
    """What a glance shows, for the HTML template (templates/glance.html)."""
    reasons, more = _reasons(r)
    return {"header": _header(r), "demo_judge": clip(r.get("demo_judge"), 300),
            "claim": _claim(r), "reasons": reasons, "more": more, "gate": _gate(r),
            "heads": METRIC_HEADERS[:5] + [f"{_level(r)} CI"], "rows": _glance_rows(r)}


def glance_html(r: dict) -> str:
    """The glance in HTML (a notebook's `_repr_html_`), rendered and escaped by the one
    Jinja environment."""

    return environment().get_template("glance.html").render(g=glance(r))


def short_repr(r: dict) -> str:
    """`repr(report)`: which run, its state, the claim and the gate, in one short line."""
    c = r.get("claim") or {}
    return (f"<abtest Report run={clip(r.get('run_id'), 60)!r} status={r.get('status')!r} "
            f"cases={notes.counts(r)!r} "
            f"claim={'licensed' if c.get('licensed') else 'withheld'} "
            f"gate={(r.get('gate') or {}).get('decision')!r}>")
