"""`abtest init`, `abtest demo` and `abtest doctor`: a working project, from scratch or with
the demo, and what this machine can do for it."""

from __future__ import annotations

import sys

import click

from abtest.cli.common import config_path, progress


# --------------------------------------------------------------------------- project
@click.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory):
    """Scaffold abtest.yaml, fixtures/, variants/, results/ in DIRECTORY."""
    from abtest.project import init_project

    for line in init_project(directory):
        click.echo(line)


@click.command()
@click.argument("directory", default="abtest-demo", type=click.Path(file_okay=False))
@click.option("--n", "n_questions", default=12, show_default=True,
              help="Questions in the demo fixture (half answerable, half not).")
@click.option("--model", default=None, help="Use this litellm model instead of the embedded one.")
@click.option("--live", is_flag=True,
              help="Then start two demo chat servers on loopback and run `abtest live` beside the frozen result.")
@click.option("--all-judges", is_flag=True,
              help="Also the quality, relevance and keyword-quality rubrics (slower).")
def demo(directory, n_questions, model, live, all_judges):
    """Whole loop on the embedded model, no API key: index, capture, run, judge, report."""
    from abtest.project.demo import run_demo

    code = run_demo(directory, n_questions=n_questions, model=model, live=live,
                    all_judges=all_judges, progress=progress)
    sys.exit(code)


@click.command()
@click.option("--call", is_flag=True,
              help="Send one tiny request to each configured chat model (costs a few tokens).")
@click.option("--no-load", is_flag=True, help="Do not load the embedded model (a few seconds).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.pass_context
def doctor(ctx, call, no_load, fmt):
    """Check, line by line, what a run needs: Python and packages, config, the embedded model,
    the configured models, the results store, Chromium. Exit 0, or 2 when a line FAILs."""
    import json

    from abtest.project.doctor import as_dicts, run_checks

    checks = run_checks(config_path(ctx), call=call, load_embedded=not no_load)
    if fmt == "json":
        click.echo(json.dumps(as_dicts(checks), indent=2))
    else:
        width = max(len(c.name) for c in checks)
        for c in checks:
            click.echo(f"{c.status:<4}  {c.name:<{width}}  {c.detail}")
    if any(c.status == "FAIL" for c in checks):
        sys.exit(2)
