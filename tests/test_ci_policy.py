"""Under CI=true a skipped test fails (tests/conftest.py): what CI skips, it does not prove."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text(encoding="utf-8")


def test_a_skip_fails_under_ci_and_stays_a_skip_elsewhere(pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_x="""
        import pytest

        def test_needs_chromium():
            pytest.skip("chromium not installed")

        @pytest.mark.skipif(True, reason="node not installed")
        def test_needs_node():
            pass

        @pytest.mark.xfail(reason="known")
        def test_known():
            assert False

        def test_fine():
            pass
    """)
    monkeypatch.delenv("CI", raising=False)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1, skipped=2, xfailed=1)
    monkeypatch.setenv("CI", "true")
    res = pytester.runpytest("-p", "no:cacheprovider")
    out = res.parseoutcomes()
    assert res.ret != 0 and "skipped" not in out and out.get("passed") == 1
    # a skip in the test body fails it; a skipif (decided at setup) errors it
    assert out.get("failed", 0) + out.get("error", out.get("errors", 0)) == 2
    res.stdout.fnmatch_lines(["*skipped under CI=true*chromium not installed*"])


# A test waits for what it needs (support.waiting.wait_until, an Event, a server's count, a
# line a process prints), never a guessed time: too short on a loaded machine, too long on an
# idle one. Sleeps in the code of a child process (a string the test runs) are that process's
# own business. What is left, each with the reason there is nothing to wait on:
SLEEPS_ALLOWED = {
    ("tests/support/waiting.py", "wait_until"): "the one polling loop",
    ("tests/support/forkserver.py", "shim_main"):
        "the shim, which signalled itself as its command died, waiting to die of it",
    ("tests/llm/test_embedded.py", "test_ctrl_c_stops_a_run_on_the_embedded_model_within_five_seconds"):
        "the model must be mid-generation; the process prints nothing between its tokens",
    ("tests/running/test_run_state.py",
     "test_stopped_run_is_told_the_same_everywhere_and_resumes_from_anywhere"):
        "the signal must be handled before the held requests are let go; the process says "
        "nothing when it is",
    ("tests/store/test_read_while_writing.py", "do_POST"):
        "the scenario: a writer that takes 2 s to answer a read",
}


def _sleeps() -> list[tuple[str, str, int]]:
    """(file, enclosing function, line) of every time.sleep / sleep call in the tests."""
    import ast

    root = Path(__file__).parent
    found: list[tuple[str, str, int]] = []

    def visit(node, rel: str, fn: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef,
                                                    ast.AsyncFunctionDef)) else fn
            if isinstance(child, ast.Call):
                f = child.func
                if (isinstance(f, ast.Attribute) and f.attr == "sleep"
                        and isinstance(f.value, ast.Name) and f.value.id == "time") or \
                        (isinstance(f, ast.Name) and f.id == "sleep"):
                    found.append((rel, fn, child.lineno))
            visit(child, rel, name)

    for path in sorted(root.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8")),
              path.relative_to(root.parent).as_posix(), "<module>")
    return found


def test_tests_wait_for_events_not_for_guessed_times():
    found = _sleeps()
    bare = [f"{rel}:{line} in {fn}" for rel, fn, line in found
            if (rel, fn) not in SLEEPS_ALLOWED]
    assert not bare, "wait for a condition (support.waiting.wait_until) instead: " + \
        ", ".join(bare)
    # the allowance is not stale, and the check sees a sleep where there is one
    assert {(rel, fn) for rel, fn, _ in found} == set(SLEEPS_ALLOWED)
