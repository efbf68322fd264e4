"""The trace export formats `capture --from-traces` reads, each into `traces.Step`s.

- **otlp**: OTLP/JSON (`resourceSpans` → `scopeSpans` → `spans`, one document or one per
  line as the collector's file exporter writes; proto3 JSON's snake_case spelling —
  `resource_spans`, `scope_spans`, `string_value`, as Phoenix's "Download OTLP JSON"
  writes — is read alike), spans following OpenInference: a retriever span has
  `openinference.span.kind = RETRIEVER`, its query in `input.value` and its documents
  flattened as `retrieval.documents.N.document.{id,content,score,metadata}` (N = rank).
- **phoenix**: Phoenix's span export (REST `/v1/projects/…/spans`, `px span list`, the
  legacy JSONL, or `get_spans_dataframe()` saved by pandas: records, or `to_json()`'s
  column-oriented default, or `split`): `context.trace_id`, `span_kind`, `parent_id`,
  `start_time` (ISO text, or epoch milliseconds from a dataframe), `attributes` flat or nested.
- **langfuse**: Langfuse traces with `observations` (public API `GET /traces/{id}`, a list of
  them, `{"data": […]}`, or `{"trace": …, "observations": […]}`) or observation rows; a
  retrieval is an observation of type RETRIEVER (LangChain: output a list of Documents with
  `page_content`; LlamaIndex: nodes with `node.text` and `score`), or OpenInference
  attributes under `metadata.attributes`.

The user's question is the trace's input (the root span's `input.value`, Langfuse's trace
`input`), read by `question_text`: JSON-encoded text is decoded (Langfuse stores strings
so), a chat input gives its last user message, an object its question field; else the
retrieval's own query. A document without an id (LangChain often sends none) takes one from
its metadata (ID_KEYS), else a content hash, so the same text keeps the same id across
captures; what the source said about a document besides id, text and score (its metadata,
its title) is kept in the chunk's `meta`.

A trace's session or conversation, when the export records one, is kept per trace
(`TraceRead.sessions`; the case's `group`): OpenInference's `session.id` span attribute (OTLP,
Phoenix), Phoenix's legacy `conversation.conversation_id`, Langfuse's trace `sessionId`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from abtest.errors import UserError


@dataclass
class Doc:
    id: str | None
    text: str | None
    score: float | None = None
    meta: dict | None = None          # the source's metadata and title, kept on the chunk
    problem: str | None = None        # why it cannot be a chunk (no text, text not a string)
    derived_id: bool = False          # the id came from metadata or a hash, not the source


@dataclass
class Step:
    """One retrieval step of one trace, whatever the export format."""

    trace_id: str
    span_id: str
    name: str
    time: str                 # ISO 8601 (UTC) or the export's own text
    query: str | None
    docs: list[Doc]
    where: str                # for messages: the line / record it came from


@dataclass
class TraceRead:
    fmt: str
    path: Path = Path("")
    steps: list[Step] = field(default_factory=list)
    questions: dict[str, str] = field(default_factory=dict)   # trace id -> the user's question
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (where, why)
    trace_ids: set[str] = field(default_factory=set)          # every trace the export holds
    n_spans: int = 0
    sessions: dict[str, str] = field(default_factory=dict)    # trace id -> its session's id
    session_fields: set[str] = field(default_factory=set)     # where the sessions were read
    # trace id -> (where, why) its input is not a question: an error only for a trace that
    # has a retrieval (a trace without one makes no case, and says that instead)
    bad_inputs: dict[str, tuple[str, str]] = field(default_factory=dict)

    def session(self, trace: str, value: Any, where_from: str) -> None:
        """Record the trace's session (the first one its spans give), when it is one."""
        if not trace or trace in self.sessions or isinstance(value, bool):
            return
        if isinstance(value, int) or (isinstance(value, str) and value.strip()):
            self.sessions[trace] = str(value)
            self.session_fields.add(where_from)

QUESTION_KEYS = ("question", "query", "user_input", "input", "query_str", "query_bundle",
                 "message", "text", "prompt")
