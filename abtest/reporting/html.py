"""Self-contained HTML report: the Markdown sections plus three inline SVG plots.

One file, no external CSS/JS/fonts/images and no script at all: the page is fully readable
offline and in any browser. The page is templates/report.html (a live run's
templates/live.html), both on templates/_page.html, with the sections `abtest view` shows too
as macros of templates/_macros.html and the plots in templates/_plots.html; they render in the
one Jinja environment (reporting.pages: autoescape on), so every value taken from a report
reaches the page escaped. The numbers and the plots' geometry the templates draw are
reporting.figures'. The output is also well-formed XML (void elements self-closed, only XML
character references), which the tests use to check that no answer text can break the
document structure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from abtest.reporting.model import json_shape
from abtest.reporting.pages import environment
from abtest.core.gcpause import gc_paused
from abtest.reporting.model import LiveReport

if TYPE_CHECKING:
    from abtest.reporting.model import LiveReport, Report

__all__ = ["render_html", "render_live_html", "render_within"]


def render_html(report: Report) -> str:
    """One self-contained HTML document for a report (see build.build_report)."""
    return environment().get_template("report.html").render(r=json_shape(report)) + "\n"


def render_live_html(report: LiveReport) -> str:
    """The live report as a page like the frozen one: the frozen and live claims kept apart,
    frozen vs live over the cases both finished, metrics with CIs, gate, per question."""
    return environment().get_template("live.html").render(r=json_shape(report)) + "\n"


def render_within(template: str, report: Report | LiveReport, **context: Any) -> str:
    """The report's page (report.html, or live.html for a live report) through `template`,
    which extends it as `page` (the view's report_back.html adds a way back to the view)."""

    page = "live.html" if isinstance(report, LiveReport) else "report.html"
    with gc_paused():
        return environment().get_template(template).render(page=page, r=json_shape(report),
                                                           **context) + "\n"
