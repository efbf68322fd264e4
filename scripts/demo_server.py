#!/usr/bin/env python3
"""Demo chat server for `abtest live` (see abtest/livecheck/demo_server.py for the API).

    python scripts/demo_server.py --index results/index.duckdb --variant variants/b.yaml \
        [--model local/smollm2] [--port 0] [--max-seconds 600] [--max-requests N]

Prints `listening on http://127.0.0.1:PORT` as its first line.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from abtest.livecheck.demo_server import DemoChatServer, main  # noqa: E402,F401

if __name__ == "__main__":
    sys.exit(main())
