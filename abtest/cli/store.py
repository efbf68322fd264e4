"""`abtest export`: every table of one run, for notebooks and BI tools."""

from __future__ import annotations


import click

from .common import open_store, resolve_run


@click.command()
@click.argument("run_id")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl", "csv"]), default="parquet",
              show_default=True)
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.pass_context
def export(ctx, run_id, fmt, out):
    """Write every table of one run for notebooks and BI tools."""
    from pathlib import Path

    from ..runs import load_run

    lc, store = open_store(ctx)
    try:
        run_id = resolve_run(store, run_id)
        load_run(store, run_id)
        for p in store.export_run(run_id, Path(out), fmt):
            click.echo(str(p))
    finally:
        store.close()
