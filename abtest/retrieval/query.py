"""Tokeniser, conservative plural stemmer and boolean query grammar for the local index.

Documents and queries go through the same `tokenize`, so a term matches exactly the
words it would have produced in a document: whole tokens only ("cat" never matches
"category"), case-insensitive, plurals folded by `stem`.

Grammar (operators must be UPPERCASE, so lowercase "and"/"or"/"not" in a natural
question stay ordinary words)::

    query   := or_expr
    or_expr := and_expr ("OR" and_expr)*
    and_expr:= unary ("AND"? unary)*        adjacent terms are ANDed
    unary   := "NOT" unary | primary
    primary := "(" or_expr ")" | WORD | '"' words '"'

Precedence: NOT > AND > OR. A quoted phrase matches its words adjacent and in order;
a bare word that tokenises to several tokens ("e-mail", "U.S.") is a phrase too.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Sequence, Union

from abtest.errors import UserError

#: Bump when tokenize/stem change: an index built with another version must be rebuilt.
TOKENIZER_VERSION = "t1"

# A word is a run of letters/digits; inner apostrophes are kept for the possessive rule.
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_APOS = re.compile(r"['\u2019]")

# Common words ending in "s" that are not plurals; stripping them would conflate them
# with unrelated words ("news" -> "new").
_KEEP_S = frozenset("""
news series species always perhaps whereas besides towards afterwards sometimes
lens chaos bias alias atlas canvas thanks means ethics physics mathematics economics
politics statistics athletics various previous serious famous
""".split())

_stem_cache: dict[str, str] = {}


def stem(token: str) -> str:
    """Fold regular English plurals, and nothing else.

    Deliberately conservative (rules apply to lowercase alphabetic tokens only):
    - 3 letters or fewer: unchanged (is, was, has, bus, gas, its, yes);
    - words in a short keep-list (news, series, species, always, ...): unchanged;
    - ending in "ss", "us", "is": unchanged (class, status, analysis, this);
    - "-ies" (5+ letters) -> "-y" (policies -> policy; ties -> tie by the last rule);
    - "-sses" -> "-ss", "-xes"/"-zzes"/"-ches"/"-shes" -> drop "es"
      (classes -> class, boxes -> box, matches -> match, dishes -> dish);
    - any other trailing "s" is dropped (conduits -> conduit, days -> day, sizes -> size).
    Known misses, accepted for predictability: irregular plurals (children, wolves),
    "-uses" plurals of "-us" nouns (buses -> buse, not bus), "-ches"/"-ies" plurals of
    "-che"/"-ie" nouns (caches -> cach, movies -> movy). Both sides are stemmed alike,
    so these cost singular/plural recall only. Rare false matches remain where a
    non-plural loses its "s" (does -> doe, odds -> odd).
    """
    hit = _stem_cache.get(token)
    if hit is not None:
        return hit
    out = token
    if len(token) > 3 and token.isalpha() and token.endswith("s") and token not in _KEEP_S:
        if token.endswith(("ss", "us", "is")):
            pass
        elif token.endswith("ies") and len(token) > 4:
            out = token[:-3] + "y"
        elif token.endswith("sses"):
            out = token[:-2]
        elif token.endswith(("xes", "zzes", "ches", "shes")):
            out = token[:-2]
        else:
            out = token[:-1]
    if len(_stem_cache) < 200_000:
        _stem_cache[token] = out
    return out


def _fold(word: str) -> str:
    """Possessive "'s" is dropped, other apostrophes removed: "alice's" -> "alice", "don't" -> "dont"."""
    if "'" in word or "\u2019" in word:
        if word.endswith(("'s", "\u2019s")):
            word = word[:-2]
        word = _APOS.sub("", word)
    return word


def normalize_text(text: str) -> str:
    """NFKC + lowercase, so ligatures, full-width forms and case never split a match."""
    return unicodedata.normalize("NFKC", text).lower()


def words(text: str) -> list[str]:
    """Lowercased surface words (no stemming): what keyword extraction shows to people."""
    return [_fold(m) for m in _WORD.findall(normalize_text(text))]


class _TokenCache(dict):
    """raw lowercased word -> index token; corpora reuse a small vocabulary, so this
    turns tokenising into one C-level dict lookup per word."""

    def __missing__(self, raw: str) -> str:
        tok = stem(_fold(raw))
        if len(self) < 500_000:
            self[raw] = tok
        return tok


_TOKENS = _TokenCache()


def tokenize(text: str) -> list[str]:
    """The index's token stream for `text`; queries use the same function."""
    return list(map(_TOKENS.__getitem__, _WORD.findall(normalize_text(text))))