ID_KEYS = ("chunk_id", "id", "doc_id", "document_id", "node_id", "source_id")
# `…document.metadata.KEY`: Phoenix's OTLP download and REST spans flatten a metadata object
_DOC_KEY = re.compile(
    r"^retrieval\.documents\.(\d+)\.document\.(id|content|score|metadata)(?:\.(.+))?$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_USER_ROLES = ("user", "human")


def _get(d: dict, *names: str) -> Any:
    """The first of `names` present in `d` (OTLP JSON's camelCase or proto3's snake_case)."""
    for n in names:
        if n in d:
            return d[n]
    return None


# --------------------------------------------------------------------------- questions

class NotText(ValueError):
    """A question that is present but is not text after decoding (said, never stored)."""


def question_text(value: Any, *, json_text: bool = True, _depth: int = 0) -> str | None:
    """The plain text of a question or query, or None when there is none; NotText when
    there is one that is not text (an object without a question field, a chat without a
    user message). `json_text=False` keeps text that merely looks like JSON (OpenInference
    says `input.mime_type: text/plain`)."""
    if _depth > 4:
        raise NotText("nested too deeply")
    if value is None:
        return None
    if isinstance(value, str):   # kept as written; only JSON-encoded text is decoded
        s = value.strip()
        if not s:
            return None
        if json_text and s[0] in "\"{[":
            try:
                parsed = json.loads(s)
            except ValueError:
                return value
            return question_text(parsed, _depth=_depth + 1)
        return value
    if isinstance(value, dict):
        msgs = value.get("messages")
        if isinstance(msgs, list):
            return _last_user_message(msgs)
        lc = _langchain_message(value)
        if lc is not None:
            return lc
        if "args" in value and set(value) <= {"args", "kwargs"}:   # Langfuse's @observe
            return _call_question(value, _depth)
        for k in QUESTION_KEYS:
            if k in value and value[k] not in (None, ""):
                return question_text(value[k], _depth=_depth + 1)
        keys = ", ".join(map(str, list(value)[:6])) or "none"
        raise NotText(f"a JSON object with no question field (keys: {keys})")
    if isinstance(value, list):
        if value and all(_is_message(m) for m in value):
            return _last_user_message(value)
        raise NotText("a JSON list that is not a chat")
    raise NotText(f"a {type(value).__name__}, not text")


def _call_question(call: dict, depth: int) -> str | None:
    """A decorated function's call as Langfuse's `@observe` records it: the first argument
    that is text, else a keyword argument named like a question."""
    given_args, given_kwargs = call.get("args"), call.get("kwargs")
    args: list = given_args if isinstance(given_args, list) else []
    kwargs: dict = given_kwargs if isinstance(given_kwargs, dict) else {}
    for a in args:
        if isinstance(a, str) and a.strip():
            return question_text(a, _depth=depth + 1)
    for k in QUESTION_KEYS:
        if kwargs.get(k) not in (None, ""):
            return question_text(kwargs[k], _depth=depth + 1)
    names = ", ".join(map(str, kwargs)) or "none"
    raise NotText(f"a function call with no text argument (keyword arguments: {names})")


def _is_message(m: Any) -> bool:
    if isinstance(m, dict):
        return ("role" in m or "type" in m or "lc" in m) and (
            "content" in m or "kwargs" in m or "data" in m)
    return isinstance(m, (list, tuple)) and len(m) == 2 and isinstance(m[0], str)


def _role_content(m: Any) -> tuple[str, Any]:
    """(role, content) of a chat message in the shapes OpenAI, LangChain and LangGraph use."""
    if isinstance(m, (list, tuple)) and len(m) == 2:            # ("user", "text")
        return str(m[0]).lower(), m[1]
    if not isinstance(m, dict):
        return "", None
    if m.get("lc") and isinstance(m.get("kwargs"), dict):      # LangChain serialised
        cls = str((m.get("id") or [""])[-1])
        role = "human" if cls.startswith("HumanMessage") else cls.lower()
        return role, m["kwargs"].get("content")
    if isinstance(m.get("data"), dict) and "type" in m:        # messages_to_dict
        return str(m["type"]).lower(), m["data"].get("content")
    return str(m.get("role") or m.get("type") or "").lower(), m.get("content")


def _langchain_message(d: dict) -> str | None:
    if not (d.get("lc") and isinstance(d.get("kwargs"), dict)):
        return None
    role, content = _role_content(d)
    if role not in _USER_ROLES:
        raise NotText(f"a {role or 'non-user'} message, not the user's")
    return _content_text(content)


def _last_user_message(msgs: list) -> str | None:
    for m in reversed(msgs):
        role, content = _role_content(m)
        if role in _USER_ROLES:
            return _content_text(content)
    raise NotText(f"a chat of {len(msgs)} message(s) with no user message")


def _content_text(content: Any) -> str | None:
    """A message's content: text, or the text parts of a multi-part content list."""
    if isinstance(content, str):
        return content if content.strip() else None
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") for p in content
                 if isinstance(p, str) or (isinstance(p, dict) and p.get("type") in
                                           ("text", "input_text") and isinstance(p.get("text"), str))]
        text = "\n".join(p for p in parts if p)
        if text.strip():
            return text
    raise NotText("a user message without text content")


