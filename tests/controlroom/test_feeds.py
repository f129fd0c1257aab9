"""The decision forms a page shows, shared by its feeds: one per approval, each drawn once."""

from __future__ import annotations

from controlroom import fragments
from controlroom.feeds import ApprovalForms
from oikos.rail import ApprovalState
from transcript.view import ApprovalItem

PENDING = ApprovalState(approval_id="ap-1", status="pending")
DECIDED = ApprovalState(approval_id="ap-2", status="approved")


def test_a_form_is_appended_once_however_many_feeds_show_its_approval() -> None:
    forms = ApprovalForms()

    first = forms.new([PENDING, DECIDED], [])

    assert 'hx-swap-oob="beforeend:#approval-forms"' in first and "ap-1" in first and "ap-2" not in first
    assert forms.new([PENDING], []) == ""


def test_a_card_oikos_has_not_confirmed_gets_no_form_and_the_rail_s_word_wins() -> None:
    forms = ApprovalForms()
    forms.inline["ap-1"] = ApprovalItem(
        approval_id="ap-1", execution_id="ex-1", target="service:caddy", action="restart", risk_class="low", status=""
    )
    unconfirmed = forms.inline_candidates({}, [])
    decided_in_the_rail = forms.inline_candidates(
        {"ap-1": PENDING}, [ApprovalState(approval_id="ap-1", status="denied")]
    )

    assert unconfirmed == []
    assert [approval.approval_id for approval in forms.inline_candidates({"ap-1": PENDING}, [])] == ["ap-1"]
    assert decided_in_the_rail == []


def test_drawing_every_form_again_keeps_one_per_approval() -> None:
    forms = ApprovalForms()

    html = forms.replace([PENDING, PENDING])

    assert html == fragments.approval_forms_replace([PENDING]) and forms.shown == {"ap-1"}
