"""The incident note cannot carry live HTML: whatever the session held, rendered by markdown-it-py
(CommonMark) and by cmark-gfm (GitHub's renderer), both with raw HTML let through, it has no HTML
element or attribute of its own, no link but http(s) (and the mail and chat addresses cmark-gfm
links by itself), and no image. Its one HTML of its own, the `<details>` folding a long result,
carries no attribute, and its `<summary>` only text."""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal
from html.parser import HTMLParser
from urllib.parse import urlsplit

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from transcript.export import ApprovalFact, DecisionFact, SessionExport, StepFact, ToolCallFact, TurnFact
from transcript.export_escape import quoted
from transcript.export_markdown import PREVIEW_CHARS, session_markdown

# The two escapes that carried HTML through the earlier note: a backslash before a backtick (the
# note saw a code span, a renderer an escaped backtick), and a backtick in a fence opener (the note
# saw a fence, a renderer a paragraph).
BACKSLASH_BEFORE_BACKTICK = "look: \\`<img src=x onerror=alert(1)>` done"
BACKTICK_IN_FENCE_OPENER = "```a`b\n<img src=x onerror=alert(2)>\n```"

HOSTILE = [
    BACKSLASH_BEFORE_BACKTICK,
    BACKTICK_IN_FENCE_OPENER,
    "<script>alert(3)</script>",
    "[click](javascript:alert(4)) and [ref][r]\n\n[r]: javascript:alert(5)",
    "![tracker](https://evil.example/pixel.png) ![x][i]\n\n[i]: https://evil.example/i.png",
    "<javascript:alert(6)> <https://fine.example/> <a href='javascript:alert(7)'>a</a>",
    "<!--\n-->\n    <img src=x onerror=alert(8)>",
    "text\n<div onclick=alert(9)>\n\n*x*\n</div>",
    "~~~\n<b>in tildes</b>\n~~~\n<b>after</b>",
    "- item <b>x</b>\n  ```\n  <i>code</i>\n  ```\n- [l](vbscript:x)",
    "| a | b |\n|---|---|\n| <img src=x> | [c](data:text/html,x) |",
    "&lt;script&gt; &#60;img src=x&#62; \\<b>",
    # cmark-gfm's autolinks take a backslash, or a code span's opening backticks, into the URL.
    "https://a.example/p.png\\<img src=x onerror=alert(10)>",
    "see https://a.example/x`<img src=x onerror=alert(11)>` and www.b.example`<b>x</b>`",
]

PIECES = [
    "`", "``", "```", "````", "~~~", "\\", "\n", "\n\n", "    ", "> ", "- ", "1. ", "|", "*", "_", "!", "[", "]",
    "(", ")", "<", ">", "&", "#", ":", "'", '"', "=", "a", "img", "script", " src=x", " onerror=alert(1)",
    "javascript:alert(1)", "https://evil.example/p.png", "<img src=x onerror=alert(1)>", "<b>", "</b>", "<!--",
    "-->", "[x](", "![x](", "]: ", "<http://a.example>", "&lt;", "&#60;", "<?", "<![CDATA[",
    "https://a.example", "www.b.example", "c@d.example", "xmpp:", "\u00a0", "|---|", ";",
]  # fmt: skip

ELEMENTS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre", "blockquote",
    "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
    # The note's own folds of long results (`export_escape.folded`), with no attribute.
    "details", "summary",
}  # fmt: skip
ATTRIBUTES = {("a", "href"), ("code", "class"), ("pre", "lang"), ("ol", "start"), ("th", "align"), ("td", "align")}
ATTRIBUTES |= {("th", "style"), ("td", "style")}
LINK_SCHEMES = {"http", "https", "mailto", "xmpp"}

_markdown_it = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_GFM = ["table", "strikethrough", "autolink", "tasklist"]


class _LiveHTML(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.in_summary = False
        self.details = 0

    def handle_endtag(self, tag: str) -> None:
        self.in_summary = self.in_summary and tag != "summary"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ELEMENTS:
            self.problems.append(f"element <{tag}>")
        if self.in_summary:
            self.problems.append(f"element <{tag}> in a <summary>")
        self.in_summary = self.in_summary or tag == "summary"
        self.details += tag == "details"
        for name, value in attrs:
            if (tag, name) not in ATTRIBUTES:
                self.problems.append(f"attribute {name} on <{tag}>")
            elif name == "href" and urlsplit(value or "").scheme.lower() not in LINK_SCHEMES:
                self.problems.append(f"link to {value!r}")
            elif name == "style" and not (value or "").startswith("text-align:"):
                self.problems.append(f"style {value!r}")

    def handle_comment(self, data: str) -> None:
        self.problems.append("comment")

    def handle_pi(self, data: str) -> None:
        self.problems.append("processing instruction")

    def unknown_decl(self, data: str) -> None:
        self.problems.append("declaration")


def _live_html(markdown: str, *, folds: int | None = None) -> list[str]:
    """What in `markdown`, rendered, is live HTML; with `folds`, also a count of `<details>` other
    than the note's own (content that opened a fold of its own)."""
    problems = []
    renderings = [
        ("markdown-it", _markdown_it.render(markdown)),
        ("cmark-gfm", cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)),
        # cmark-gfm's extensions are not in the helper above when raw HTML is allowed: render with them too.
        (
            "cmark-gfm extensions",
            cmarkgfm.markdown_to_html_with_extensions(markdown, options=Options.CMARK_OPT_UNSAFE, extensions=_GFM),
        ),
    ]
    for renderer, html in renderings:
        parser = _LiveHTML()
        parser.feed(html)
        parser.close()
        problems += [f"{renderer}: {problem}" for problem in parser.problems]
        if folds is not None and parser.details != folds:
            problems.append(f"{renderer}: {parser.details} <details>, the note made {folds}")
    return problems


