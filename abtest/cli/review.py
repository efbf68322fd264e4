"""`abtest review …` (blind human labels) and `abtest judge-check` (a labelled set)."""

from __future__ import annotations


import click

from abtest.cli.common import load, open_store, progress, resolve_run


@click.command("judge-check")
@click.argument("judge", type=click.Choice(["pairwise", "faithfulness"]))
@click.option("--data", required=True, type=click.Path(dir_okay=False),
              help="LLMBar-format (pairwise) or FaithBench-format (faithfulness) JSONL.")
@click.option("--limit", type=int, default=None, help="Only the first N rows.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def judge_check(ctx, judge, data, limit, fmt):
    """Validate the configured judge against a human-labelled set: accuracy, consistency, kappa."""
    import json

    from abtest.judges import validate as judgecheck

    fn = judgecheck.check_pairwise if judge == "pairwise" else judgecheck.check_faithfulness
    res = fn(load(ctx), data, limit=limit, progress=progress)
    if fmt == "json":
        click.echo(json.dumps(res, indent=2))
        return
    for k, v in res.items():
        click.echo(f"{k:>24}: {v:.3f}" if isinstance(v, float) else f"{k:>24}: {v}")


# --------------------------------------------------------------------------- human review
@click.group()
def review():
    """Blind human labels for judge validation: export a pack, import labels, status."""


@review.command("export")
@click.argument("run_id")
@click.option("--n", default=40, show_default=True,
              help="Items per judge (pairwise, claims, coverage points, abstention), "
                   "stratified by the judge's verdict; plus up to N pairwise disagreements.")
@click.option("--seed", default=0, show_default=True)
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="Pack folder [results/review/RUN_ID].")
@click.pass_context
def review_export(ctx, run_id, n, seed, out):
    """Write a blind review pack (items.jsonl, labels.csv, review.html)."""
    from pathlib import Path

    from abtest.api import review_export as export

    lc = load(ctx)
    res = export(run_id, Path(out) if out else None, n=n, seed=seed, config=lc, progress=False)
    run_id = res["run_id"]
    for p in res["paths"]:
        click.echo(str(p))
    c = res["counts"]
    progress(f"{res['n_items']} items to label (pairwise {c['pairwise_flagged']} disagreements "
              f"+ {c['pairwise_sampled']}, claims {c['claims']}, coverage points "
              f"{c['coverage_points']}, abstention {c['abstention_answers']}); each judge is "
              f"validated on its own items. Then: abtest review import {run_id} FILE")


@review.command("import")
@click.argument("run_id")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--reviewer", default=None, help="Reviewer name [from the file, else the OS user].")
@click.pass_context
def review_import(ctx, run_id, file, reviewer):
    """Validate and store labels (all or nothing)."""
    from abtest import review as rv

    lc, store = open_store(ctx, read_only=False)
    try:
        run_id = resolve_run(store, run_id)
        n = rv.import_labels(store, run_id, file, reviewer=reviewer)
        from abtest.reporting.summary import refresh_summary

        refresh_summary(store, run_id)  # the labels may change the claim `abtest view` lists
    finally:
        store.close()
    click.echo(f"imported {n} label(s)")


@review.command("status")
@click.argument("run_id")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def review_status(ctx, run_id, fmt):
    """Labels so far, agreement (kappa) per judge, and how many more the validation rule needs."""
    import json

    from abtest import review as rv

    lc, store = open_store(ctx)
    try:
        run_id = resolve_run(store, run_id)
        st = rv.status(store, run_id)
    finally:
        store.close()
    if fmt == "json":
        click.echo(json.dumps(st, default=str, indent=2))
    else:
        click.echo(rv.render_status(st), nl=False)
