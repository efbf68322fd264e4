#!/usr/bin/env python
"""Benchmark the local retriever: index N synthetic chunks, capture M questions.

Synthetic but not easy: chunk words follow a Zipf law (s=1) over a fixed seeded
vocabulary, with ~35% English stopwords mixed in, so the most common content words
occur in most chunks, as frequent domain words do in a real corpus. Questions are
drawn from the same distribution and go through the real path: keyword extraction,
`local:` retriever, one batched `retrieve_many`.

    python scripts/bench_capture.py [--chunks 50000] [--questions 1000] [--k 5]
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from abtest.retrieval import get_retriever  # noqa: E402
from abtest.retrieval.index import build_index  # noqa: E402

STOP = ("the a an of to and in is it that for on with as be by this are or from at was "
        "what how when which can do does i my you your").split()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=50_000)
    ap.add_argument("--questions", type=int, default=1_000)
    ap.add_argument("--words", type=int, default=60, help="words per chunk")
    ap.add_argument("--vocab", type=int, default=20_000, help="content vocabulary size")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < args.vocab:
        w = "".join(rng.choice(letters) for _ in range(rng.randint(4, 10)))
        if w not in seen and w not in STOP:
            seen.add(w)
            vocab.append(w)
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(vocab))))

    def sample(n: int) -> list[str]:
        return [rng.choice(STOP) if rng.random() < 0.35
                else vocab[bisect.bisect(cum, rng.random() * cum[-1])] for _ in range(n)]

    with tempfile.TemporaryDirectory() as tmp:
        work = args.dir or tmp
        os.makedirs(work, exist_ok=True)
        corpus = os.path.join(work, "corpus.jsonl")
        index = os.path.join(work, "index.duckdb")
        with open(corpus, "w", encoding="utf-8") as fh:
            for i in range(args.chunks):
                words = sample(rng.randint(args.words - 10, args.words + 10))
                fh.write(json.dumps({"id": f"doc-{i:06d}#c0", "text": " ".join(words).capitalize()
                                     + ".", "title": f"Doc {i}"}) + "\n")
        questions = [(f"q{i:04d}", " ".join(sample(rng.randint(8, 14))).capitalize() + "?")
                     for i in range(args.questions)]

        t0 = time.perf_counter()
        stats = build_index(corpus, index)
        t_index = time.perf_counter() - t0

        retriever = get_retriever(f"local:{os.path.basename(index)}", base_dir=work, k=args.k)
        t0 = time.perf_counter()
        out = retriever.retrieve_many(questions, args.k)
        t_capture = time.perf_counter() - t0
        t0 = time.perf_counter()
        retriever.retrieve_many(questions, args.k)
        t_warm = time.perf_counter() - t0
        retriever.close()

    n_kw = sum(len(r.keywords or []) for r in out.values()) / max(1, len(out))
    n_hit = sum(len(r) for r in out.values()) / max(1, len(out))
    print(f"corpus: {stats['n_docs']} chunks, avg {stats['avgdl']:.1f} tokens, "
          f"{stats['n_terms']} terms, {stats['n_postings']} postings")
    print(f"index:   {t_index:6.2f} s  {stats['n_docs'] / t_index:9.0f} chunks/s "
          "(JSONL validation + tokenising + SQL build)")
    print(f"capture: {t_capture:6.2f} s  {len(questions) / t_capture:9.0f} questions/s "
          f"(first call, incl. opening the index; {n_kw:.1f} OR-ed keywords/question, "
          f"{n_hit:.1f} chunks returned)")
    print(f"capture: {t_warm:6.2f} s  {len(questions) / t_warm:9.0f} questions/s (second call)")


if __name__ == "__main__":
    main()