# --------------------------------------------------------------------------- values

def otlp_attributes(pairs) -> dict[str, Any]:
    """OTLP `attributes` ([{key, value: {stringValue: …}}]) as a plain dict."""
    out = {}
    for kv in pairs or []:
        if isinstance(kv, dict) and "key" in kv:
            out[kv["key"]] = otlp_value(kv.get("value"))
    return out


def otlp_value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "string_value", "boolValue", "bool_value", "doubleValue",
              "double_value", "bytesValue", "bytes_value"):
        if k in v:
            return v[k]
    iv = _get(v, "intValue", "int_value")
    if iv is not None:  # proto3 JSON writes 64-bit integers as strings
        try:
            return int(iv)
        except (TypeError, ValueError):
            return iv
    av = _get(v, "arrayValue", "array_value")
    if av is not None:
        return [otlp_value(x) for x in (av or {}).get("values") or []]
    kv = _get(v, "kvlistValue", "kvlist_value")
    if kv is not None:
        return otlp_attributes((kv or {}).get("values") or [])
    return None


def _hex_id(raw: Any) -> str:
    """Trace/span ids are hex in OTLP JSON; some exporters send base64 anyway."""
    s = str(raw or "")
    if s and not _HEX.match(s) and len(s) in (12, 24):
        try:
            return base64.b64decode(s, validate=True).hex()
        except (binascii.Error, ValueError):
            pass
    return s


def iso_time(raw: Any, *, unit: str | None = None) -> str:
    """A time as ISO 8601 UTC: epoch numbers (`unit` "ns", or guessed from the magnitude:
    s, ms as pandas writes them, µs, ns) and ISO text with any offset; other text as given."""
    if raw is None or raw == "":
        return ""
    if isinstance(raw, str) and re.fullmatch(r"\d+(\.\d+)?", raw.strip()):
        raw = float(raw)
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        x = float(raw)
        div = {"ns": 1e9, "us": 1e6, "ms": 1e3, "s": 1.0}.get(unit or "") or (
            1e9 if x >= 1e17 else 1e6 if x >= 1e14 else 1e3 if x >= 1e11 else 1.0)
        try:
            return datetime.fromtimestamp(x / div, tz=timezone.utc).isoformat()
        except (OverflowError, OSError, ValueError):
            return str(raw)
    s = str(raw).strip()
    try:
        t = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return s
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).isoformat()


def _metadata(raw: Any) -> dict:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _doc(doc_id: Any, text: Any, score: Any, metadata: Any, title: Any = None) -> Doc:
    meta = _metadata(metadata)
    problem = None
    if text is not None and not isinstance(text, str):
        problem = f"content is {_a(text)}, not text"
    elif text is None:
        problem = "has no content"
    elif not text.strip():
        problem = "content is empty"
    id_from = None
    if doc_id in (None, ""):
        key = next((k for k in ID_KEYS if meta.get(k) not in (None, "")), None)
        if key is not None:
            doc_id, id_from = meta[key], f"metadata.{key}"
        elif isinstance(text, str) and text.strip():
            doc_id = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
            id_from = "text sha256"
    elif isinstance(doc_id, (dict, list, bool)):
        problem = problem or f"id is {_a(doc_id)}, not text"
    try:
        sc = float(score) if score is not None else None
    except (TypeError, ValueError):
        sc = None
    if sc is not None and sc != sc:   # NaN, as a dataframe writes a missing score
        sc = None
    kept: dict[str, Any] = {}
    if meta:
        kept["metadata"] = meta
    if isinstance(title, str) and title.strip():
        kept["title"] = title
    if id_from:
        kept["id_from"] = id_from
    return Doc(id=None if doc_id in (None, "") or problem and "id is" in problem
               else str(doc_id).strip(),
               text=text if isinstance(text, str) else None, score=sc, meta=kept or None,
               problem=problem, derived_id=id_from is not None)


