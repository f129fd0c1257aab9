"""The judge: a model that decides, item by item, what an answer states.

One request per result, through Hermes's own client (`agent.llm.llm_client`): the question, the
answer, and the tool results the turn read (bounded), so the judge can tell a fact the tools
support from a confident wrong diagnosis. Each expected fact and each forbidden claim is its own
item with its own verdict and reason, so a case scores partially (2 of 3 facts) and a wrong extra
claim costs exactly its item — a single pass/fail verdict hides both.

The answer format is JSON, parsed strictly: every item id exactly once, `stated` a boolean, a
reason. A malformed answer is asked for once more, saying what was wrong; a second failure is a
`JudgeFailed` — reported as the judge's failure, never as the model's.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

from agent.llm import llm_client, llm_error_describe

JUDGE_MAX_TOKENS = 4000
JUDGE_TIMEOUT_SECONDS = 180.0
# How much of the turns' tool results the judge sees: enough to check a claim, bounded in cost.
EVIDENCE_CHARS = 24_000
EVIDENCE_CALL_CHARS = 4_000

SYSTEM = """You grade the answer of an operations assistant for a homelab (Hermes, which reads the \
Oikos control plane through tools). You are given the question, the tool results the assistant \
read, its answer, and a list of items. For EACH item decide only whether the ANSWER states it \
(in any wording; a paraphrase counts, a hedge such as "might" counts as stated, a negation does \
not). Items of kind "fact" are expected facts; items of kind "forbidden" are claims the answer \
must not make — still report whether the answer states them. Judge the answer, not the tool \
results: a fact the tools show but the answer omits is not stated.

Reply with JSON only, no prose and no code fence, exactly:
{"items": [{"id": "<item id>", "stated": true or false, "reason": "<one short sentence>"}]}
with every item id exactly once."""


class JudgeFailed(Exception):
    """The judge gave no usable verdict (API failure, or malformed JSON twice)."""


@dataclass(frozen=True)
class JudgeItem:
    id: str
    kind: str  # "fact" | "forbidden"
    text: str


@dataclass
class Verdict:
    # [{"kind", "text", "ok", "reason"}]: ok means the fact is stated / the forbidden claim is not.
    judged: list[dict[str, Any]]
    tokens: int
    usage: dict[str, int]

    @property
    def score_items(self) -> tuple[int, int]:
        return sum(1 for item in self.judged if item["ok"]), len(self.judged)


def judge_items(facts: list[str], forbidden: list[str]) -> list[JudgeItem]:
    return [JudgeItem(f"F{n}", "fact", text) for n, text in enumerate(facts, 1)] + [
        JudgeItem(f"X{n}", "forbidden", text) for n, text in enumerate(forbidden, 1)
    ]


def judge_prompt(*, question: str, answer: str, evidence: list[tuple[str, str]], items: list[JudgeItem]) -> str:
    """The user message: tagged sections a grader (or the scripted judge in tests) can find."""
    shown: list[str] = []
    left = EVIDENCE_CHARS
    for call, result in evidence:
        if left <= 0:
            shown.append("(further tool results left out)")
            break
        text = result[: min(EVIDENCE_CALL_CHARS, left)]
        left -= len(text)
        shown.append(f"### {call}\n{text}")
    listing = json.dumps([{"id": item.id, "kind": item.kind, "text": item.text} for item in items], indent=1)
    return (
        f"<question>\n{question}\n</question>\n\n"
        f"<tool_results>\n{chr(10).join(shown) or '(no tool was called)'}\n</tool_results>\n\n"
        f"<answer>\n{answer}\n</answer>\n\n"
        f"<items>\n{listing}\n</items>"
    )


def verdict_parse(text: str, items: list[JudgeItem]) -> list[dict[str, Any]]:
    """The judged items from the judge's reply; `ValueError` saying what is wrong with it."""
    body = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ValueError(f"the reply is not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise ValueError('the reply must be an object with an "items" list')
    by_id: dict[str, dict[str, Any]] = {}
    for entry in data["items"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise ValueError('each item must be an object with a string "id"')
        if not isinstance(entry.get("stated"), bool):
            raise ValueError(f'item {entry["id"]}: "stated" must be true or false')
        if entry["id"] in by_id:
            raise ValueError(f"item {entry['id']} appears twice")
        by_id[entry["id"]] = entry
    expected = {item.id for item in items}
    if set(by_id) != expected:
        missing, extra = sorted(expected - set(by_id)), sorted(set(by_id) - expected)
        raise ValueError(f"item ids differ: missing {missing or 'none'}, unknown {extra or 'none'}")
    judged = []
    for item in items:
        entry = by_id[item.id]
        stated = entry["stated"]
        judged.append(
            {
                "kind": item.kind,
                "text": item.text,
                "ok": stated if item.kind == "fact" else not stated,
                "reason": str(entry.get("reason") or "")[:500],
            }
        )
    return judged


async def judge_run(
    *, model: str, question: str, answer: str, evidence: list[tuple[str, str]], items: list[JudgeItem]
) -> Verdict:
    """Ask `model` for a verdict on every item; one retry on a malformed reply. Raises `JudgeFailed`."""
    if not items:
        return Verdict(judged=[], tokens=0, usage={})
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": judge_prompt(question=question, answer=answer, evidence=evidence, items=items)}
    ]
    usage: dict[str, int] = {}
    problem = ""
    for _attempt in range(2):
        try:
            reply = await asyncio.wait_for(
                llm_client().messages.create(
                    model=model,
                    max_tokens=JUDGE_MAX_TOKENS,
                    system=SYSTEM,
                    messages=messages,  # type: ignore[arg-type]
                ),
                JUDGE_TIMEOUT_SECONDS,
            )
        except TimeoutError:
            raise JudgeFailed(f"the judge ({model}) did not answer within {JUDGE_TIMEOUT_SECONDS:g} s") from None
        except Exception as exc:
            raise JudgeFailed(f"the judge ({model}) failed: {llm_error_describe(exc, model=model)}") from None
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            usage[key] = usage.get(key, 0) + int(getattr(reply.usage, key, 0) or 0)
        text = "".join(block.text for block in reply.content if block.type == "text")
        try:
            judged = verdict_parse(text, items)
        except ValueError as exc:
            problem = str(exc)
            messages += [
                {"role": "assistant", "content": text or "(empty)"},
                {"role": "user", "content": f"That reply cannot be used: {problem}. Reply again with the JSON only."},
            ]
            continue
        return Verdict(judged=judged, tokens=sum(usage.values()), usage=usage)
    raise JudgeFailed(f"the judge ({model}) gave no usable verdict twice: {problem}")
