"""`jsonl:PATH`: import contexts that another tool already retrieved.

Accepted rows (JSONL, a JSON array, a pandas DataFrame's JSON, or CSV with the context
list in one cell as JSON or a Python literal, as RAGAS' `to_csv` writes it):
    {"id": "q1", "question": "...", "context": [{"id": "c1", "text": "...", "score"?: 0.8}]}
    {"question": "...", "contexts": ["chunk text", ...]}           RAGAS style
    {"user_input": "...", "retrieved_contexts": ["...", ...]}      newer RAGAS names
An eval dataset is its own capture input (`fixtures.capture.capture_input_rows`): RAGAS,
DeepEval, LlamaIndex and Phoenix rows, and a promptfoo config or test file, whose tests'
`vars.context` (text, a list of text, or a `file://` text file) are the passages.
An import keeps every context it is given, in order (k cuts only when asked: `--k` or
`retriever.k`); a context object's other fields (title, metadata, url, …) are kept in the
chunk's `meta`. A row's `corpus_version` (a string) is kept on its case; rows without one
take `--corpus-version`, or today's date, and capture says so.
Context items may be objects or bare strings; a string (or an object without an id)
gets the id `sha1(text)[:12]`. Rows match questions by id, else by exact question text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Hashable, Sequence

from abtest.errors import UserError
from abtest.retrieval.base import Retrieved, Retriever, coerce_chunk, finalize
from abtest.core.records import read_records
from abtest.imports.questions import capture_input_rows

_QUESTION_KEYS = ("question", "user_input")
_CONTEXT_KEYS = ("context", "contexts", "retrieved_contexts")


_LISTS = ("context", "contexts", "retrieved_contexts", "keywords", "retrieval_scores")


class JsonlRetriever(Retriever):
    method = "import"
    keeps_all = True

    def __init__(self, spec: str, path: str, *, base_dir: str, k: int | None = None,
                 max_chars: int | None = None, question_var: str | None = None):
        super().__init__(spec, k=k, max_chars=max_chars)
        self.question_var = question_var   # a promptfoo file's question var (--question-var)
        if not path:
            raise UserError("expected jsonl:PATH to a file of captured contexts", file=spec)
        self.path = path if os.path.isabs(path) else os.path.join(base_dir, path)
        self._rows: list[dict[str, Any]] | None = None
        self._by_id: dict[str, dict[str, Any]] = {}
        self._by_text: dict[str, list[dict[str, Any]]] = {}

    def check(self) -> None:
        self._load()

    def _load(self) -> None:
        if self._rows is not None:
            return


        # an eval dataset (a promptfoo config too): its rows as its questions
        given = capture_input_rows(Path(self.path), self.question_var)
        if given is None:
            given = list(read_records(self.path, "a capture file (JSONL, JSON or CSV)",
                                      name="capture file", list_fields=_LISTS,
                                      known_fields=("id", "question", "user_input")))
        rows = [self._check(row, where) for where, row in given]
        self._rows = rows
        for row in rows:
            if row["id"] is not None:
                if row["id"] in self._by_id:
                    raise UserError(f"question id {row['id']!r} appears twice (first at "
                                    f"{self._by_id[row['id']]['line']})", file=self.path,
                                    where=row["line"], field="id")
                self._by_id[row["id"]] = row
            if row["question"] is not None:
                self._by_text.setdefault(row["question"], []).append(row)

    def _check(self, row: dict[str, Any], where: str) -> dict[str, Any]:
        qid = row.get("id")
        if qid is not None:
            if isinstance(qid, bool) or not isinstance(qid, (str, int)):
                raise UserError("must be a string", file=self.path, where=where, field="id")
            qid = str(qid)
        qkey = next((k for k in _QUESTION_KEYS if k in row), None)
        question = row.get(qkey) if qkey else None
        if question is not None and not isinstance(question, str):
            raise UserError(f"must be text, got {type(question).__name__}", file=self.path,
                            where=where, field=qkey)
        if qid is None and question is None:
            if qkey:
                raise UserError("the question is null and the row has no id to match it by",
                                file=self.path, where=where, field=qkey)
            raise UserError("row has neither 'id' nor a question ('question' or "
                            "'user_input')", file=self.path, where=where)
        ckeys = [k for k in _CONTEXT_KEYS if k in row]
        if len(ckeys) != 1:
            raise UserError("row needs exactly one of 'context', 'contexts', 'retrieved_contexts'",
                            file=self.path, where=where)
        ctx = row[ckeys[0]]
        if isinstance(ctx, str):
            ctx = [ctx]   # one passage
        if not isinstance(ctx, list):
            raise UserError("must be a list", file=self.path, where=where, field=ckeys[0])
        chunks = []
        for i, item in enumerate(ctx):
            no_id = isinstance(item, dict) and item.get("id") is None
            chunks.append(coerce_chunk(item, source=self.path, where=f"{where}, {ckeys[0]}[{i}]",
                                       fields={"id": None} if no_id else None, keep_extra=True))
        kws = row.get("keywords")
        terms = row.get("search_terms")
        version = row.get("corpus_version")
        if version is not None and (not isinstance(version, str) or not version.strip()):
            raise UserError("must be a non-empty string", file=self.path, where=where,
                            field="corpus_version")
        return {"line": where, "id": qid, "question": question, "chunks": chunks,
                "keywords": kws if isinstance(kws, list) and all(isinstance(x, str) for x in kws)
                else None,
                "search_terms": terms if isinstance(terms, str) else None,
                "corpus_version": version}

    def retrieve_many(self, questions: Sequence[tuple[Hashable, str]], k: int | None = None
                      ) -> dict[Hashable, Retrieved]:
        k = self._k(k)
        self._load()
        out: dict[Hashable, Retrieved] = {}
        for qid, question in questions:
            row = self._by_id.get(str(qid))
            if row is not None:
                if row["question"] is not None and " ".join(row["question"].split()) != \
                        " ".join(question.split()):
                    raise UserError(f"row for question {qid!r} has a different question text "
                                    f"({row['question'][:60]!r}); is this the right file?",
                                    file=self.path, where=row["line"])
            else:
                cands = self._by_text.get(question, [])
                if not cands:
                    raise UserError(f"question {qid!r} ({question[:60]!r}) is not in the file "
                                    "(matched by id, then by exact question text)",
                                    file=self.path)
                if len(cands) > 1 and len({tuple(c.id for c in r["chunks"]) for r in cands}) > 1:
                    raise UserError(f"question {qid!r} matches several rows with different "
                                    f"contexts ({', '.join(str(r['line']) for r in cands)}); "
                                    "add ids", file=self.path)
                row = cands[0]
            out[qid] = finalize(row["chunks"], k=k, max_chars=self.max_chars, source=self.path,
                                qid=qid, keywords=row["keywords"],
                                search_terms=row["search_terms"])
            out[qid].corpus_version = row["corpus_version"]
        return out
