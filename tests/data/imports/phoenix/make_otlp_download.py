"""Write otlp_download.json: the spans of spans_dataframe_llamaindex_rag.parquet as Phoenix's
"Download OTLP JSON" writes them (no real download is public; see README.md).

It follows Phoenix's own writer at Arize-ai/phoenix 9478f954bbc6175a0eaef398d0a92c1d967c3bfe:
the browser wraps the pages of `GET /v1/projects/{id}/spans/otlpv1` in the envelope
`{"resource_spans":[{"scope_spans":[{"spans":[` … `]}]}]}`
(js/app/src/components/trace/spanDownloadUtils.ts), and the server writes each span as
src/phoenix/server/api/routers/v1/spans.py `span_search_otlpv1` does: hex `trace_id`,
`span_id`, `parent_span_id`, integer `start_time_unix_nano`/`end_time_unix_nano`, the stored
(nested) attributes flattened with `flatten(…, recurse_on_sequence=True)` into
`{"key", "value": {"string_value" | "int_value" | "double_value" | "bool_value" |
"array_value"}}`, and `status {code, message}`. The parquet's flat `attributes.*` columns are
first nested again, as Phoenix stores them. Run: python make_otlp_download.py
"""

import json
from pathlib import Path

import duckdb

HERE = Path(__file__).parent
STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def nest(flat: dict) -> dict:
    out: dict = {}
    for key, value in flat.items():
        if value is None:
            continue
        cur = out
        parts = key.split(".")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = nest_value(value)
    return out


def nest_value(v):
    if isinstance(v, dict):
        return nest(v)
    if isinstance(v, list):
        return [nest_value(x) for x in v]
    return v


def flatten(obj, prefix=""):
    """phoenix.trace.attributes.flatten(obj, recurse_on_sequence=True)"""
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            yield from flatten(v, key)
        elif isinstance(v, list) and any(isinstance(x, dict) for x in v):
            for i, x in enumerate(v):
                if isinstance(x, dict):
                    yield from flatten(x, f"{key}.{i}")
        else:
            yield key, v


def any_value(v):
    """spans.py `_to_any_value`"""
    if v is None:
        return {}
    if isinstance(v, bool):
        return {"bool_value": v}
    if isinstance(v, int):
        return {"int_value": v}
    if isinstance(v, float):
        return {"double_value": v if v == v and abs(v) != float("inf") else str(v)}
    if isinstance(v, str):
        return {"string_value": v}
    if isinstance(v, list):
        return {"array_value": {"values": [any_value(x) for x in v]}}
    return {}


def main() -> None:
    con = duckdb.connect()
    cur = con.execute("SELECT * FROM read_parquet(?)",
                      [str(HERE / "spans_dataframe_llamaindex_rag.parquet")])
    cols = [d[0] for d in cur.description]
    spans = []
    for row in cur.fetchall():
        r = dict(zip(cols, row))
        attrs = nest({k[len("attributes."):]: v for k, v in r.items()
                      if k.startswith("attributes.")})
        span = {"trace_id": r["context.trace_id"], "span_id": r["context.span_id"],
                "parent_span_id": r["parent_id"], "name": r["name"],
                "start_time_unix_nano": int(r["start_time"].timestamp() * 1_000_000_000),
                "end_time_unix_nano": int(r["end_time"].timestamp() * 1_000_000_000),
                "attributes": [{"key": k, "value": any_value(v)} for k, v in flatten(attrs)],
                "status": {"code": STATUS.get(r["status_code"] or "UNSET", 0),
                           "message": r["status_message"] or None}}
        spans.append({k: v for k, v in span.items() if v is not None})
    body = ",".join(json.dumps(s, separators=(",", ":"), ensure_ascii=False) for s in spans)
    (HERE / "otlp_download.json").write_text(
        '{"resource_spans":[{"scope_spans":[{"spans":[' + body + "]}]}]}", encoding="utf-8")


if __name__ == "__main__":
    main()
