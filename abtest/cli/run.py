"""`abtest run` (A against B over a fixture) and `abtest snapshot` (the rendered prompt)."""

from __future__ import annotations

import sys

import click

from abtest.cli.common import EXIT_INCOMPLETE, load, progress


# --------------------------------------------------------------------------- run & report
@click.command("run")
@click.option("--fixture", required=True, type=click.Path())
@click.option("--a", "a_path", required=True, type=click.Path(dir_okay=False))
@click.option("--b", "b_path", default=None, type=click.Path(dir_okay=False))
@click.option("--models", default=None,
              help="Model comparison: run variant A with each of m1,m2,… and print a leaderboard.")
@click.option("--run-id", default=None)
@click.option("--resume", is_flag=True, help="Continue an interrupted run; finished calls are not repeated.")
@click.option("--retry-errors", is_flag=True,
              help="With --resume: re-attempt the calls that ended in error (never the finished ones).")
@click.option("--dry-run", is_flag=True, help="Print calls, tokens and cost before spending anything.")
@click.option("--shard", default=None, metavar="I/N",
              help="Run the I-th of N deterministic slices of the cases (one per machine or CI "
                   "job); `abtest merge` joins them.")
@click.option("--max-cost", "max_cost", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="USD", help="Stop before the call that could cross this budget (exit 3, "
              "finished work kept) [max_cost_usd in abtest.yaml].")
@click.option("--batch", is_flag=True,
              help="Send calls to OpenAI-compatible models as provider batches (about half the "
                   "price; hours, not seconds). The batch ids are stored: `--resume --batch` "
                   "collects them after an exit or restart.")
@click.option("--no-wait", is_flag=True,
              help="With --batch: exit 3 once a batch is out instead of polling for it "
                   "[batch_poll_s in abtest.yaml sets the polling interval].")
@click.option("--judge-repeats", type=click.IntRange(0, 10), default=None,
              help="Re-ask the pairwise judge K times on a seeded sample (test-retest noise).")
@click.option("--allow-self-judge", is_flag=True,
              help="Silence the self-judging error (demos); the claim is still withheld.")
@click.option("--sequential", is_flag=True,
              help="Stop as soon as the answer is known: cases in a seeded order, a look every "
                   "20 groups, anytime-valid inference [sequential: in abtest.yaml].")
@click.option("--max-cases", type=click.IntRange(min=1), default=None,
              help="With --sequential: take no more than this many cases (whole groups).")
@click.option("--group-by", default=None, metavar="FIELD",
              help="What makes cases one group besides repeats: a case field, meta.KEY or "
                   "document (the chunk ids' source document) [group_by in abtest.yaml, else "
                   "each case's `group`]; stored with the run.")
