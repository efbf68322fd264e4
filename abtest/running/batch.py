"""Provider batches: collect what is out, run a pass, submit what it deferred; again until
a pass defers nothing. Every step is in the store, so a process may stop anywhere between."""

from __future__ import annotations

from typing import TYPE_CHECKING

from abtest.core.config import LoadedConfig
from abtest.core.progress import Progress
from abtest.errors import (DriftError, IncompleteRunError, Spelled,
                           UserError, resume_call)

from abtest.running.execute import (RunResult, done_before, errored_cases, execute,
                                     mark_incomplete, pinned_and_spent)
from abtest.running.plan import RunPlan
from abtest.llm import Gateway, ModelDriftError
from abtest.llm.batch import BatchPending, collect

if TYPE_CHECKING:
    from abtest.store import Store


def batch_passes(lc: LoadedConfig, store: Store, plan: RunPlan, rid: str, *, skip: set[str],
                  wait: bool, progress: Progress | None, resume: bool, **kw) -> RunResult:
    """Collect what is out, run a pass, submit what it deferred; again until a pass defers
    nothing. Every step is in the store, so a process may stop anywhere between."""

    specs = [plan.gen_a, plan.gen_b, plan.judge]
    first = True
    while True:
        pinned, _ = pinned_and_spent(store, rid)
        try:
            out = collect(Gateway(store, run_id=rid, pinned=pinned), store, rid, specs,
                          wait=wait, poll_s=lc.config.batch_poll_s, progress=progress)
        except ModelDriftError as exc:
            mark_incomplete(store, rid)
            raise DriftError(f"{exc}; the run stops here, incomplete") from None
        except (IncompleteRunError, UserError):
            mark_incomplete(store, rid)
            raise
        if out:
            store.update_run(rid, status="incomplete")
            raise BatchPending(f"waiting for {len(out)} batch(es) at the provider ("
                               f"{', '.join(b['batch_id'] for b in out)}); `{{go_on}}` collects "
                               "them and goes on", opts={"go_on": Spelled(
                                   f"abtest run --run-id {rid} --resume --batch",
                                   resume_call(rid, batch=True))})
        if not first:   # a case that ended in error in an earlier pass stays unfinished
            skip = errored_cases(store, rid)
        done, shown = done_before(store, plan, rid, kw.get("shard"), skip, progress,
                                   say=first and resume)
        first = False
        try:
            return execute(lc, store, plan, rid, progress=progress, skip=skip, batch=True,
                           done_before=done, shown=shown, **kw)
        except BatchPending:
            if not wait:
                raise
