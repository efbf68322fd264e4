"""`abtest export`: every table of one run, for notebooks and BI tools."""

from __future__ import annotations


import click

from abtest.cli.common import load


@click.command()
@click.argument("run_id", required=False)
@click.option("--all", "all_runs", is_flag=True, help="Every run in the store, one file per table.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl", "csv"]), default="parquet",
              show_default=True)
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.pass_context
def export(ctx, run_id, all_runs, fmt, out):
    """Write every table of one run (or --all runs) for notebooks and BI tools."""
    from abtest.api import export as do_export
    from abtest.errors import UserError

    if bool(run_id) == all_runs:
        raise UserError("give a RUN_ID or --all (not both)", field="RUN_ID")
    for p in do_export(run_id, out, fmt=fmt, config=load(ctx)):
        click.echo(str(p))


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--into", "into", required=True, help="Id of the merged run (new).")
@click.pass_context
def merge(ctx, sources, into):
    """Merge shards (run --shard i/n) into one run: SOURCE is a run id, OTHER.duckdb:RUN_ID,
    or an `export --format parquet` folder."""
    from abtest.api import merge as do_merge
    from abtest.cli.common import progress

    h = do_merge(list(sources), into, config=load(ctx), progress=progress)
    click.echo(h.run_id)


@click.command("runs")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
@click.pass_context
def runs(ctx, fmt):
    """Every run, newest first: its state (running, interrupted, stopped, incomplete,
    complete), cases finished of all, gate and claim line — what `abtest view` lists."""
    import json

    from abtest.api import list_runs
    from abtest.cli.common import progress

    rows = list_runs(config=load(ctx), progress=progress)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        click.echo("no runs yet", err=True)
        return
    from tabulate import tabulate

    table = [[r["run_id"], r["kind"], r["status"],
              r.get("counts") or f"{r.get('n_finished', '?')} of {r['n_cases']} cases finished",
              r.get("gate") or "—", (r.get("claim") or "")[:90]] for r in rows]
    click.echo(tabulate(table, headers=["run", "kind", "state", "cases", "gate", "claim"],
                        disable_numparse=True))
    for r in rows:   # whole, on a line of its own: a command is pasted, never read cut
        if r.get("resume"):
            click.echo(f"\nresume {r['run_id']} ({r['status']}):\n  {r['resume']}")