@click.pass_context
def run_cmd(ctx, fixture, a_path, b_path, models, run_id, resume, retry_errors, dry_run,
            shard, max_cost, batch, no_wait, judge_repeats, allow_self_judge, sequential,
            max_cases, group_by):
    """Generate A and B over the fixture's frozen contexts, check, judge; print the run id."""
    import json

    from abtest.api import run
    from abtest.running.plan import dry_run as do_dry
    from abtest.running.plan import plan_run

    lc = load(ctx)
    updates = {}
    if judge_repeats is not None:
        updates["judge_repeats"] = judge_repeats
    if allow_self_judge:
        updates["allow_self_judge"] = True
    if group_by is not None:
        from abtest.core.groups import check_group_by

        updates["group_by"] = check_group_by(group_by, "--group-by")
    if updates:
        lc.config = lc.config.model_copy(update=updates)
    if max_cases is not None and not (sequential or lc.config.sequential.enabled):
        from abtest.errors import UserError

        raise UserError("--max-cases goes with --sequential", field="--max-cases")
    if sequential or max_cases is not None:
        from abtest.api import with_sequential

        lc = with_sequential(lc, {"enabled": True, **({"max_cases": max_cases}
                                                      if max_cases is not None else {})})
    if lc.config.group_by is not None:   # a case without the field: exit 2 before any write
        from abtest.capturing import fixture_groups, load_fixture

        fixture_groups(load_fixture(fixture), lc.config.group_by)
    if models:
        from abtest.reporting.leaderboard import run_models

        if run_id or resume:
            from abtest.errors import UserError

            raise UserError("--models starts one run per model and prints their ids; --run-id "
                            "and --resume name one run", field="--run-id" if run_id else "--resume")
        if shard or batch or lc.config.sequential.enabled:
            from abtest.errors import UserError

            flag = "--shard" if shard else "--batch" if batch else "--sequential"
            raise UserError(f"{flag} works on one run; --models starts one run per model",
                            field=flag)
        if max_cost is not None:  # each model's run then holds this budget (as max_cost_usd)
            lc.config = lc.config.model_copy(update={"max_cost_usd": max_cost})

        board = run_models(lc, fixture, a_path, models.split(","), progress=progress)
        from tabulate import tabulate

        cols = ["model", "faithfulness", "coverage", "refusal_answerable", "refusal_unanswerable",
                "pairwise_vs_baseline", "run_id", "status"]
        click.echo(tabulate([[r.get(c) for c in cols] for r in board["rows"]], headers=cols,
                            floatfmt=".3f"))
        click.echo(f"cases that flip between models: {len(board['flipped'])}")
        for f in board["flipped"][:20]:
            click.echo(f"  {f['case_id']}: faithful with {', '.join(f['faithful'])}; not with "
                       f"{', '.join(f['not_faithful'])}")
        sys.exit(EXIT_INCOMPLETE if any(r["status"] != "complete" for r in board["rows"]) else 0)
    if b_path is None:
        from abtest.errors import UserError

        raise UserError("--b is required (or --models m1,m2 for a model comparison)", field="--b")
    if dry_run:   # no model call: what a real run would still need is listed, not refused
        needs: list[str] = []
        plan = plan_run(lc, fixture, a_path, b_path, needs=needs)
        out = do_dry(lc, plan, max_cost, needs)
        for line in out["needs"]:
            progress(f"a real run would need: {line}")
        click.echo(json.dumps(out, indent=2))
        return
    gen_models = {lc.config.generator.model}
    if lc.config.judge.model in gen_models and not lc.config.allow_self_judge:
        progress(f"note: the judge model is the generator model ({lc.config.judge.model}): "
                  "self-judging; the run continues but the claim will be withheld "
                  "(--allow-self-judge or allow_self_judge: true silences this note)")
    if no_wait and not batch:
        from abtest.errors import UserError

        raise UserError("--no-wait goes with --batch", field="--no-wait")
    if retry_errors and not resume:
        from abtest.errors import UserError

        raise UserError("--retry-errors goes with --resume", field="--retry-errors")
    res = run(fixture, a_path, b_path, config=lc, run_id=run_id, resume=resume,
              retry_errors=retry_errors, progress=progress, max_cost_usd=max_cost, shard=shard,
              batch=batch, wait=not no_wait).result   # the run's summary is kept with it
    progress(f"{res.line}; {res.provider_calls} provider calls, "
              f"{res.cache_hits} cache hits, {res.calls_per_case} LLM calls per case, "
              f"{res.seconds:.1f} s")
    if res.comparison_kind == "pipeline_change":
        progress("this is a pipeline change, re-measure end to end; the frozen claim does not apply")
    click.echo(res.run_id)
    if res.status != "complete":
        from abtest.store.runs import load_run, resume_hint
        from abtest.store import Store

        st = Store(lc.store_path, read_only=True, create=False)
        try:
            hint = resume_hint(load_run(st, res.run_id))
        finally:
            st.close()
        progress(f"incomplete: unfinished cases: {', '.join(res.unfinished[:20])}"
                  f"{' …' if len(res.unfinished) > 20 else ''} (fix the cause, then "
                  f"`{hint} --retry-errors`)")
        sys.exit(EXIT_INCOMPLETE)


@click.command()
@click.argument("variant", type=click.Path(dir_okay=False))
@click.option("--fixture", required=True, type=click.Path())
@click.option("--case", "case_id", default=None, help="Case to render [first case].")
@click.option("--update", is_flag=True, help="Rewrite the stored snapshot.")
@click.pass_context
def snapshot(ctx, variant, fixture, case_id, update):
    """Compare the exact rendered messages with variants/__snapshots__/ (diff → exit 1)."""
    from abtest.prompts.snapshots import snapshot as do_snapshot

    code, text = do_snapshot(load(ctx), variant, fixture, case_id=case_id, update=update)
    click.echo(text, nl=not text.endswith("\n"))
    sys.exit(code)
