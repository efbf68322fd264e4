"""`abtest.arun` / `abtest.acapture` (issue 45, item 9): awaited inside a running event loop
(as in Jupyter or a web app) they do what `run` / `capture` do, through the same code, and the
loop keeps turning meanwhile."""

from __future__ import annotations

import asyncio
import threading

import abtest
from support.fakes import Brain, install, make_project


def test_arun_and_acapture_inside_a_running_loop(tmp_path, monkeypatch):
    brain = install(Brain())
    p = make_project(tmp_path / "p")
    monkeypatch.chdir(p)
    threads: set[str] = set()
    real = brain.generate

    def generate(messages):
        threads.add(threading.current_thread().name)
        return real(messages)

    brain.generate = generate

    def retrieve(question, k):
        threads.add(threading.current_thread().name)
        return [{"id": "c1", "text": "The harbour is north of the town."}]

    async def main():
        loop_thread = threading.current_thread().name
        asyncio.get_running_loop()              # a loop is running here
        ticks = 0
        done = asyncio.Event()

        async def tick():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        ticker = asyncio.create_task(tick())
        fx = await abtest.acapture([{"id": "q1", "question": "where is the harbour"}],
                                   retrieve, "fixtures/cap", k=1)
        h = await abtest.arun("fixtures/small", "variants/a.yaml", "variants/b.yaml",
                              run_id="async1")
        done.set()
        await ticker
        return loop_thread, ticks, fx, h

    loop_thread, ticks, fx, h = asyncio.run(main())
    assert isinstance(h, abtest.RunHandle) and h.status == "complete" and h.run_id == "async1"
    assert isinstance(fx, abtest.Fixture) and [c.id for c in fx.cases] == ["q1"]
    # the work ran off the loop's thread, and the loop turned while it did
    assert threads and loop_thread not in threads
    assert ticks > 1
    # the same code path: the stored run reads as one `run` made
    same = abtest.run("fixtures/small", "variants/a.yaml", "variants/b.yaml", run_id="sync1")
    a, s = h.report(), same.report()
    assert [(c.case_id, c.answer_a, c.answer_b, c.pairwise) for c in a.per_case] == \
        [(c.case_id, c.answer_a, c.answer_b, c.pairwise) for c in s.per_case]
