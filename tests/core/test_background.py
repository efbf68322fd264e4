"""A background import must not leave the process unable to exit (it hung CI for 300 s: a
daemon thread frozen at shutdown mid-import held the module lock that a finalizer wanted)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys, threading
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    started = threading.Event()   # slowmod sets it as its import begins

    class Finalized:
        def __del__(self):        # litellm's HTTP handlers import a module in __del__
            import slowmod  # noqa: F401

    def imp():
        import slowmod  # noqa: F401

    if sys.argv[3] == "abtest":
        from abtest.core import background
        background.start(imp, "slow-import")
    else:
        threading.Thread(target=imp, daemon=True).start()
    assert started.wait(5)       # the import is under way, holding slowmod's lock
    x = Finalized(); x.me = x; del x     # only the collector at shutdown finalizes it
    print("exiting", flush=True)
""")


def _exit_of(tmp_path: Path, how: str) -> int | None:
    (tmp_path / "slowmod.py").write_text(
        "import time, __main__\n__main__.started.set()\ntime.sleep(1.5)\n")
    (tmp_path / "main.py").write_text(SCRIPT)
    try:
        return subprocess.run([sys.executable, str(tmp_path / "main.py"), str(tmp_path),
                               str(ROOT), how], capture_output=True, timeout=8).returncode
    except subprocess.TimeoutExpired:
        return None


def test_a_process_exits_while_a_background_import_is_under_way(tmp_path):
    assert _exit_of(tmp_path, "abtest") == 0


def test_the_hang_is_real_without_the_join(tmp_path):
    # the same script with a bare daemon thread never exits: the test above is not vacuous
    assert _exit_of(tmp_path, "bare") is None
