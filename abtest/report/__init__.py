"""Reports over one run: Markdown, JSON (the contract), HTML."""

from __future__ import annotations

import json

from .build import SCHEMA_VERSION, build_report  # noqa: F401


def render(report: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report, indent=2, sort_keys=False, default=str) + "\n"
    if fmt == "md":
        from .markdown import render_markdown

        return render_markdown(report)
    if fmt == "html":
        from .html import render_html

        return render_html(report)
    raise ValueError(f"unknown report format {fmt!r}")
