"""`abtest init` and `abtest demo`: a working project, from scratch or with the demo."""

from __future__ import annotations

import sys

import click

from .common import progress


# --------------------------------------------------------------------------- project
@click.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory):
    """Scaffold abtest.yaml, fixtures/, variants/, results/ in DIRECTORY."""
    from ..project import init_project

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
    from ..demo import run_demo

    code = run_demo(directory, n_questions=n_questions, model=model, live=live,
                    all_judges=all_judges, progress=progress)
    sys.exit(code)