def _a(v: Any) -> str:
    return {bool: "true/false", int: "a number", float: "a number", dict: "a JSON object",
            list: "a JSON list"}.get(type(v), f"a {type(v).__name__}")


def docs_from_attributes(attrs: dict) -> list[Doc]:
    """OpenInference documents from span attributes: flattened with an index, or a list."""
    by_rank: dict[int, dict] = {}
    for k, v in attrs.items():
        m = _DOC_KEY.match(k)
        if m and m.group(3) is None:
            by_rank.setdefault(int(m.group(1)), {})[m.group(2)] = v
        elif m and m.group(2) == "metadata":     # flattened: put the object back together
            md = by_rank.setdefault(int(m.group(1)), {}).setdefault("metadata", {})
            if isinstance(md, dict):
                _set_dotted(md, m.group(3), v)
    if by_rank:
        return [_doc(d.get("id"), d.get("content"), d.get("score"), d.get("metadata"))
                for _, d in sorted(by_rank.items())]
    listed = attrs.get("retrieval.documents")
    if listed is None and isinstance(attrs.get("retrieval"), dict):
        listed = attrs["retrieval"].get("documents")
    if isinstance(listed, str):    # a dataframe column saved as JSON text
        try:
            listed = json.loads(listed)
        except ValueError:
            listed = None
    out = []
    for d in listed if isinstance(listed, list) else []:
        if not isinstance(d, dict):
            continue
        inner = doc if isinstance(doc := d.get("document"), dict) else {}
        got = [inner.get(f) if f in inner else d.get(f"document.{f}")
               for f in ("id", "content", "score", "metadata")]
        out.append(_doc(*got))
    return out


def _set_dotted(d: dict, dotted: str, v: Any) -> None:
    parts = dotted.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {}) if isinstance(d.get(p, {}), dict) else {}
    d[parts[-1]] = v


def _is_retriever(attrs: dict, kind: Any = None) -> bool:
    k = kind or attrs.get("openinference.span.kind")
    return str(k or "").upper() == "RETRIEVER"


def _question_of(out: TraceRead, trace: str, value: Any, where: str, *,
                 json_text: bool = True) -> None:
    """Record a trace's question from its input; an input that is not text is an error
    naming the trace (a blob never becomes a question)."""
    if not trace or trace in out.questions:
        return
    try:
        q = question_text(value, json_text=json_text)
    except NotText as exc:
        out.bad_inputs.setdefault(trace, (where, str(exc)))
        return
    if q:
        out.questions[trace] = q


def _query_of(value: Any, *, json_text: bool = True) -> str | None:
    try:
        return question_text(value, json_text=json_text)
    except NotText:
        return None


# --------------------------------------------------------------------------- detect

FORMAT_NAMES = {"otlp": "OTLP JSON (resourceSpans)", "phoenix": "Phoenix spans",
                "langfuse": "Langfuse traces"}


def detect(records: list[tuple[str, Any]], path: Path) -> str:
    fmt = looks_like(records)
    if fmt is None:
        raise UserError("not a trace export abtest reads (OTLP JSON with resourceSpans, "
                        "Phoenix spans, Langfuse traces); it has keys: "
                        f"{record_keys(records)}", file=str(path))
    return fmt


def record_keys(records: list[tuple[str, Any]]) -> str:
    first = next((r for _, r in records if isinstance(r, dict)), None)
    if first is None:
        return f"no object (the first record is {type(records[0][1]).__name__})"
    if isinstance(first.get("data"), list) and first["data"] and isinstance(first["data"][0],
                                                                            dict):
        first = first["data"][0]
    return ", ".join(map(str, list(first)[:10])) or "none"


