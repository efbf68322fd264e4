"""Write this folder's LangChain Document lists with langchain-core's own serialisers (no
licensed public file of these shapes exists; see ../README.md).

Texts are paragraphs normans#p0..p4 of the SQuAD 2.0 dev "Normans" article (CC BY-SA 4.0,
Wikipedia-derived) as the repo ships it in abtest/demo_data/corpus.jsonl (byte-identical to
shared/data/squad_normans/corpus.jsonl), word for word.

    # from the repository's root; the venv beside the repository, not in it
    python3 -m venv ../lienv && ../lienv/bin/pip install "langchain-core==1.8.3"
    ../lienv/bin/python tests/data/imports/langchain/make_files.py

- documents.json        json.dump([d.model_dump() for d in docs], f, indent=2)
- documents.dumpd.json  json.dump(langchain_core.load.dumpd(docs), f, indent=2)
"""

import json
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.load import dumpd

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[3] / "abtest" / "demo_data"


def documents() -> list[Document]:
    with open(DATA / "corpus.jsonl", encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f if line.strip()]
    docs = []
    for k, chunk in enumerate(corpus[:5]):
        assert chunk["id"] == f"normans#p{k}"
        docs.append(
            Document(
                id=chunk["id"],
                page_content=chunk["text"],
                metadata={"source": "SQuAD 2.0 dev", "title": chunk["title"], "paragraph": k},
            )
        )
    return docs


if __name__ == "__main__":
    docs = documents()
    with open(HERE / "documents.json", "w", encoding="utf-8") as f:
        json.dump([d.model_dump() for d in docs], f, indent=2)
        f.write("\n")
    with open(HERE / "documents.dumpd.json", "w", encoding="utf-8") as f:
        json.dump(dumpd(docs), f, indent=2)
        f.write("\n")