def _folds(text: str) -> int:
    """The folds `session_markdown(_export(text))` makes: its cut result, and its arguments when long."""
    arguments = json.dumps({text: text}, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))
    return 1 + (len(arguments) > PREVIEW_CHARS)


MOMENT = datetime.datetime(2026, 12, 6, 7, 0, tzinfo=datetime.UTC)


def _export(text: str) -> SessionExport:
    """A session every outside field of which holds `text`."""
    call = ToolCallFact(
        server=text, tool=text, arguments={text: text}, state=text, duration_ms=3, result=text, result_complete=False
    )
    decision = DecisionFact(operator=text, decision=text, outcome=text, decided_at=MOMENT, reason=text, detail=text)
    approval = ApprovalFact(
        approval_id=text,
        execution_id=text,
        target=text,
        action=text,
        risk_class=text,
        status_requested=text,
        message=text,
        decisions=[decision],
    )
    turn = TurnFact(
        correlation_id=uuid.uuid4(),
        asked_by=text,
        question=text,
        started_at=MOMENT,
        finished_at=MOMENT,
        status=text,
        stop_reason=text,
        model=text,
        usage={"input_tokens": 1},
        tokens_total=1,
        cost_usd=Decimal("0.01"),
        steps=[
            StepFact(kind="answer", text=text),
            StepFact(kind="tool_call", tool_call=call),
            StepFact(kind="approval", approval=approval),
            StepFact(kind="notice", text=text),
            StepFact(kind="answer", text=text),
        ],
    )
    return SessionExport(
        id=uuid.uuid4(),
        title=text,
        actor=text,
        origin=text,
        created_at=MOMENT,
        last_active_at=MOMENT,
        turns=[turn],
        tokens_total=1,
        cost_usd=Decimal("0.01"),
    )


class TestTheIssuesEscapes:
    @pytest.mark.parametrize("text", [BACKSLASH_BEFORE_BACKTICK, BACKTICK_IN_FENCE_OPENER])
    def test_an_answer_cannot_smuggle_an_element_past_the_quote(self, text: str) -> None:
        assert _live_html(quoted(text)) == []

    @pytest.mark.parametrize("text", HOSTILE)
    def test_no_field_of_a_session_renders_live_html_a_script_link_or_an_image(self, text: str) -> None:
        assert _live_html(session_markdown(_export(text)), folds=_folds(text)) == []


class TestWhatStaysReadable:
    def test_prose_links_and_code_read_as_written(self) -> None:
        answer = "See https://docs.example/wal for `a[0] < b` & more.\n\n```sh\necho '<b>'\n```"

        html = cmarkgfm.github_flavored_markdown_to_html(quoted(answer), options=Options.CMARK_OPT_UNSAFE)

        assert '<a href="https://docs.example/wal">https://docs.example/wal</a>' in html
        assert "<code>a[0] &lt; b</code> &amp; more." in html
        assert "<code>echo '&lt;b&gt;'\n</code>" in html

    def test_an_image_is_text_and_its_address_at_most_a_link(self) -> None:
        html = _markdown_it.render(quoted("![graph](https://evil.example/pixel.png)"))

        assert "<img" not in html and "![graph](https://evil.example/pixel.png)" in html


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=30).map("".join))
def test_no_hostile_text_renders_live_html_in_an_answer(text: str) -> None:
    assert _live_html(quoted(text)) == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=20).map("".join))
def test_no_hostile_text_renders_live_html_anywhere_in_the_note(text: str) -> None:
    assert _live_html(session_markdown(_export(text)), folds=_folds(text)) == []


class TestMetricSparklines:
    @pytest.mark.parametrize("text", HOSTILE)
    def test_a_metric_drawn_as_text_carries_no_live_html_from_its_names(self, text: str) -> None:
        series = {
            "metric": text,
            "slug": text,
            "unit": text,
            "points": [[1_765_000_000 + 60 * i, i % 7] for i in range(30)],
        }
        export = _export("plain")
        call = ToolCallFact(
            server="oikos", tool="query_metrics", arguments={}, state="ok", duration_ms=3,
            result=json.dumps(series), result_complete=True,
        )  # fmt: skip
        export.turns[0].steps[1] = StepFact(kind="tool_call", tool_call=call)

        note = session_markdown(export)

        assert "▁" in note and "█" in note
        assert _live_html(note) == []
