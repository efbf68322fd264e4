"""`python:package.module:function`: call the user's own retrieval code in-process.

The function is called as `function(question, k)` and returns a list of dicts or
objects with `id`, `text`, optional `score` and `metadata` (bare strings are accepted
and get text-derived ids).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Hashable, Sequence

from abtest.errors import IncompleteRunError, UserError
from abtest.retrieval.base import Retrieved, Retriever, coerce_chunk, finalize


class PythonRetriever(Retriever):
    method = "python"

    def __init__(self, spec: str, target: str, *, base_dir: str, k: int = 5,
                 max_chars: int | None = None):
        super().__init__(spec, k=k, max_chars=max_chars)
        module, _, func = target.rpartition(":")
        if not module or not func:
            raise UserError("expected python:package.module:function", file=spec)
        self.module_name, self.func_name, self.base_dir = module, func, base_dir
        self._fn: Any = None

    @classmethod
    def of(cls, fn: Any, *, k: int = 5, max_chars: int | None = None) -> "PythonRetriever":
        """A retriever over a function already in hand (the Python API): its name is
        recorded on the fixture as `python:module:function`, as a spec would be."""
        target = f"{getattr(fn, '__module__', None) or '__main__'}:" \
                 f"{getattr(fn, '__qualname__', None) or type(fn).__name__}"
        r = cls(f"python:{target}", target, base_dir="", k=k, max_chars=max_chars)
        r._fn = fn
        return r

    @property
    def fn(self) -> Any:
        if self._fn is None:
            if self.base_dir and self.base_dir not in sys.path:
                sys.path.insert(0, self.base_dir)  # the user's project modules
            try:
                mod = importlib.import_module(self.module_name)
            except ModuleNotFoundError as exc:
                if exc.name and self.module_name.startswith(exc.name):
                    raise UserError(f"cannot import module {self.module_name!r} (run from the "
                                    "project directory or install the package)",
                                    file=self.spec) from None
                raise UserError(f"importing {self.module_name!r} failed: {exc}",
                                file=self.spec) from None
            except Exception as exc:  # the user's module failed at import time
                raise UserError(f"importing {self.module_name!r} failed: "
                                f"{type(exc).__name__}: {exc}", file=self.spec) from None
            fn = getattr(mod, self.func_name, None)
            if fn is None or not callable(fn):
                raise UserError(f"module {self.module_name!r} has no function "
                                f"{self.func_name!r}", file=self.spec)
            self._fn = fn
        return self._fn

    def retrieve_many(self, questions: Sequence[tuple[Hashable, str]], k: int | None = None
                      ) -> dict[Hashable, Retrieved]:
        k = self._k(k)
        fn = self.fn
        out: dict[Hashable, Retrieved] = {}
        for qid, question in questions:
            where = f"question {qid}"
            try:
                got = fn(question, k)
            except OSError as exc:  # network, socket, timeouts: the backend is unreachable
                raise IncompleteRunError(f"{self.spec}: {where}: {type(exc).__name__}: {exc}") from exc
            except Exception as exc:
                raise UserError(f"the function raised {type(exc).__name__}: {exc}",
                                file=self.spec, where=where) from exc
            if isinstance(got, (str, bytes, dict)) or not hasattr(got, "__iter__"):
                raise UserError(f"expected a list of chunks, got {type(got).__name__}",
                                file=self.spec, where=where)
            chunks = [coerce_chunk(item, source=self.spec, where=f"{where}, item {i}")
                      for i, item in enumerate(got)]
            out[qid] = finalize(chunks, k=k, max_chars=self.max_chars, source=self.spec, qid=qid)
        return out
