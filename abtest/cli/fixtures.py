"""`abtest fixtures …`: integrity, staleness and coverage, churn, counterfactual cases."""

from __future__ import annotations


import click



# --------------------------------------------------------------------------- fixtures
@click.group()
def fixtures():
    """Fixture integrity, staleness and coverage, churn between captures."""


@fixtures.command("verify")
@click.argument("path", type=click.Path())
def fixtures_verify(path):
    """Recompute the sha256 seal; any edited byte exits 2 naming the case."""
    from abtest.core.fixture_set import load_fixture

    fx = load_fixture(path)
    click.echo(f"ok: {fx.path}: {len(fx.cases)} cases, cases_sha256 {fx.cases_sha256}")


@fixtures.command("seal")
@click.argument("path", type=click.Path())
@click.option("--refresh-every-days", type=click.IntRange(min=1), default=None,
              help="Days until the fixture is due for re-capture [kept when the cases are "
                   "unchanged, else 30].")
def fixtures_seal(path, refresh_every_days):
    """Seal a hand-written cases.jsonl (canonicalise, write manifest.json).

    Re-sealing cases the old manifest still seals (an upgrade to the current seal) keeps
    their capture time and refresh schedule."""
    from abtest.core.fixture_set import seal_fixture

    fx = seal_fixture(path, refresh_every_days=refresh_every_days)
    click.echo(f"sealed {len(fx.cases)} cases → {fx.path}/manifest.json")


@fixtures.command("status")
@click.argument("path", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--group-by", default=None, metavar="FIELD",
              help="What makes cases one group besides repeats: a case field, meta.KEY or "
                   "document [group_by in abtest.yaml, else each case's `group`].")
@click.pass_context
def fixtures_status(ctx, path, fmt, group_by):
    """Age vs refresh schedule; coverage of categories and awkward cases; groups (warnings,
    exit 0)."""
    import json

    from abtest.capturing import fixture_status, load_fixture
    from abtest.core.groups import check_group_by
    from abtest.cli.common import load

    group_by = check_group_by(group_by, "--group-by") if group_by is not None else \
        load(ctx).config.group_by
    st = fixture_status(load_fixture(path), group_by=group_by)
    if fmt == "json":
        click.echo(json.dumps(st, indent=2))
        return
    from tabulate import tabulate

    click.echo(f"{st['name']}: {st['n_cases']} cases ({st['answerable']} answerable, "
               f"{st['unanswerable']} unanswerable), captured {st['captured_at']} "
               f"({st['age_days']} days ago), next refresh {st['next_refresh']}")
    rows = [[k, v["n"], f"{v['share']:.0%}", f"{v['target_share']:.0%}" if v["target_share"] else "—"]
            for k, v in st["categories"].items()]
    click.echo(tabulate(rows, headers=["category", "n", "share", "target"]))
    click.echo("awkward cases: " + ", ".join(f"{k} {v}" for k, v in st["awkward_tags"].items()))
    g = st["groups"]
    click.echo(f"groups: {g['text']}" + (f"; the largest, {g['largest']['group']}, holds "
                                          f"{g['largest']['n']}" if g["largest"] and
                                          g["largest"]["n"] > 1 else "")
               + (f" (group_by {g['group_by']})" if g["group_by"] else ""))
    for w in st["warnings"]:
        click.echo(f"warning: {w}", err=True)


@fixtures.command("diff")
@click.argument("old", type=click.Path())
@click.argument("new", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def fixtures_diff(old, new, fmt):
    """Churn between two captures: cases added/removed, chunks added/removed/changed."""
    import json

    from abtest.capturing import fixture_diff, load_fixture

    d = fixture_diff(load_fixture(old), load_fixture(new))
    if fmt == "json":
        click.echo(json.dumps(d, indent=2))
        return
    click.echo(f"cases added {len(d['added'])}, removed {len(d['removed'])}; context changed in "
               f"{len(d['changed'])}/{d['n_common']} common cases ({d['context_changed_share']:.0%})")
    for c in d["changed"]:
        parts = [f"+{len(c['chunks_added'])}", f"-{len(c['chunks_removed'])}",
                 f"~{len(c['text_changed'])} text"]
        if c["order_changed"]:
            parts.append("order")
        click.echo(f"  {c['id']}: {' '.join(parts)}")


@fixtures.command("show")
@click.argument("path", type=click.Path())
@click.option("--case", "case_id", default=None)
def fixtures_show(path, case_id):
    """Print the manifest, or one case."""
    import json

    from abtest.errors import UserError
    from abtest.core.fixture_set import load_fixture

    fx = load_fixture(path)
    if case_id is None:
        click.echo(json.dumps(fx.manifest.model_dump(mode="json", exclude={"cases"}), indent=2))
        for c in fx.cases:
            click.echo(f"{c.id}\t{'answerable' if c.answerable else 'unanswerable'}\t"
                       f"{len(c.context)} chunks\t{c.question[:80]}")
        return
    case = fx.by_id().get(case_id)
    if case is None:
        raise UserError(f"no case {case_id!r}", file=str(path))
    click.echo(json.dumps(case.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False))


@fixtures.command("add-unanswerable")
@click.argument("path", type=click.Path())
@click.option("--from-answerable", "n", type=click.IntRange(min=1), required=True,
              help="How many answerable cases to turn into counterfactual refusal cases.")
@click.option("--seed", default=0, show_default=True)
def fixtures_add_unanswerable(path, n, seed):
    """Counterfactual refusal cases: drop the relevant chunks of N answerable cases."""
    from abtest.capturing import add_unanswerable, load_fixture

    fx = add_unanswerable(load_fixture(path), n=n, seed=seed)
    click.echo(f"{fx.path}: now {len(fx.cases)} cases (resealed)")