def word_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, token) per token, positions in the original string, for snippets."""
    return [(m.start(), m.end(), t) for m in _WORD.finditer(text) for t in tokenize(m.group(0))]


# ---------------------------------------------------------------- AST


@dataclass(frozen=True)
class Term:
    term: str  # a normalised token


@dataclass(frozen=True)
class Phrase:
    terms: tuple[str, ...]  # two or more normalised tokens, adjacent and in order


@dataclass(frozen=True)
class And:
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Or:
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Not:
    item: "Node"


Node = Union[Term, Phrase, And, Or, Not]


class QueryError(UserError):
    """A query that does not parse; `.position` is 1-based."""

    def __init__(self, message: str, query: str, position: int):
        super().__init__(message, where=f"query {query!r} at position {position}")
        self.query = query
        self.position = position


# ---------------------------------------------------------------- lexer / parser

_OPERATORS = ("AND", "OR", "NOT")


@dataclass
class _Tok:
    kind: str  # "(", ")", "AND", "OR", "NOT", "WORD", "PHRASE"
    text: str
    pos: int  # 1-based


def _lex(query: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
        elif c in "()":
            toks.append(_Tok(c, c, i + 1))
            i += 1
        elif c == '"':
            j = query.find('"', i + 1)
            if j < 0:
                raise QueryError("unterminated quote", query, i + 1)
            toks.append(_Tok("PHRASE", query[i + 1:j], i + 1))
            i = j + 1
        else:
            j = i
            while j < n and not query[j].isspace() and query[j] not in '()"':
                j += 1
            word = query[i:j]
            kind = word if word in _OPERATORS else "WORD"
            toks.append(_Tok(kind, word, i + 1))
            i = j
    return toks


class _Parser:
    def __init__(self, query: str):
        self.query = query
        self.toks = _lex(query)
        self.i = 0

    def err(self, msg: str, pos: int) -> QueryError:
        return QueryError(msg, self.query, pos)

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def end_pos(self) -> int:
        return len(self.query) + 1

    def parse(self) -> Node:
        if not self.toks:
            raise self.err("the query is empty", 1)
        node = self.or_expr()
        t = self.peek()
        if t is not None:
            if t.kind == ")":
                raise self.err("')' has no matching '('", t.pos)
            raise self.err(f"unexpected {t.text!r}", t.pos)  # pragma: no cover - defensive
        return node

    def or_expr(self) -> Node:
        items = [self.and_expr()]
        while (t := self.peek()) is not None and t.kind == "OR":
            self.i += 1
            items.append(self.and_expr(after=t))
        return _flat(Or, items)

    def and_expr(self, after: _Tok | None = None) -> Node:
        items = [self.unary(after)]
        while (t := self.peek()) is not None and t.kind not in ("OR", ")"):
            if t.kind == "AND":
                self.i += 1
                items.append(self.unary(after=t))
            else:
                items.append(self.unary())
        return _flat(And, items)

    def unary(self, after: _Tok | None = None) -> Node:
        t = self.peek()
        if t is None:
            if after is not None:
                raise self.err(f"{after.text!r} has nothing after it", after.pos)
            raise self.err("expected a term", self.end_pos())  # pragma: no cover
        if t.kind == "NOT":
            self.i += 1
            return Not(self.unary(after=t))
        return self.primary(after)

    def primary(self, after: _Tok | None) -> Node:
        t = self.peek()
        assert t is not None
        if t.kind in ("AND", "OR"):
            if after is not None:
                raise self.err(f"{t.text!r} cannot follow {after.text!r}", t.pos)
            raise self.err(f"{t.text!r} needs a term before it", t.pos)
        if t.kind == ")":
            if after is not None:
                raise self.err(f"{after.text!r} has nothing after it", after.pos)
            raise self.err("')' has no matching '('", t.pos)
        self.i += 1
        if t.kind == "(":
            if (nxt := self.peek()) is not None and nxt.kind == ")":
                raise self.err("empty parentheses", t.pos)
            if nxt is None:
                raise self.err("'(' is never closed", t.pos)
            node = self.or_expr()
            close = self.peek()
            if close is None or close.kind != ")":
                raise self.err("'(' is never closed", t.pos)
            self.i += 1
            return node
        toks = tokenize(t.text)
        if not toks:
            what = "phrase" if t.kind == "PHRASE" else "term"
            raise self.err(f"{what} {t.text!r} has no letters or digits", t.pos)
        return Term(toks[0]) if len(toks) == 1 else Phrase(tuple(toks))


def _flat(cls, items: list[Node]) -> Node:
    if len(items) == 1:
        return items[0]
    out: list[Node] = []
    for it in items:
        out.extend(it.items if isinstance(it, cls) else (it,))
    return cls(tuple(out))


def parse(query: str) -> Node:
    """Parse a boolean query; raises QueryError (a UserError) naming the query and position."""
    return _Parser(query).parse()


# ---------------------------------------------------------------- helpers over the AST


def evaluate(node: Node, tokens: Sequence[str]) -> bool:
    """Reference semantics on one document's token stream (tests check SQL against it)."""
    termset = set(tokens)

    def ev(n: Node) -> bool:
        if isinstance(n, Term):
            return n.term in termset
        if isinstance(n, Phrase):
            m = len(n.terms)
            return any(tuple(tokens[i:i + m]) == n.terms for i in range(len(tokens) - m + 1))
        if isinstance(n, And):
            return all(ev(x) for x in n.items)
        if isinstance(n, Or):
            return any(ev(x) for x in n.items)
        return not ev(n.item)

    return ev(node)


