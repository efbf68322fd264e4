"""Corpora other tools wrote, as `abtest index` rows (`{"id", "text", "title", "metadata"}`).

A team that built its RAG app on LlamaIndex or LangChain already has its chunks as those
libraries serialise them; re-exporting them by hand invites a changed text or a lost id.
Read by shape, never by guess:

| shape | id | text | metadata |
|---|---|---|---|
| abtest's own rows | `id` | `text` | `metadata` (and `title`) |
| LlamaIndex nodes (`TextNode`/`Document` `.to_dict()`: `id_`, `text`) | `id_` | `text` | `metadata` |
| LlamaIndex `docstore.json` (`{"docstore/data": {id: {"__data__": node}}}`) | the node's `id_` | `text` | `metadata` |
| LangChain `Document` (`page_content`, `metadata`; `model_dump()` or `dumpd`'s `kwargs`) | `id`, else the metadata's `id`/`doc_id`/`chunk_id`, else `sha256:` + 16 hex digits of the text | `page_content` | `metadata` |

A library's own bookkeeping (embeddings, relationships, templates) has no place in an
index; the command says which fields it left, one line.
"""

from __future__ import annotations

import hashlib
from abtest.errors import UserError
import json

LANGCHAIN_ID_KEYS = ("id", "doc_id", "chunk_id", "document_id")


def docstore_of(path: str) -> tuple[dict, bytes] | None:
    """(document, its bytes) when the file is a LlamaIndex `docstore.json`, else None."""

    if not path.lower().endswith(".json"):
        return None
    try:
        with open(path, "rb") as f:
            raw = f.read()
        doc = json.loads(raw.decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None   # the record reader says what is wrong
    if isinstance(doc, dict) and isinstance(doc.get("docstore/data"), dict):
        return doc, raw
    return None


def corpus_format(row: dict) -> str:
    """"abtest", "llamaindex" (a node), "langchain" or "langchain-dumpd"."""
    if "id_" in row and "text" in row:
        return "llamaindex"
    if row.get("lc") and isinstance(row.get("kwargs"), dict) and "page_content" in row["kwargs"]:
        return "langchain-dumpd"
    if "page_content" in row:
        return "langchain"
    return "abtest"


def docstore_rows(doc: dict, file: str) -> list[tuple[str, dict]]:
    """The nodes of a LlamaIndex `docstore.json`, in the file's order."""
    out = []
    for key, entry in doc["docstore/data"].items():
        data = entry.get("__data__") if isinstance(entry, dict) else None
        if not isinstance(data, dict):
            raise UserError("expected {\"__data__\": {…node…}}", file=file,
                            field=f"docstore/data.{key}")
        out.append((f"docstore/data.{key}", data))
    return out


def as_corpus_row(fmt: str, row: dict, *, file: str, where: str,
                  left: dict[str, int]) -> dict:
    """One row of a library's shape as an abtest corpus row; `left` counts the fields not
    kept."""
    if fmt == "abtest":
        return row
    if fmt == "langchain-dumpd":
        row = row["kwargs"]
    if fmt in ("llamaindex", "llamaindex-docstore"):
        out = {"id": row["id_"], "text": row.get("text"), "metadata": row.get("metadata") or None}
        kept = {"id_", "text", "metadata"}
    else:
        text = row.get("page_content")
        given = row.get("metadata")
        md: dict = given if isinstance(given, dict) else {}
        cid = row.get("id")
        if cid is None:
            cid = next((md[k] for k in LANGCHAIN_ID_KEYS if isinstance(md.get(k), (str, int))
                        and not isinstance(md.get(k), bool)), None)
        if cid is None and isinstance(text, str):
            cid = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
            left["(no id: sha256 of the text)"] = left.get("(no id: sha256 of the text)", 0) + 1
        out = {"id": str(cid) if isinstance(cid, int) else cid, "text": text,
               "metadata": md or None}
        kept = {"id", "page_content", "metadata", "type"}
    title = (out["metadata"] or {}).get("title")
    if isinstance(title, str):
        out["title"] = title
    for k in row:
        if k not in kept:
            left[k] = left.get(k, 0) + 1
    return out
