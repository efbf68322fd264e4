"""Debian's Chromium for the page tests: headless on the command line, or driven by Playwright
(its own browser download cannot reach its host here). Tests skip, and fail under CI=true,
when it is missing; scripts/test installs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


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
