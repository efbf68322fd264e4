"""Write this folder's generated LlamaIndex files with LlamaIndex's own writers (no licensed
public file of these shapes exists; see ../README.md).

Texts are the SQuAD 2.0 dev "Normans" article (CC BY-SA 4.0, Wikipedia-derived) as the repo
ships it in abtest/demo_data/ (byte-identical to shared/data/squad_normans/): paragraphs
`normans#pK` from corpus.jsonl, questions and crowd answer spans from questions.jsonl, all word
for word.

Writers (public API only), in a venv outside the repo:
    # from the repository's root; the venv beside the repository, not in it
    python3 -m venv ../lienv && ../lienv/bin/pip install "llama-index-core==0.14.20"
    ../lienv/bin/python tests/data/imports/llamaindex/make_files.py
llama-index-core 0.14.20 is the last release with `llama_index.core.llama_dataset`
(0.14.21 dropped the module; `QueryResponseDataset` is still in `llama_index.core.evaluation`).

- labelled_rag_dataset.json   LabelledRagDataset(examples=[...]).save_json(path)
- query_response_dataset.json QueryResponseDataset(queries=..., responses=...).save_json(path)
- nodes.json                  json.dump([node.to_dict() for node in nodes], f, indent=2)
- docstore.json               SimpleDocumentStore().add_documents(nodes); .persist(path)
"""

import json
from pathlib import Path

from llama_index.core.evaluation import QueryResponseDataset
from llama_index.core.llama_dataset import (
    CreatedBy,
    CreatedByType,
    LabelledRagDataExample,
    LabelledRagDataset,
)
from llama_index.core.schema import NodeRelationship, ObjectType, RelatedNodeInfo, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[3] / "abtest" / "demo_data"


def load_jsonl(name: str) -> list[dict]:
    with open(DATA / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


CORPUS = {c["id"]: c["text"] for c in load_jsonl("corpus.jsonl")}
QUESTIONS = {q["id"]: q for q in load_jsonl("questions.jsonl")}

HUMAN = CreatedBy(type=CreatedByType.HUMAN)
GPT4 = CreatedBy(type=CreatedByType.AI, model_name="gpt-4")


def example(qid: str, contexts: list[str], answer: str) -> LabelledRagDataExample:
    q = QUESTIONS[qid]
    assert answer in q["all_answers"], (qid, answer)
    return LabelledRagDataExample(
        query=q["question"],
        query_by=HUMAN,
        reference_contexts=[CORPUS[c] for c in contexts],
        reference_answer=answer,
        reference_answer_by=GPT4,
    )


def labelled_rag_dataset() -> None:
    examples = [
        # two questions written against the same paragraph (normans#p0)
        example("56ddde6b9a695914005b9628", ["normans#p0"], "France"),
        example("56ddde6b9a695914005b962b", ["normans#p0"], "Rollo"),
        # the same question twice, with the two different spans SQuAD's crowd gave
        example("56dde0ba66d3e219004dad77", ["normans#p3"], "Seine"),
        example("56dde0ba66d3e219004dad77", ["normans#p3"], "Epte"),
        example("56dddf4066d3e219004dad61", ["normans#p1"], "Catholic orthodoxy"),
        # two reference contexts: the question's own paragraph (p4) then p3 (also about Rollo)
        example("56dde1d966d3e219004dad8d", ["normans#p4", "normans#p3"], "Rollo"),
    ]
    LabelledRagDataset(examples=examples).save_json(str(HERE / "labelled_rag_dataset.json"))


def query_response_dataset() -> None:
    qids = [
        "56dddf4066d3e219004dad5f",
        "56dddf4066d3e219004dad60",
        "56dde0379a695914005b9636",
        "56dde0379a695914005b9637",
        "56dde0ba66d3e219004dad75",
    ]
    # deprecated in favour of LabelledRagDataset (a DeprecationWarning is printed), still public
    ds = QueryResponseDataset(
        queries={qid: QUESTIONS[qid]["question"] for qid in qids},
        responses={qid: QUESTIONS[qid]["reference_answer"] for qid in qids},
    )
    ds.save_json(str(HERE / "query_response_dataset.json"))


def nodes() -> list[TextNode]:
    ids = [f"normans#p{k}" for k in range(5)]
    out = []
    for k, nid in enumerate(ids):
        rel = {
            NodeRelationship.SOURCE: RelatedNodeInfo(
                node_id="squad-v2.0-dev/Normans",
                node_type=ObjectType.DOCUMENT,
                metadata={"title": "Normans"},
            )
        }
        if k > 0:
            rel[NodeRelationship.PREVIOUS] = RelatedNodeInfo(
                node_id=ids[k - 1], node_type=ObjectType.TEXT
            )
        if k < len(ids) - 1:
            rel[NodeRelationship.NEXT] = RelatedNodeInfo(
                node_id=ids[k + 1], node_type=ObjectType.TEXT
            )
        out.append(
            TextNode(
                id_=nid,
                text=CORPUS[nid],
                metadata={"title": "Normans", "paragraph": k, "source": "SQuAD 2.0 dev"},
                relationships=rel,
            )
        )
    return out


def write_nodes(ns: list[TextNode]) -> None:
    with open(HERE / "nodes.json", "w", encoding="utf-8") as f:
        json.dump([n.to_dict() for n in ns], f, indent=2)
        f.write("\n")


def docstore(ns: list[TextNode]) -> None:
    store = SimpleDocumentStore()
    store.add_documents(ns)
    store.persist(str(HERE / "docstore.json"))


if __name__ == "__main__":
    labelled_rag_dataset()
    query_response_dataset()
    ns = nodes()
    write_nodes(ns)
    docstore(ns)
