"""Searching operators' notes by their words, with the query syntax of the index (words, "quoted
phrases", -excluded words).

Notes are not in the full-text index (`agent.models.SearchEntry`): its entries belong to a session
and its queries join one, and a note mostly has none. Notes are few (written by hand, a few hundred
in a homelab that has run for years), so they are matched here, live, against the stored (redacted)
text, scope and tags: a note found is always the note as it is now, with nothing to keep in step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from agent.models import Note
from agent.search.query import QUERY_MAX_CHARS

_TERM = re.compile(r'(-?)"([^"]*)"|(-?)([^\s"]+)')
_WORD = re.compile(r"\w+")
NOTES_SCANNED = 5000
SNIPPET_CHARS = 160


@dataclass(frozen=True)
class NoteTerms:
    wanted: list[list[str]]
    unwanted: list[list[str]]


@dataclass(frozen=True)
class NoteHit:
    note: Note
    # The matched words, as found in the text (for the snippet's highlights).
    snippet: SafeString


def note_terms(query: str) -> NoteTerms:
    """The query as lists of words: every term required, "phrases" kept whole, -terms excluded."""
    wanted: list[list[str]] = []
    unwanted: list[list[str]] = []
    for match in _TERM.finditer(query[:QUERY_MAX_CHARS]):
        negated = bool(match.group(1) or match.group(3))
        words = [
            word.casefold() for word in _WORD.findall(match.group(2) if match.group(2) is not None else match.group(4))
        ]
        if words:
            (unwanted if negated else wanted).append(words)
    return NoteTerms(wanted=wanted, unwanted=unwanted)


def _phrase(words: list[str]) -> re.Pattern[str]:
    """A word or phrase at word starts ("restart" finds "restarted"), case-insensitive."""
    return re.compile(r"\b" + r"\W+".join(re.escape(word) for word in words), re.IGNORECASE)


def note_matches(note: Note, terms: NoteTerms) -> bool:
    haystack = note_searchable(note)
    return all(_phrase(words).search(haystack) for words in terms.wanted) and not any(
        _phrase(words).search(haystack) for words in terms.unwanted
    )


def note_searchable(note: Note) -> str:
    return "\n".join([note.text, " ".join(note.entities), " ".join(f"#{tag}" for tag in note.tags)])


def note_snippet(text: str, terms: NoteTerms) -> SafeString:
    """Around the first match: escaped, with the matched words (and only those) as `<mark>`."""
    patterns = [_phrase(words) for words in terms.wanted]
    first = min((found.start() for p in patterns if (found := p.search(text))), default=0)
    start = max(0, first - SNIPPET_CHARS // 3)
    piece = text[start : start + SNIPPET_CHARS]
    spans = sorted({(m.start(), m.end()) for p in patterns for m in p.finditer(piece)})
    html, at = [], 0
    for begin, end in spans:
        if begin < at:
            continue
        html += [str(escape(piece[at:begin])), "<mark>", str(escape(piece[begin:end])), "</mark>"]
        at = end
    html.append(str(escape(piece[at:])))
    prefix = "… " if start else ""
    suffix = " …" if start + SNIPPET_CHARS < len(text) else ""
    return mark_safe(prefix + "".join(html) + suffix)  # every piece of the text escaped above


def notes_search(query: str, *, limit: int = 20, active: bool | None = None) -> list[NoteHit]:
    """The notes holding every word of `query` (in their text, entities or tags), newest change first."""
    terms = note_terms(query)
    if not terms.wanted:
        return []
    rows = Note.objects.all() if active is None else Note.objects.filter(active=active)
    hits: list[NoteHit] = []
    for note in rows.order_by("-updated_at", "-id")[:NOTES_SCANNED]:
        if note_matches(note, terms):
            hits.append(NoteHit(note=note, snippet=note_snippet(note.text, terms)))
            if len(hits) >= limit:
                break
    return hits
