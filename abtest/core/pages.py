"""The one Jinja2 environment every page renders from: the HTML report's and the view's
templates, the review page, and the macros they share (autoescape on, templates loaded from
the installed package). The report's own helpers (`figures`, `notes`) join its globals
when the reporting stage first asks for it (abtest.reporting.pages); the review page needs
none of them."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING
import jinja2
from abtest.core.fmt import interval, kappa_text, num, signed
from importlib.resources import files
from markupsafe import Markup

if TYPE_CHECKING:
    import jinja2
    from markupsafe import Markup


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:


    loader = jinja2.ChoiceLoader([jinja2.PackageLoader("abtest.view", "templates"),
                                  jinja2.PackageLoader("abtest.reporting", "templates"),
                                  jinja2.PackageLoader("abtest.review", "assets")])
    env = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, bytecode_cache=_compiled())
    env.filters.update(num=num, signed=signed, dash=lambda x, nd=3: num(x, nd, missing="—"),
                       na=lambda x: "n/a" if x is None else x, coord=lambda x: f"{x:.1f}")
    env.globals.update(interval=interval, asset=asset, kappa_text=kappa_text)
    return env


def _compiled() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between processes: Jinja's own cache, in a directory only the
    user can write under the temporary directory, each entry checked against its template's
    source. Compiling the report's templates costs as much as rendering a 1,000-case report;
    where no such directory can be had (or written), templates are compiled each time."""

    class Cache(jinja2.FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:  # a read-only or full disk costs the next process a compile
                pass

    try:
        return Cache()
    except (OSError, RuntimeError):  # RuntimeError: no directory of the user's own
        return None


def asset(package: str, name: str) -> Markup:
    """A CSS or JS file shipped in `package`'s assets/, to inline in a page as it is."""


    return Markup((files(package) / "assets" / name).read_text(encoding="utf-8"))
