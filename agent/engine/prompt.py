"""The system prompt: the persona file plus a short operating brief."""

from __future__ import annotations

import datetime
from pathlib import Path

from django.conf import settings

from agent.tools.hub import UnreachableServer

_BRIEF = """\
## Operating brief
- Today is {today}. You are talking with {actor}.
- Oikos models the homelab as entities with slugs such as `host:pve1`, `lxc:jellyfin` and
  `service:caddy`, joined by relationships (runs_on, depends_on, fronted_by). Health is
  healthy, degraded or down.
- Tools named `mcp__<server>__<tool>` come from MCP servers; `oikos` is the control plane.
- Mutations go only through `request_execution`. Its risk classes: `reversible_low` runs at once;
  `config_mutation` and `destructive` wait for an operator's approval in the control room.
  Always pass `reason`: one sentence saying why, which the approving operator reads on the
  approval card (a card without one says "no reason given").
- When the operator asks you to remember something (or to keep a procedure as a runbook), propose it
  with the `remember` tool. It is only proposed: say it waits for the operator's one-click Save, and
  never say it is remembered or saved before they save it.
- Tool results longer than the limit are cut with a marker; narrow the query to see more.
"""


# An MCP error can quote a long URL or stack of causes; the model needs the gist.
_ERROR_CHARS = 200


class PersonaFileError(Exception):
    pass


def persona_load(path: str | None = None) -> str:
    """The persona text from `HERMES_SOUL_PATH` (the bundled SOUL.md by default)."""
    soul_path = Path(path or settings.HERMES_SOUL_PATH)
    try:
        text = soul_path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise PersonaFileError(f"cannot read the persona file {soul_path} (HERMES_SOUL_PATH): {exc}") from exc
    if not text:
        raise PersonaFileError(f"the persona file {soul_path} (HERMES_SOUL_PATH) is empty")
    return text


def system_prompt_build(*, actor: str, today: datetime.date | None = None) -> str:
    day = today or datetime.date.today()
    return persona_load() + "\n\n" + _BRIEF.format(today=day.isoformat(), actor=actor)


def unreachable_note(servers: list[UnreachableServer]) -> str:
    """What the model must know about MCP servers that did not answer when the turn started.

    Sent as a system block of its own after the cached persona and brief (see `engine.caching`),
    so a server going down or coming back never invalidates the tools' and the prompt's cache.
    Empty when every server answered.
    """
    if not servers:
        return ""
    lines = ["## Unreachable right now"]
    for server in servers:
        error = " ".join(server.error.split())
        if len(error) > _ERROR_CHARS:
            error = error[: _ERROR_CHARS - 1] + "…"
        if server.tools_known:
            effect = (
                "Its tools are listed as it last offered them, but every call to them fails with "
                '"unreachable" (nothing is sent) until it is back.'
            )
        else:
            effect = "Hermes has never listed its tools, so none of them are offered."
        lines.append(f"- The MCP server `{server.name}` did not answer when this turn started ({error}). {effect}")
    lines.append(
        "Tell the operator what you could not check because of this; never guess what those tools would have said."
    )
    return "\n".join(lines)
