"""`http://...` / `https://...`: ask a running retrieval service (stdlib urllib only).

POSTs `{"query": question, "k": k}` unless `body_template` says otherwise: any string
in the template equal to "{query}", "{k}" or "{id}" is replaced by the value (keeping
its JSON type), other strings have those placeholders substituted as text. The chunk
list is read from `chunks_path` (dotted, default "chunks"; a bare JSON list is also
accepted) and each chunk's fields from `id_field`, `text_field`, `score_field`,
`metadata_field` (dotted; `id_field=None` derives ids from text). Header values may name
environment variables (`Authorization: Bearer $RAG_TOKEN`), read at request time.

Failures are split the way the exit codes are: the service unreachable, timing out
or answering 429/5xx -> IncompleteRunError; an answer abtest cannot use (not JSON, wrong
shape, 4xx) -> UserError.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Hashable, Sequence

from abtest.errors import IncompleteRunError, UserError
from abtest.retrieval.base import (Retrieved, Retriever, coerce_chunk, dig, fill_template,
                                   finalize)

_RETRY_STATUS = (429, 502, 503, 504)
_SECRET_HINTS = ("key", "token", "secret", "password", "sig", "auth")


def redact_url(url: str) -> str:
    """The URL without credentials or secret-looking query values, fit for a fixture."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    if parts.username:
        netloc = "***@" + netloc
    query = urllib.parse.urlencode(
        [(k, "***" if any(h in k.lower() for h in _SECRET_HINTS) else v)
         for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


_ENV_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def expand_env(value: str, *, where: str, source: str) -> str:
    """A header value with `$NAME` / `${NAME}` read from the environment at request time, so
    a credential lives in the environment only (never in the config, fixture or a log)."""
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        got = os.environ.get(name)
        if not got:
            raise UserError(f"environment variable {name} is not set ({where} names it)",
                            file=source, field=where)
        return got

    return _ENV_REF.sub(sub, value)


def parse_header(text: str) -> tuple[str, str]:
    """'Name: value' (as curl takes it) -> (name, value); the value may name $VARIABLES."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(ch.isspace() for ch in name.strip()):
        raise UserError(f"header {text.split(':')[0][:40]!r} is not 'Name: value'",
                        field="--header")
    return name.strip(), value.strip()


class HttpRetriever(Retriever):
    method = "http"

    def __init__(self, spec: str, *, base_dir: str, k: int = 5, max_chars: int | None = None,
                 body_template: dict | list | str | None = None, chunks_path: str = "chunks",
                 id_field: str | None = "id", text_field: str = "text",
                 score_field: str | None = "score", metadata_field: str | None = "metadata",
                 auth_env: str | None = None, auth_header: str = "Authorization",
                 auth_scheme: str = "Bearer", headers: dict[str, str] | None = None,
                 timeout: float = 30.0, concurrency: int = 4, retries: int = 2):
        super().__init__(spec, k=k, max_chars=max_chars)
        self.url = spec
        if isinstance(body_template, str):
            try:
                body_template = json.loads(body_template)
            except json.JSONDecodeError as exc:
                raise UserError(f"body_template is not valid JSON ({exc.msg})", file=spec,
                                field="body_template") from None
        self.body_template = body_template if body_template is not None else {"query": "{query}",
                                                                              "k": "{k}"}
        self.chunks_path = chunks_path
        self.fields = {"id": id_field, "text": text_field, "score": score_field,
                       "metadata": metadata_field}
        self.auth_env, self.auth_header, self.auth_scheme = auth_env, auth_header, auth_scheme
        self.headers = dict(headers or {})
        self._headers()  # a missing variable is said before the first question, not after it
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise UserError("timeout must be a positive number of seconds", file=spec,
                            field="timeout")
        self.timeout = float(timeout)
        self.concurrency = max(1, int(concurrency))
        self.retries = max(0, int(retries))

    def _spec_text(self) -> str:
        return redact_url(self.url)

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json",
             **{k: expand_env(v, where=f"headers.{k}", source=redact_url(self.url))
                for k, v in self.headers.items()}}
        if self.auth_env:
            token = os.environ.get(self.auth_env)
            if not token:
                raise UserError(f"environment variable {self.auth_env} is not set (it holds the "
                                "retriever's credential)", file=redact_url(self.url),
                                field="auth_env")
            h[self.auth_header] = f"{self.auth_scheme} {token}" if self.auth_scheme else token
        return h

    def _post(self, body: bytes, headers: dict[str, str], where: str) -> Any:
        shown = redact_url(self.url)
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                break
            except urllib.error.HTTPError as exc:
                if exc.code in _RETRY_STATUS:
                    if attempt < self.retries:
                        time.sleep(0.5 * 2 ** attempt)
                        continue
                    raise IncompleteRunError(f"{shown}: {where}: HTTP {exc.code} after "
                                          f"{attempt + 1} attempts") from None
                if exc.code >= 500:
                    raise IncompleteRunError(f"{shown}: {where}: HTTP {exc.code}") from None
                raise UserError(f"the service answered HTTP {exc.code} {exc.reason}",
                                file=shown, where=where) from None
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError,
                    http.client.HTTPException) as exc:
                reason = getattr(exc, "reason", exc)
                raise IncompleteRunError(f"{shown}: {where}: unreachable ({reason})") from None
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            head = raw[:80].decode("utf-8", "replace")
            raise UserError(f"the answer is not JSON (starts with {head!r})", file=shown,
                            where=where) from None

    def _one(self, qid: Hashable, question: str, k: int, headers: dict[str, str]) -> Retrieved:
        where = f"question {qid}"
        body = json.dumps(fill_template(self.body_template, {"query": question, "k": k, "id": qid}),
                          ensure_ascii=False).encode("utf-8")
        data = self._post(body, headers, where)
        items = data if isinstance(data, list) else dig(data, self.chunks_path)
        shown = redact_url(self.url)
        if not isinstance(items, list):
            keys = f" (top-level keys: {', '.join(data)})" if isinstance(data, dict) else ""
            raise UserError(f"no chunk list at {self.chunks_path!r}{keys}; set chunks_path",
                            file=shown, where=where)
        chunks = [coerce_chunk(it, source=shown, where=f"{where}, chunk {i}", fields=self.fields)
                  for i, it in enumerate(items)]
        return finalize(chunks, k=k, max_chars=self.max_chars, source=shown, qid=qid)

    def retrieve_many(self, questions: Sequence[tuple[Hashable, str]], k: int | None = None
                      ) -> dict[Hashable, Retrieved]:
        k = self._search_k(k)
        headers = self._headers()
        if self.concurrency == 1 or len(questions) <= 1:
            return {qid: self._one(qid, q, k, headers) for qid, q in questions}
        with ThreadPoolExecutor(self.concurrency) as pool:
            futs = [(qid, pool.submit(self._one, qid, q, k, headers)) for qid, q in questions]
            try:
                return {qid: f.result() for qid, f in futs}
            except BaseException:
                for _, f in futs:
                    f.cancel()  # fail fast: do not keep calling a broken service
                raise