def looks_like(records: list[tuple[str, Any]]) -> str | None:
    """The trace format the records' shape is, or None."""
    for _, r in records[:50]:
        if not isinstance(r, dict):
            continue
        if "resourceSpans" in r or "resource_spans" in r:
            return "otlp"
        inner = data if isinstance(data := r.get("data"), list) else [r]
        for x in inner[:20]:
            if not isinstance(x, dict):
                continue
            if "observations" in x or ("traceId" in x and "type" in x) or (
                    isinstance(x.get("trace"), dict) and "observations" in x):
                return "langfuse"
            if ("span_kind" in x or "context.trace_id" in x
                    or isinstance(x.get("context"), dict) and "trace_id" in x["context"]):
                return "phoenix"
    return None


# --------------------------------------------------------------------------- otlp

def read_otlp(records: list[tuple[str, Any]], out: TraceRead) -> None:
    for where, r in records:
        rss = _get(r, "resourceSpans", "resource_spans") if isinstance(r, dict) else None
        if rss is None:
            out.skipped.append((where, "not an OTLP record (no resourceSpans)"))
            continue
        if not isinstance(rss, list):
            raise UserError(f"resourceSpans must be a list, got {_a(rss)}", file=str(out.path),
                            where=where, field="resourceSpans")
        k = 0
        for rs in rss:
            rs = rs if isinstance(rs, dict) else {}
            scopes = _get(rs, "scopeSpans", "scope_spans", "instrumentationLibrarySpans",
                          "instrumentation_library_spans") or []
            for ss in scopes if isinstance(scopes, list) else []:
                spans = (ss or {}).get("spans") if isinstance(ss, dict) else None
                for sp in spans if isinstance(spans, list) else []:
                    if not isinstance(sp, dict):
                        continue
                    out.n_spans += 1
                    at, k = f"{where}, span {k}", k + 1
                    attrs = otlp_attributes(sp.get("attributes"))
                    trace = _hex_id(_get(sp, "traceId", "trace_id"))
                    out.trace_ids.add(trace)
                    plain = str(attrs.get("input.mime_type") or "").startswith("text/plain")
                    if not _get(sp, "parentSpanId", "parent_span_id"):
                        _question_of(out, trace, attrs.get("input.value"), at,
                                     json_text=not plain)
                    out.session(trace, attrs.get("session.id"), "session.id")
                    if _is_retriever(attrs):
                        out.steps.append(Step(
                            trace_id=trace, span_id=_hex_id(_get(sp, "spanId", "span_id")),
                            name=str(sp.get("name") or "retriever"),
                            time=iso_time(_get(sp, "startTimeUnixNano", "start_time_unix_nano"),
                                          unit="ns"),
                            query=_query_of(attrs.get("input.value"), json_text=not plain),
                            docs=docs_from_attributes(attrs), where=at))


# --------------------------------------------------------------------------- phoenix

def _flat_get(x: dict, dotted: str) -> Any:
    if dotted in x:
        return x[dotted]
    cur: Any = x
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _objects(records: list[tuple[str, Any]], out: TraceRead, noun: str):
    """(where, object) of each record, a `{"data": […]}` page unwrapped; non-objects skipped."""
    for where, r in records:
        rows = (data if isinstance(r, dict) and isinstance(data := r.get("data"), list)
                else [r])
        for i, x in enumerate(rows):
            at = where if len(rows) == 1 else f"{where}, {noun} {i}"
            if isinstance(x, dict):
                yield at, x
            else:
                out.skipped.append((at, f"not a {noun} object"))


