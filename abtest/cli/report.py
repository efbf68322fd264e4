"""`abtest report` and `abtest gate`: the report of a run and the release gate."""

from __future__ import annotations

import sys

import click

from abtest.cli.common import load, open_store, progress, resolve_run


def _report_for(ctx, run_id, group_by=None):
    from abtest.reporting import build_report
    from abtest.store.runs import check_fixture_unchanged, load_run

    lc, store = open_store(ctx)
    try:
        run_id = resolve_run(store, run_id)
        run = load_run(store, run_id)
        if run["kind"] == "live":
            if group_by is not None:
                from abtest.errors import UserError

                raise UserError("--group-by groups a frozen run's fixture cases; this is a "
                                "live run", field="--group-by")
            from abtest.reporting.live import build_live_report

            return build_live_report(store, run_id)
        check_fixture_unchanged(run)
        return build_report(store, run_id, config=_regrouped(run, group_by))
    finally:
        store.close()


def _regrouped(run, group_by):
    """The run's stored config with `--group-by` in place of the group_by it ran with (None:
    the stored config as it is); a case without the field is exit 2 before anything is
    built."""
    if group_by is None:
        return None
    from pathlib import Path

    from abtest.capturing import fixture_groups, load_fixture
    from abtest.core.groups import check_group_by
    from abtest.store.runs import run_config

    check_group_by(group_by, "--group-by")
    if (Path(run["fixture_path"] or "") / "cases.jsonl").exists():
        fixture_groups(load_fixture(run["fixture_path"]), group_by)
    return run_config(run).model_copy(update={"group_by": group_by})


@click.command()
@click.argument("run_id")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html", "github"]), default="md",
              show_default=True, help="github: a pull-request comment (claim, gate, metrics, "
              "10 flipped cases; ≤ 60,000 characters).")
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="Write here instead of stdout.")
@click.option("--group-by", default=None, metavar="FIELD",
              help="Group the cases by this instead of the group_by the run was made with: a "
                   "case field, meta.KEY or document.")
@click.pass_context
def report(ctx, run_id, fmt, out, group_by):
    """Paired statistics, the licensed claim (or why not), incidents, backlog. RUN_ID may be 'latest'."""
    from pathlib import Path

    from abtest.reporting import render
    from abtest.reporting.model import LiveReport

    rep = _report_for(ctx, run_id, group_by)
    if isinstance(rep, LiveReport):
        from abtest.reporting.live import render_live

        if fmt == "github":
            from abtest.errors import UserError

            raise UserError("--format github is for frozen runs; a live run's report is "
                            "`--format md`", field="--format")
        text = render_live(rep, fmt)
    else:
        text = render(rep, fmt)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")
        progress(f"wrote {out}")
    else:
        click.echo(text, nl=False)


@click.command()
@click.argument("run_id")
@click.option("--thresholds", type=click.Path(dir_okay=False), default=None,
              help="YAML file of gate thresholds (keys of `gates:` in abtest.yaml).")
@click.pass_context
def gate(ctx, run_id, thresholds):
    """Release gate: exit 0 PASS, 1 FAIL, 3 INCOMPLETE."""
    from pathlib import Path

    from abtest.reporting.gate import evaluate_gate

    rep = _report_for(ctx, run_id)
    gates = load(ctx).config.gates
    if thresholds:
        from pydantic import ValidationError

        from abtest.core.config import read_yaml
        from abtest.errors import UserError, pydantic_error_line
        from abtest.core.models import Gates

        data = read_yaml(Path(thresholds)) or {}
        if not isinstance(data, dict):
            raise UserError("expected a mapping of gate thresholds", file=thresholds)
        data = data.get("gates", data)
        try:
            gates = Gates.model_validate({**gates.model_dump(), **data})
        except ValidationError as exc:
            raise pydantic_error_line(exc, file=thresholds) from None
    g = evaluate_gate(rep.as_dict(), gates)
    for r in g["rules"]:
        val = "n/a" if r["value"] is None else f"{r['value']:.3f}"
        click.echo(f"{r['status']:>14}  {r['name']:<18} {val:>8}  (threshold {r['threshold']})"
                   + (f"  {r['note']}" if r.get("note") else ""))
    if g["incidents_b"]:
        click.echo(f"{'fail':>14}  hallucination incidents in B: {g['incidents_b']}")
    click.echo(f"{g['decision']}" + (f": {'; '.join(g['reasons'])}" if g["reasons"] else ""))
    sys.exit(g["exit_code"])
