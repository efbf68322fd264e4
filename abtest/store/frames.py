"""A run's rows as pandas DataFrames (`Report.cases_frame()`, `.metrics_frame()`,
`.incidents_frame()`), built by DuckDB (`.df()`) from the store's tables, so a frame holds what
the store holds, typed as DuckDB types it. What the store does not hold is the report's: its
per-case finished state and questions (the one run-state rule), its incidents (the one
definition) and its metrics are handed to the same SQL as lists, never re-derived here.

pandas is an optional extra (`abtest[pandas]`): without it each call is one line saying how
to install it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from abtest.errors import UserError

if TYPE_CHECKING:
    import pandas

    from abtest.store.results import Store

INSTALL = "pip install 'abtest[pandas]'"


def need_pandas(what: str) -> None:
    """Refuse in one line, before any work, when pandas is not importable."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise UserError(f"{what} needs pandas, an optional extra: {INSTALL}") from None


def _con(store: Store) -> Any:
    if store.con is None:
        raise UserError("another process is writing this store; frames read the file itself: "
                        "wait for it to finish", file=str(store.path))
    return store.con


def _column(*parts: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", "_".join(parts).lower()).strip("_")


def cases_frame(store: Store, r: dict) -> pandas.DataFrame:
    """One row per case of the report, in its order: ids, question, both answers (and their
    errors), every judge's verdict and score as `{judge}_{subject}_verdict` / `_score` (the
    first sample), the case's incidents and whether it finished."""
    need_pandas("Report.cases_frame()")
    con = _con(store)
    rid = r["run_id"]
    rows = r.get("per_case") or []
    inc: dict[str, list[str]] = {}
    for i in r.get("incidents") or []:
        inc.setdefault(i["case_id"], []).append(i["variant"])
    pairs = con.execute("SELECT DISTINCT judge, subject FROM judgments WHERE run_id = ? "
                        "ORDER BY judge, subject", [rid]).fetchall()
    cols = []
    for judge, subject in pairs:
        j, s = judge.replace("'", "''"), subject.replace("'", "''")
        for field in ("verdict", "score"):
            cols.append(f"max(j.{field}) FILTER (WHERE j.judge = '{j}' AND j.subject = '{s}') "
                        f'AS "{_column(judge, subject, field)}"')
    judged = ("SELECT j.case_id" + "".join(f", {c}" for c in cols)
              + " FROM judgments j WHERE j.run_id = $rid AND j.sample = 0 GROUP BY j.case_id")
    sql = f"""
        WITH c AS (
            SELECT UNNEST($ids::VARCHAR[]) AS case_id, UNNEST($ord::INTEGER[]) AS ord,
                   UNNEST($q::VARCHAR[]) AS question, UNNEST($fin::BOOLEAN[]) AS finished,
                   UNNEST($inc::VARCHAR[]) AS incidents),
        j AS ({judged})
        SELECT $rid AS run_id, c.case_id, c.question, ga.answer AS answer_a,
               gb.answer AS answer_b, ga.error AS error_a, gb.error AS error_b,
               j.* EXCLUDE (case_id), c.incidents, c.finished
        FROM c
        LEFT JOIN generations ga ON ga.run_id = $rid AND ga.case_id = c.case_id
                                 AND ga.variant = 'A'
        LEFT JOIN generations gb ON gb.run_id = $rid AND gb.case_id = c.case_id
                                 AND gb.variant = 'B'
        LEFT JOIN j ON j.case_id = c.case_id
        ORDER BY c.ord"""
    return con.execute(sql, {
        "rid": rid, "ids": [x["case_id"] for x in rows], "ord": list(range(len(rows))),
        "q": [x.get("question") for x in rows], "fin": [bool(x.get("finished")) for x in rows],
        "inc": [",".join(inc.get(x["case_id"], [])) for x in rows]}).df()


METRIC_KEYS = ("pairwise", "faithfulness", "coverage", "quality", "relevance", "conformance")


def metrics_frame(store: Store, r: dict) -> pandas.DataFrame:
    """One row per metric the report estimates: metric, A, B, difference, CI, p, Holm p, N
    and groups (the report's numbers; the store holds no estimates)."""
    need_pandas("Report.metrics_frame()")
    m = r.get("metrics") or {}
    found = [(k, m[k]) for k in METRIC_KEYS if m.get(k)]
    found += [(f"abstention_{s}", m["abstention"][s]) for s in ("answerable", "unanswerable")
              if (m.get("abstention") or {}).get(s)]
    n_groups = (r.get("groups") or {}).get("n_groups")

    def col(key: str) -> list[Any]:
        return [v.get(key) for _, v in found]

    return _con(store).execute("""
        SELECT UNNEST($metric::VARCHAR[]) AS metric, UNNEST($a::DOUBLE[]) AS a,
               UNNEST($b::DOUBLE[]) AS b, UNNEST($d::DOUBLE[]) AS difference,
               UNNEST($lo::DOUBLE[]) AS ci_low, UNNEST($hi::DOUBLE[]) AS ci_high,
               UNNEST($p::DOUBLE[]) AS p_value, UNNEST($ph::DOUBLE[]) AS p_holm,
               UNNEST($n::BIGINT[]) AS n, UNNEST($g::BIGINT[]) AS n_groups""", {
        "metric": [k for k, _ in found], "a": col("a"), "b": col("b"), "d": col("difference"),
        "lo": col("ci_low"), "hi": col("ci_high"), "p": col("p_value"), "ph": col("p_holm"),
        "n": col("n"), "g": [v.get("n_groups") or n_groups for _, v in found]}).df()


def incidents_frame(store: Store, r: dict) -> pandas.DataFrame:
    """One row per incident of the report (an answer below the incident faithfulness): case,
    variant, its faithfulness, the answer and the statements of it the context does not
    support, from the store's claims."""
    need_pandas("Report.incidents_frame()")
    incs = r.get("incidents") or []
    return _con(store).execute("""
        WITH i AS (
            SELECT UNNEST($ids::VARCHAR[]) AS case_id, UNNEST($v::VARCHAR[]) AS variant,
                   UNNEST($f::DOUBLE[]) AS faithfulness, UNNEST($ord::INTEGER[]) AS ord),
        u AS (
            SELECT case_id, variant, list(claim ORDER BY idx) AS unsupported
            FROM claims WHERE run_id = $rid AND verdict <> 'supported'
            GROUP BY case_id, variant)
        SELECT $rid AS run_id, i.case_id, i.variant, i.faithfulness, g.answer,
               coalesce(u.unsupported, []::VARCHAR[]) AS unsupported
        FROM i
        LEFT JOIN generations g ON g.run_id = $rid AND g.case_id = i.case_id
                                AND g.variant = i.variant
        LEFT JOIN u ON u.case_id = i.case_id AND u.variant = i.variant
        ORDER BY i.ord""", {
        "rid": r["run_id"], "ids": [x["case_id"] for x in incs],
        "v": [x["variant"] for x in incs], "f": [x["faithfulness"] for x in incs],
        "ord": list(range(len(incs)))}).df()