def positive_terms(node: Node) -> list[str]:
    """Terms under an even number of NOTs, first-seen order: the ones BM25 ranks by."""
    out: dict[str, None] = {}

    def walk(n: Node, neg: bool) -> None:
        if isinstance(n, Term):
            if not neg:
                out.setdefault(n.term)
        elif isinstance(n, Phrase):
            if not neg:
                for t in n.terms:
                    out.setdefault(t)
        elif isinstance(n, Not):
            walk(n.item, not neg)
        else:
            for x in n.items:
                walk(x, neg)

    walk(node, False)
    return list(out)


Atom = Union[Term, Phrase]
Clause = tuple[frozenset, frozenset]  # (atoms that must be present, atoms that must be absent)


def to_dnf(node: Node, limit: int = 1024) -> list[Clause] | None:
    """Disjunctive normal form, or None when it would exceed `limit` clauses.

    DNF lets many questions be answered by one set-based SQL query; queries whose DNF
    explodes are evaluated one by one instead.
    """

    def nnf(n: Node, neg: bool) -> list[Clause] | None:
        if isinstance(n, (Term, Phrase)):
            return [(frozenset(), frozenset([n]))] if neg else [(frozenset([n]), frozenset())]
        if isinstance(n, Not):
            return nnf(n.item, not neg)
        disj = isinstance(n, Or) != neg  # De Morgan
        maybe = [nnf(x, neg) for x in n.items]
        parts = [p for p in maybe if p is not None]
        if len(parts) != len(maybe):
            return None
        if disj:
            out = [c for p in parts for c in p]
        else:
            out = [(frozenset(), frozenset())]
            for p in parts:
                if len(out) * len(p) > limit * 4:
                    return None
                out = [(a[0] | b[0], a[1] | b[1]) for a in out for b in p]
                out = [c for c in out if not (c[0] & c[1])]
        seen: dict[Clause, None] = {}
        for c in out:
            if not (c[0] & c[1]):
                seen.setdefault(c)
        return list(seen) if len(seen) <= limit else None

    return nnf(node, False)


def _quote_if_needed(word: str) -> str:
    if word in _OPERATORS or not re.fullmatch(r"[^\W_]+", word):
        return '"' + word.replace('"', " ") + '"'
    return word


def or_query(keywords: Iterable[str]) -> str:
    """A query string OR-ing the keywords; quoting keeps "OR" or "e-mail" literal.

    The string is what gets stored on a case, so `abtest search` reproduces the capture.
    """
    parts = [_quote_if_needed(k.strip()) for k in keywords if tokenize(k)]
    return " OR ".join(parts)


def format_query(node: Node) -> str:
    """Canonical text for an AST (fully parenthesised where precedence needs it)."""
    if isinstance(node, Term):
        return _quote_if_needed(node.term)
    if isinstance(node, Phrase):
        return '"' + " ".join(node.terms) + '"'
    if isinstance(node, Not):
        inner = format_query(node.item)
        return f"NOT ({inner})" if isinstance(node.item, (And, Or)) else f"NOT {inner}"
    if isinstance(node, And):
        return " AND ".join(f"({format_query(x)})" if isinstance(x, Or) else format_query(x)
                            for x in node.items)
    return " OR ".join(format_query(x) for x in node.items)
