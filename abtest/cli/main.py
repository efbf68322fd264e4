"""The command line: parse, call the library, format, map errors to exit codes.

One module per noun (`capture`, `fixtures`, `run`, `report`, `review`, `live`, `loop`,
`store`, `project`); only click is imported at module level so `abtest --help` is instant,
and each command imports what it needs when it runs.
"""

from __future__ import annotations

import click

from abtest.cli import capture, fixtures, live, loop, project, report, review, run, store, view
from abtest.cli.common import Group, add_config_option


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
              help="Config file (default: ./abtest.yaml, else built-in defaults); also "
                   "accepted after the command.")
@click.version_option(package_name="abtest")
@click.pass_context
def cli(ctx, config):
    """abtest: did this prompt wording change help, given the same retrieved material?

    \b
    capture → run → report → gate → live:
      abtest capture questions.jsonl --retriever local:results/index.duckdb --out fixtures/NAME
      abtest run --fixture fixtures/NAME --a variants/a.yaml --b variants/b.yaml
      abtest report RUN_ID --format md|json|html
      abtest gate RUN_ID
    A RUN_ID may be `latest` or a unique prefix of one.
    Exit codes: 0 ok/PASS, 1 gate FAIL, 2 bad input, 3 incomplete, 130 interrupted.
    """
    # runs before the subcommand's own --config (common.add_config_option), which wins
    ctx.ensure_object(dict)
    ctx.obj["config"] = config


for _cmd in (project.init, project.demo, project.doctor, capture.index, capture.search, capture.capture,
             fixtures.fixtures, run.run_cmd, report.report, report.gate, store.runs, store.export,
             store.merge,
             run.snapshot, review.judge_check, review.review, loop.golden, loop.suggest,
             loop.history, loop.compare, live.live, live.serve_demo, view.view):
    add_config_option(_cmd)
    cli.add_command(_cmd)


def main() -> None:
    cli(prog_name="abtest")
