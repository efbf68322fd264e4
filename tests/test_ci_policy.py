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
