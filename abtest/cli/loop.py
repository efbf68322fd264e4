"""The improvement loop: golden drafts, suggestions, history, compare."""

from __future__ import annotations


import click

from abtest.cli.common import load, open_store, progress, resolve_run


# --------------------------------------------------------------------------- golden
@click.group()
def golden():
    """Golden question sets: draft from documents with the judge model, confirm by hand."""


@golden.command("draft")
@click.option("--docs", required=True, type=click.Path(),
              help="Folder of .txt/.md files (one chunk per paragraph, id FILE#pK) or a corpus "
                   ".jsonl ({\"id\", \"text\", \"title\"?}).")
@click.option("--n", "n", default=30, show_default=True, type=int,
              help="Size of the golden set; an existing file is extended to it.")
@click.option("--out", default="golden.json", show_default=True, type=click.Path(dir_okay=False),
              help="Golden file (.json list, or .jsonl); extended if it exists, never replaced.")
@click.option("--seed", default=None, type=int, help="Document sampling seed [config seed].")
@click.option("--corpus-out", default=None, type=click.Path(dir_okay=False),
              help="Also write the chunks as a corpus JSONL for `abtest index`, so retrieval "
                   "uses the same chunk ids.")
@click.pass_context
def golden_draft(ctx, docs, n, out, seed, corpus_out):
    """Draft questions in the shares factual 40%, multi-chunk 20%, out-of-scope 15%,
    edge 15%, temporal 10%, each marked draft: true until `abtest golden confirm`."""
    from tabulate import tabulate

    from abtest.capturing import golden as g
    from abtest.errors import UserError

    lc = load(ctx)
    if n < 1:
        raise UserError("--n must be at least 1", field="n")
    if corpus_out:
        path = g.write_corpus(g.load_docs(docs), corpus_out)
        progress(f"wrote the chunks to {path} (abtest index {path})")
    res = g.draft_golden(lc, docs, out, n=n, seed=seed, progress=progress)
    for w in res.warnings:
        click.echo(f"warning: {w}", err=True)
    rows = [[c, res.targets[c], res.counts[c]] for c in g.CATEGORY_ORDER]
    click.echo(tabulate(rows, headers=["category", "target", "have"]))
    if res.added:
        click.echo(f"drafted {len(res.added)} question(s), kept {res.kept} → {res.path} "
                   f"(all new items draft: true; prompt {g.PROMPT_NAME} "
                   f"{res.prompt_sha256[:12]}…, model {res.model})")
        click.echo(f"review them, then: abtest golden confirm {res.path} --ids ID,… (or --all)")
    elif not res.failed:
        click.echo(f"nothing to draft: {res.path} already meets the shares for n={n}")
    g.raise_if_incomplete(res)


@golden.command("confirm")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--ids", "ids", multiple=True,
              help="Question ids to confirm (comma-separated, repeatable).")
@click.option("--all", "all_items", is_flag=True, help="Confirm every question in the file.")
def golden_confirm(file, ids, all_items):
    """Mark reviewed questions as confirmed (draft: false)."""
    from abtest.errors import UserError
    from abtest.capturing.golden import confirm_golden

    wanted = [i.strip() for chunk in ids for i in chunk.split(",") if i.strip()]
    if all_items and wanted:
        raise UserError("pass either --ids or --all, not both", file=file)
    res = confirm_golden(file, ids=wanted, all_items=all_items)
    click.echo(f"confirmed {len(res['confirmed'])} question(s)"
               + (f" ({len(res['already_confirmed'])} already confirmed)" if res["already_confirmed"]
                  else "")
               + f"; {res['remaining_drafts']} of {res['n']} still draft → {res['path']}")
    if res["confirmed"]:
        progress("fixtures captured earlier still carry draft: true; re-capture to drop the label")


# --------------------------------------------------------------------------- suggest
@click.command("suggest")
@click.argument("run_id")
@click.option("--variant", default="B", show_default=True,
              help="Which variant of the run to improve: A, B, or its name.")
@click.option("--out", default=None, type=click.Path(dir_okay=False),
              help="Where to write the suggestion [VARIANT_DIR/NAME-suggested.yaml].")
@click.option("--force", is_flag=True, help="Replace a previous suggestion file.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def suggest(ctx, run_id, variant, out, force, fmt):
    """Ask the judge model for small, surgical prompt edits from the run's report; write
    NAME-suggested.yaml and print the diff. Never replaces a variant."""
    from abtest.store import Store
    from abtest.reporting.suggest import result_json, suggest_edits

    lc = load(ctx)
    store = Store(lc.store_path, read_only=False, create=False)
    try:
        run_id = resolve_run(store, run_id)
        res = suggest_edits(lc, store, run_id, variant=variant, out=out, force=force,
                            progress=progress)
    finally:
        store.close()
    if fmt == "json":
        click.echo(result_json(res))
        return
    if res.diff:
        click.echo(res.diff, nl=not res.diff.endswith("\n"))
    for e in res.edits:
        click.echo(f"edit: {e}", err=True)
    if res.rationale:
        click.echo(f"why: {res.rationale}", err=True)
    for w in res.warnings:
        click.echo(f"warning: {w}", err=True)
    if res.path:
        progress(f"wrote {res.path}")
    if res.next_step:
        progress(res.next_step)


# --------------------------------------------------------------------------- history
@click.command("history")
@click.option("--fixture", default=None, help="Only runs on this fixture (folder, cases_sha256 or name).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
def history(ctx, fixture, fmt):
    """Every run: date, fixture hash, variants (name + sha256), models, git commit, headline results."""
    import json

    from abtest.reporting.compare import history_table, run_history

    lc, store = open_store(ctx)
    try:
        rows = run_history(store, fixture)
    finally:
        store.close()
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, default=str))
    elif rows:
        click.echo(history_table(rows))
    else:
        click.echo("no runs yet", err=True)


@click.command("compare")
@click.argument("run1")
@click.argument("run2")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--changed-only", is_flag=True, help="Show only the cases whose outcome changed.")
@click.pass_context
def compare(ctx, run1, run2, fmt, changed_only):
    """Which cases flipped between two runs on the same fixture (pairwise outcome, B faithfulness)."""
    import json

    from abtest.reporting.compare import compare_runs, compare_table

    lc, store = open_store(ctx)
    try:
        cmp = compare_runs(store, resolve_run(store, run1), resolve_run(store, run2))
    finally:
        store.close()
    if fmt == "json":
        click.echo(json.dumps(cmp, indent=2, default=str))
    else:
        click.echo(compare_table(cmp, changed_only=changed_only))
