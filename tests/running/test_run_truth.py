"""What a reader is told about a run while its writer ends (issue 52): the run's stored status
and the set of runs a live process writes are two reads, and a writer that finishes between
them must never make a reader say "interrupted". And the one count model, read as every kind
of run words it."""

from __future__ import annotations

from abtest.store.state import RunProgress, state_of


class EndingStore:
    """A store whose writer finishes the run right after the reader's first read: the run's
    row said "running" when read, and the writer has left the set of runs it writes."""

    def __init__(self, then: str, writers_after: set[str] | None = None):
        self.then = then
        self.writers_after = writers_after if writers_after is not None else set()
        self.reads = 0

    def writing_runs(self):
        return set(self.writers_after)

    def get_run(self, run_id):
        self.reads += 1
        return {"run_id": run_id, "status": self.then}


def test_a_run_that_ended_between_the_reads_is_told_as_it_ended_never_interrupted():
    for ended in ("complete", "stopped", "incomplete"):
        store = EndingStore(ended)
        assert state_of(store, {"run_id": "r1", "status": "running"}) == ended
        assert store.reads == 1   # the row read again once: the writer had left the set


def test_a_run_resumed_by_another_process_between_the_reads_is_running():
    store = EndingStore("running", writers_after={"r1"})
    store.writing_runs = lambda: set()   # type: ignore[method-assign]
    calls = iter([set(), {"r1"}])        # the resumer joins the set as the row is re-read
    store.writing_runs = lambda: next(calls)   # type: ignore[method-assign]
    assert state_of(store, {"run_id": "r1", "status": "running"}) == "running"


def test_a_run_with_no_writer_and_still_running_in_its_row_is_interrupted():
    store = EndingStore("running")
    assert state_of(store, {"run_id": "r1", "status": "running"}) == "interrupted"


def test_a_writer_joins_the_set_before_its_row_says_running_and_leaves_it_after(tmp_path):
    """The order the reader relies on, seen at the moment each write is made."""
    from abtest.store import Store

    st = Store(tmp_path / "s.duckdb")
    seen: list[tuple[str, bool]] = []
    real = st._write

    def write(ops):
        sql = " ".join(getattr(op, "sql", "") for op in ops if hasattr(op, "sql"))
        seen.append((sql or "update", "r1" in st._active))
        return real(ops)

    st._write = write   # type: ignore[method-assign]
    try:
        st.create_run({"run_id": "r1", "kind": "frozen"})
        st.update_run("r1", status="stopped")
        st.update_run("r1", status="running")    # a resume
        st.update_run("r1", status="complete")
    finally:
        st.close()
    assert [in_set for _, in_set in seen] == [True, True, True, True]
    # and it has left the set once the end is written
    assert "r1" not in st._active


def _prog(**kw):
    base = dict(run_id="r", state="complete", case_ids=[f"c{i}" for i in range(60)],
                finished=[f"c{i}" for i in range(60)], reasons={}, started=60, errored=0,
                n_cases=120)
    return RunProgress(**{**base, **kw})


def test_the_count_line_of_each_kind_of_run():
    fixed = RunProgress("r", "interrupted", ["a", "b", "c"], ["a"], {"b": ["x"], "c": ["y"]},
                        2, 1)
    assert fixed.n_cases == 3 and fixed.n_used is None and fixed.n_not_needed is None
    assert fixed.line == "interrupted: 1 of 3 cases finished, 1 with an error"
    stopped = _prog(n_used=60, n_not_needed=60, stop="futility")
    assert stopped.line == "complete: 60 of 120 used, 60 not needed (futility)"
    assert stopped.as_dict()["not_needed"] == 60 and stopped.as_dict()["n_used"] == 60
    # still looking: nothing is "not needed" yet, whatever is not taken may be
    looking = _prog(state="running", finished=[f"c{i}" for i in range(18)], started=20,
                    case_ids=[f"c{i}" for i in range(20)], n_used=20)
    assert looking.line == "running: 18 of 20 cases taken so far finished, of 120 (sequential)"
    assert looking.as_dict()["not_needed"] is None
    # stopped for a decision with cases unfinished (an error at the last look)
    short = _prog(state="incomplete", finished=[f"c{i}" for i in range(58)], errored=2,
                  n_used=60, n_not_needed=60, stop="decision")
    assert short.line == ("incomplete: 58 of the 60 cases used finished (of 120), 60 not "
                          "needed (decision), 2 with an error")
