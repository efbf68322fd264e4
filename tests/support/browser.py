"""Debian's Chromium for the page tests: headless on the command line, or driven by Playwright
(its own browser download cannot reach its host here). Tests skip, and fail under CI=true,
when it is missing; scripts/test installs it."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_cli(args: list[str], tmp_path: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)



def playwright_or_skip():
    pw = pytest.importorskip("playwright.sync_api", reason="playwright not installed "
                                                            "(scripts/setup installs the dev extra)")
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium not installed (scripts/test installs Debian 'chromium')")
    return pw


class Chromium:
    """One launched browser for a test module (the `chromium` fixture in tests/conftest.py).
    A test's pages each open in a new context of it, so they share no cookies, storage or
    cache with another test's, as in a fresh browser, without a launch per test (~1.2 s)."""

    def __init__(self, browser: Any):
        self.browser = browser

    @contextlib.contextmanager
    def pages(self) -> Iterator[Pages]:
        p = Pages(self.browser)
        try:
            yield p
        finally:
            p.close()


class Pages:
    """What a test's code calls its browser: new_page and new_context open a new context
    (viewport and other options as Playwright's); close() closes every one it opened."""

    def __init__(self, browser: Any):
        self._browser = browser
        self._contexts: list[Any] = []

    def new_context(self, **options: Any) -> Any:
        ctx = self._browser.new_context(**options)
        self._contexts.append(ctx)
        return ctx

    def new_page(self, **options: Any) -> Any:
        return self.new_context(**options).new_page()

    def close(self) -> None:
        while self._contexts:
            with contextlib.suppress(Exception):   # a context its test closed already
                self._contexts.pop().close()
