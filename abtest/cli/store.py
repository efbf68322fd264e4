"""`abtest export`: every table of one run, for notebooks and BI tools."""

from __future__ import annotations


import click

from .common import open_store, resolve_run


@click.command()
@click.argument("run_id", required=False)
@click.option("--all", "all_runs", is_flag=True, help="Every run in the store, one file per table.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl", "csv"]), default="parquet",
              show_default=True)
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.pass_context
def export(ctx, run_id, all_runs, fmt, out):
    """Write every table of one run (or --all runs) for notebooks and BI tools."""
    from pathlib import Path

    from ..errors import UserError
    from ..runs import load_run

    if bool(run_id) == all_runs:
        raise UserError("give a RUN_ID or --all (not both)", field="RUN_ID")
    lc, store = open_store(ctx)
    try:
        if run_id:
            run_id = resolve_run(store, run_id)
            load_run(store, run_id)
        for p in store.export_run(run_id, Path(out), fmt):
            click.echo(str(p))
    finally:
        store.close()


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--into", "into", required=True, help="Id of the merged run (new).")
@click.pass_context
def merge(ctx, sources, into):
    """Merge shards (run --shard i/n) into one run: SOURCE is a run id, OTHER.duckdb:RUN_ID,
    or an `export --format parquet` folder."""
    lc, store = open_store(ctx, read_only=False)
    try:
        from ..merge import merge_runs

        res = merge_runs(store, list(sources), into)
    finally:
        store.close()
    from .common import keep_summary, progress

    progress(f"merged {res['sources']} run(s): {res['cases']} of {res['n_cases']} cases, "
             f"{res['status']}")
    click.echo(res["run_id"])
    keep_summary(lc.store_path, res["run_id"])
