"""Ranked full-text search over the knowledge base (BM25, titles and tags weighted up)."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from oikos_sim.clock import iso
from oikos_sim.errors import InvalidRequest
from oikos_sim.records import KnowledgeDoc

_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]*[a-z0-9]|[a-z0-9]")
_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "i", "in", "is", "it",
    "of", "on", "or", "the", "to", "what", "when", "why", "with",
})  # fmt: skip
K1 = 1.4
B = 0.75
TITLE_WEIGHT = 3
TAG_WEIGHT = 2


def tokens(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    # Light stemming so "failures" finds "failure" and "restarting" finds "restart".
    stemmed = []
    for word in words:
        if word in _STOP:
            continue
        for suffix in ("ing", "es", "s"):
            if len(word) > len(suffix) + 3 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        stemmed.append(word)
    return stemmed


def _document_terms(doc: KnowledgeDoc) -> Counter[str]:
    terms = Counter(tokens(doc.body))
    for term in tokens(doc.title):
        terms[term] += TITLE_WEIGHT
    for term in tokens(" ".join(doc.tags) + " " + " ".join(e.split(":", 1)[-1] for e in doc.entities)):
        terms[term] += TAG_WEIGHT
    return terms


def _snippet(doc: KnowledgeDoc, query_terms: set[str]) -> str:
    """The body line that mentions the most query terms, trimmed."""
    best, best_hits = doc.body.strip().splitlines()[0], -1
    for line in doc.body.splitlines():
        hits = len(query_terms & set(tokens(line)))
        if hits > best_hits:
            best, best_hits = line, hits
    best = best.strip()
    return best if len(best) <= 240 else best[:237] + "..."


def knowledge_search(
    docs: list[KnowledgeDoc], query: str, *, limit: int = 5, kind: str | None = None
) -> list[dict[str, Any]]:
    """Documents matching ``query``, best first, with a score and the most relevant line."""
    query_terms = tokens(query)
    if not query_terms:
        raise InvalidRequest("The query has no searchable words; try e.g. 'postgres wal archive'.")
    pool = [doc for doc in docs if kind is None or doc.kind == kind]
    indexed = [(doc, _document_terms(doc)) for doc in pool]
    if not indexed:
        return []
    average_length = sum(sum(terms.values()) for _, terms in indexed) / len(indexed)
    results = []
    for doc, terms in indexed:
        length = sum(terms.values())
        score = 0.0
        for term in set(query_terms):
            frequency = terms.get(term, 0)
            if not frequency:
                continue
            containing = sum(1 for _, other in indexed if term in other)
            idf = math.log(1 + (len(indexed) - containing + 0.5) / (containing + 0.5))
            score += idf * frequency * (K1 + 1) / (frequency + K1 * (1 - B + B * length / average_length))
        if score > 0:
            results.append((score, doc))
    results.sort(key=lambda pair: (-pair[0], pair[1].id))
    return [
        {
            "id": doc.id,
            "title": doc.title,
            "kind": doc.kind,
            "score": round(score, 3),
            "tags": list(doc.tags),
            "entities": list(doc.entities),
            "updated_at": iso(doc.updated_at),
            "snippet": _snippet(doc, set(query_terms)),
            "body": doc.body,
        }
        for score, doc in results[:limit]
    ]
