"""Recall: which operators' notes a turn is given, and the block of the request that carries them.

A note is recalled when its scope names what the question is about — an entity it mentions by
slug (`service:sonarr`) or by name (`sonarr`), a glob matching one (`lxc:media-*`), a tag or signal
kind it uses (`http_timeout`), `*` (every question) — or, failing that, when it shares enough words
with the question. The turn's previous question counts too, at half weight ("restart it").
Runbooks come first, then by how well they match; they are given whole, newest first among equals,
until the token share (`HERMES_RECALL_TOKENS`) is spent; the rest are named, not given.

The block goes in the request as a system block after the cached persona (agent/engine/caching.py),
so it never invalidates the tools' and the persona's cache; a turn whose notes differ from the
previous turn's re-reads the conversation prefix once. The turn records what it was given
(`Turn.notes_given`) for the transcript and the export.
"""

from __future__ import annotations

import fnmatch
import re
import uuid
from dataclasses import dataclass

from django.conf import settings

from agent.models import Note, Turn

# About four characters per token, as the budget's estimates (docs/budget.md).
CHARS_PER_TOKEN = 4
EARLIER_WEIGHT = 0.5
# A note recalled by shared words alone needs this many distinct ones.
WORDS_NEEDED = 2
# Named (not given) when over the share: at most this many.
MENTIONED_MAX = 10

_WORD = re.compile(r"[a-z0-9][a-z0-9_.:/*-]*[a-z0-9*]|[a-z0-9]")
_STOPWORD_TEXT = """
about after again also and any are because been before being but can could did does doing done
down each from had has have having her here him his how into its just like more most much must
need not now off once only other our out over own same should some such than that the their them
then there these they this those through too under until very was were what when where which
while who why will with would you your yours please tell show check look know hermes today
yesterday
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class RecalledNote:
    id: int
    title: str
    text: str
    entities: list[str]
    tags: list[str]
    runbook: bool
    updated: str
    score: float

    def given(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "runbook": self.runbook}


@dataclass(frozen=True)
class Recall:
    """The notes given whole, those matched but left out for length, and the block carrying them."""

    given: list[RecalledNote]
    left_out: list[RecalledNote]

    @property
    def text(self) -> str:
        return recall_block(self)


def scope_covers(pattern: str, slug: str) -> bool:
    """Whether a note's scope entry covers the entity `slug` (`*`, an exact slug or a glob)."""
    return pattern == "*" or fnmatch.fnmatchcase(slug.lower(), pattern.lower())


def _words(text: str) -> set[str]:
    return {word.rstrip(".:/-") for word in _WORD.findall(text.lower())}


def _stem(word: str) -> str:
    """The word without a common English ending, so "restarted" meets "restart" and "upgrades" "upgrade"."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _match(note: Note, words: set[str], lowered: str) -> float:
    """How well the note's scope or text matches the text whose words these are (0: not at all)."""
    slugs = {word for word in words if ":" in word and not word.endswith(":")}
    score = 0.0
    for pattern in note.entities:
        pattern = pattern.lower()
        if pattern == "*":
            score = max(score, 1.5)
            continue
        kind, _, name = pattern.partition(":")
        if any(fnmatch.fnmatchcase(slug, pattern) for slug in slugs):
            score = max(score, 3.0)
        elif name.strip("*?") and any(fnmatch.fnmatchcase(word, name) for word in words if ":" not in word):
            # The entity named without its kind: "sonarr" for service:sonarr, "media-1" for lxc:media-*.
            score = max(score, 3.0)
        elif not name.strip("*?") and (kind in words or f"{kind}s" in words):
            score = max(score, 2.0)
    for tag in note.tags:
        if tag in words or (("_" in tag or "-" in tag) and re.sub(r"[_-]", " ", tag) in lowered):
            score = max(score, 2.0)
    if score:
        return score + (1.0 if note.runbook else 0.0)
    significant = {_stem(word) for word in words if len(word) >= 4 and word not in _STOPWORDS}
    shared = significant & {_stem(word) for word in _words(note.text)}
    if len(shared) >= WORDS_NEEDED:
        return 1.0 + 0.1 * min(len(shared), 9)
    return 0.0