def read_phoenix(records: list[tuple[str, Any]], out: TraceRead) -> None:
    for at, sp in _objects(records, out, "span"):
        out.n_spans += 1
        attrs = sp.get("attributes") if isinstance(sp.get("attributes"), dict) else {
            k[len("attributes."):]: v for k, v in sp.items() if k.startswith("attributes.")}
        trace = str(_flat_get(sp, "context.trace_id") or "")
        span = str(_flat_get(sp, "context.span_id") or sp.get("span_id") or sp.get("id") or "")
        if not trace:
            out.skipped.append((at, "span without context.trace_id"))
            continue
        out.trace_ids.add(trace)
        plain = str(_flat_get(attrs, "input.mime_type") or "").startswith("text/plain")
        if sp.get("parent_id") in (None, ""):
            _question_of(out, trace, _flat_get(attrs, "input.value"), at, json_text=not plain)
        out.session(trace, _flat_get(attrs, "session.id"), "session.id")
        if isinstance(conv := sp.get("conversation"), dict):       # the legacy span JSONL
            out.session(trace, conv.get("conversation_id"), "conversation.conversation_id")
        kind = sp.get("span_kind") or _flat_get(attrs, "openinference.span.kind")
        if _is_retriever(attrs, kind):
            out.steps.append(Step(
                trace_id=trace, span_id=span, name=str(sp.get("name") or "retriever"),
                time=iso_time(sp.get("start_time")),
                query=_query_of(_flat_get(attrs, "input.value"), json_text=not plain),
                docs=docs_from_attributes(attrs), where=at))


# --------------------------------------------------------------------------- langfuse

def _decoded(v: Any) -> Any:
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _langfuse_docs(output: Any, metadata: Any) -> list[Doc]:
    attrs = (_metadata(metadata).get("attributes") or {}) if metadata else {}
    if isinstance(attrs, dict) and any(_DOC_KEY.match(k) for k in attrs):
        return docs_from_attributes(attrs)
    output = _decoded(output)
    if isinstance(output, dict):
        output = next((output[k] for k in ("documents", "nodes", "output", "result")
                       if isinstance(output.get(k), list)), None)
    docs = []
    for d in output if isinstance(output, list) else []:
        if not isinstance(d, dict):
            docs.append(_doc(None, d, None, None))
            continue
        node = d.get("node") if isinstance(d.get("node"), dict) else None
        if node is not None:   # LlamaIndex NodeWithScore
            docs.append(_doc(node.get("id_") or node.get("id"), node.get("text"), d.get("score"),
                             node.get("metadata")))
        else:                  # LangChain Document, or a plain {id, text|content, score}
            text = next((d[k] for k in ("page_content", "text", "content") if k in d), None)
            docs.append(_doc(d.get("id"), text, d.get("score"), d.get("metadata"), d.get("title")))
    return docs


def _is_langfuse_retrieval(o: dict) -> bool:
    if str(o.get("type") or "").upper() == "RETRIEVER":
        return True
    attrs = _metadata(o.get("metadata")).get("attributes")
    return isinstance(attrs, dict) and _is_retriever(attrs)


def read_langfuse(records: list[tuple[str, Any]], out: TraceRead) -> None:
    for at, x in _objects(records, out, "record"):
        trace_obj = x.get("trace") if isinstance(x.get("trace"), dict) else x
        if isinstance(x.get("observations"), list):    # a trace with its observations
            tid = str(trace_obj.get("id") or "")
            if tid:
                out.trace_ids.add(tid)
                _question_of(out, tid, trace_obj.get("input"), at)
                out.session(tid, trace_obj.get("sessionId"), "sessionId")
            obs = [(f"{at}, observation {j}", o) for j, o in enumerate(x["observations"])]
            trace_default = tid
        else:
            obs, trace_default = [(at, x)], ""
        for ow, o in obs:
            if not isinstance(o, dict):
                continue
            out.n_spans += 1
            trace = str(o.get("traceId") or trace_default)
            if trace:
                out.trace_ids.add(trace)
                attrs = _metadata(o.get("metadata")).get("attributes")
                if isinstance(attrs, dict):   # OpenInference attributes Langfuse kept
                    out.session(trace, attrs.get("session.id"), "session.id")
            if not o.get("parentObservationId") and trace and trace not in out.questions \
                    and not _is_langfuse_retrieval(o):
                _question_of(out, trace, o.get("input"), ow)
            if _is_langfuse_retrieval(o):
                out.steps.append(Step(
                    trace_id=trace, span_id=str(o.get("id") or ""),
                    name=str(o.get("name") or "retriever"), time=iso_time(o.get("startTime")),
                    query=_query_of(o.get("input")),
                    docs=_langfuse_docs(o.get("output"), o.get("metadata")), where=ow))


READERS = {"otlp": read_otlp, "phoenix": read_phoenix, "langfuse": read_langfuse}
