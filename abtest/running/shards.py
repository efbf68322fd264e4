"""`abtest merge`: shards of one comparison, run on several machines, as one run.

A source is a run id in this store, `OTHER.duckdb:RUN_ID` (another machine's store), or a
folder `abtest export RUN_ID --format parquet` wrote (`FOLDER:RUN_ID` when it holds several
runs). The sources must be the same comparison: the same fixture bytes, both variants' bytes,
the same models and the same config; their cases must not overlap. The merged run holds
every source's rows under the new id, so its report is the report of one run over the same
answers.
"""

from __future__ import annotations

import hashlib

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from abtest.errors import UserError
from abtest.store import Store, read_export
from abtest.store.runs import load_run, resolve_run
from abtest.core.names import check_id

if TYPE_CHECKING:
    from abtest.store import Store

SAME = ("fixture_sha256", "variant_a_sha256", "variant_b_sha256", "generator_model",
        "judge_model", "comparison_kind")
# settings that change how a machine runs, never what a run measures
OPERATIONAL = ("store", "concurrency", "timeout_s", "max_retries", "retry_backoff_s",
               "max_cost_usd", "batch_poll_s", "retriever")
MODEL_OPERATIONAL = ("concurrency", "rpm", "tpm")   # a model's pacing, not its answers


def _measured(config_json: str | None) -> dict:
    cfg = json.loads(config_json or "{}")
    out = {k: v for k, v in cfg.items() if k not in OPERATIONAL}
    for k, v in out.items():
        if isinstance(v, dict) and "model" in v:
            out[k] = {f: x for f, x in v.items() if f not in MODEL_OPERATIONAL}
    return out


def load_source(store: Store, source: str) -> tuple[str, dict, dict[str, list[dict]]]:
    """(label, run row, rows by table) of one source."""

    left, sep, rid = source.rpartition(":")
    path = Path(left) if sep else Path(source)
    if sep and not path.exists():   # run ids hold no ':', so this names a file that is not there
        raise UserError(f"store or export folder {left!r} not found", file=source, field="SOURCE")
    if sep and path.exists() or (not sep and path.is_dir()):
        if path.is_dir():
            data = read_export(path)
            runs = data.pop("runs")
            ids = sorted(r["run_id"] for r in runs)
            pick = rid if sep else (ids[0] if len(ids) == 1 else None)
            run = next((r for r in runs if r["run_id"] == pick), None)
            if run is None:
                raise UserError(f"name the run (FOLDER:RUN_ID); this export holds "
                                f"{', '.join(ids) or 'no run'}", file=str(path))
            return source, run, {t: [r for r in rows if r["run_id"] == pick]
                                 for t, rows in data.items()}
        other = Store(path, read_only=True, create=False)
        try:
            run = other.get_run(rid)
            if run is None:
                raise UserError(f"no run {rid!r} in that store", file=str(path))
            return source, run, other.run_rows(rid)
        finally:
            other.close()

    rid = resolve_run(store, source)
    return source, load_run(store, rid), store.run_rows(rid)  # load_run refuses an unknown id


def merge_runs(store: Store, sources: list[str], into: str) -> dict[str, Any]:
    """Check the sources are shards of one comparison and store them as run `into`."""

    check_id(into, field="--into")
    if store.get_run(into) is not None:
        raise UserError(f"run {into!r} already exists; merge into a new id", field="--into")
    if not sources:
        raise UserError("name the runs to merge", field="SOURCE")
    loaded = [load_source(store, s) for s in sources]
    first_label, first, _ = loaded[0]
    for label, run, _ in loaded:
        if run["kind"] != "frozen":
            raise UserError(f"{label}: a {run['kind']} run; only frozen runs merge", field="SOURCE")
        if json.loads(run.get("info_json") or "{}").get("sequential"):
            raise UserError(f"{label}: a sequential run took its cases look by look in one order; "
                            "it is one run already and merges with nothing", field="SOURCE")
        for k in SAME:
            if run[k] != first[k]:
                raise UserError(f"{label} and {first_label} are not the same comparison: their "
                                f"{k} differ", field="SOURCE")
        mine, theirs = _measured(run["config_json"]), _measured(first["config_json"])
        if mine != theirs:
            keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            raise UserError(f"{label} and {first_label} are not the same comparison: their "
                            f"config differs in {', '.join(keys)}", field="SOURCE")
    owner: dict[str, str] = {}
    rows: dict[str, list[dict]] = {}
    for label, _run, by_table in loaded:
        for cid in sorted({g["case_id"] for g in by_table.get("generations", [])}):
            if cid in owner:
                raise UserError(f"case {cid!r} is in both {owner[cid]} and {label}; shards must "
                                "not overlap", field="SOURCE")
            owner[cid] = label
        for t, items in by_table.items():
            rows.setdefault(t, []).extend(items)
    infos = [json.loads(run.get("info_json") or "{}") for _, run, _ in loaded]
    info = {k: v for k, v in infos[0].items() if k != "shard"}
    info["merged_from"] = [{"source": label, "run_id": run["run_id"],
                            "shard": i.get("shard"), "cases": sum(1 for o in owner.values()
                                                                   if o == label)}
                           for (label, run, _), i in zip(loaded, infos)]
    shards = {tuple(i["shard"]) for i in infos if i.get("shard")}
    complete = (all(run["status"] == "complete" for _, run, _ in loaded)
                and len(owner) == first["n_cases"])
    created = [r["created_at"] for _, r, _ in loaded if r.get("created_at")]
    finished = [r["finished_at"] for _, r, _ in loaded if r.get("finished_at")]
    run_row = {**first, "run_id": into, "status": "complete" if complete else "incomplete",
               "info_json": json.dumps(info, sort_keys=True, default=str),
               "created_at": min(created) if created else datetime.now(),
               "finished_at": max(finished) if finished else None}
    store.put_merged_run(run_row, rows)
    return {"run_id": into, "status": run_row["status"], "cases": len(owner),
            "n_cases": first["n_cases"], "sources": len(loaded),
            "shards": sorted(shards)}


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'i/n' (1 ≤ i ≤ n ≤ 1000) -> (i, n)."""
    if text is None:
        return None
    i, sep, n = str(text).partition("/")
    try:
        i_, n_ = int(i), int(n)
    except ValueError:
        i_ = n_ = 0
    if not sep or not 1 <= i_ <= n_ <= 1000:
        raise UserError(f"--shard {text!r}: expected i/n with 1 ≤ i ≤ n ≤ 1000, e.g. 2/4",
                        field="--shard")
    return i_, n_


def in_shard(case_id: str, shard: tuple[int, int]) -> bool:
    """A case's shard depends on its id alone: every machine slices a fixture the same way."""
    i, n = shard
    return int(hashlib.sha256(case_id.encode("utf-8")).hexdigest(), 16) % n == i - 1