def recall(question: str, *, earlier: str = "", budget_tokens: int | None = None) -> Recall:
    """The active notes matching `question` (and, at half weight, the `earlier` question)."""
    budget = settings.HERMES_RECALL_TOKENS if budget_tokens is None else budget_tokens
    if budget <= 0:
        return Recall(given=[], left_out=[])
    now_words, now_lowered = _words(question), question.lower()
    before_words, before_lowered = _words(earlier), earlier.lower()
    scored: list[RecalledNote] = []
    for note in Note.objects.filter(active=True).order_by("-updated_at", "-id"):
        score = _match(note, now_words, now_lowered)
        if earlier:
            score = max(score, EARLIER_WEIGHT * _match(note, before_words, before_lowered))
        if score <= 0:
            continue
        scored.append(
            RecalledNote(
                id=note.pk,
                title=note.title,
                text=note.text,
                entities=list(note.entities),
                tags=list(note.tags),
                runbook=note.runbook,
                updated=f"{note.updated_at:%Y-%m-%d} by {note.updated_by or note.author}",
                score=score,
            )
        )
    # Runbooks first, then the best matches; `sorted` keeps the newest first among equals.
    scored = sorted(scored, key=lambda n: (not n.runbook, -n.score))
    room = budget * CHARS_PER_TOKEN
    given: list[RecalledNote] = []
    left_out: list[RecalledNote] = []
    for entry in scored:
        size = len(_note_entry(entry))
        if size <= room:
            given.append(entry)
            room -= size
        else:
            left_out.append(entry)
    return Recall(given=given, left_out=left_out[:MENTIONED_MAX])


def _note_entry(note: RecalledNote) -> str:
    scope = ", ".join(note.entities + [f"#{tag}" for tag in note.tags]) or "no scope"
    kind = "runbook" if note.runbook else "note"
    return f"[note {note.id}] ({kind}; {scope}; updated {note.updated})\n{note.text}\n"


def recall_block(found: Recall) -> str:
    """The system block carrying the recalled notes; empty when there are none."""
    if not found.given and not found.left_out:
        return ""
    lines = [
        "## Operators' notes",
        "Operators taught you these notes about this homelab; they match this question. Cite each note you "
        "rely on as [note N]. A note can be out of date: when a tool result disagrees with one, trust the "
        "tool result and say the note may be stale.",
    ]
    runbooks = [note for note in found.given if note.runbook]
    facts = [note for note in found.given if not note.runbook]
    if runbooks:
        lines += [
            "",
            "### Runbooks: the operators' procedure for these entities and signals",
            "Follow a runbook's steps for what it covers. If you depart from one (a step does not apply, or "
            "the facts call for something else), say so in your answer and why.",
            "",
            *(_note_entry(note) for note in runbooks),
        ]
    if facts:
        lines += ["", "### Notes", "", *(_note_entry(note) for note in facts)]
    if found.left_out:
        named = "; ".join(f"[note {note.id}] {note.title}" for note in found.left_out)
        lines += ["", f"Also matching, left out for length (ask the operator, or read them on the Notes page): {named}"]
    return "\n".join(lines).rstrip()


def recall_for_turn(*, turn_id: uuid.UUID, question: str, earlier: str = "") -> str:
    """Recall the notes for a turn, record on the turn what it was given, and return the block."""
    found = recall(question, earlier=earlier)
    if found.given:
        Turn.objects.filter(pk=turn_id).update(notes_given=[note.given() for note in found.given])
    return found.text


def earlier_question(messages: list[tuple[str, list[dict[str, object]]]]) -> str:
    """The text of the question before the turn's own (the last user message): "" for a first turn."""
    for role, content in reversed(messages[:-1]):
        if role != "user":
            continue
        texts = [str(block.get("text") or "") for block in content if block.get("type") == "text"]
        said = "\n".join(text for text in texts if text and not text.startswith("[Hermes:"))
        if said:
            return said
    return ""
