"""Input of the control room's POSTs and filters: validated here, so views see only clean values."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.validators import RegexValidator

from agent.models import Activity

PLACES = (("home", "home"), ("drawer", "drawer"))
# Oikos ids look like apr-0001 / exe-0001; anything else is refused before it reaches Oikos.
OIKOS_ID = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$", "Not an Oikos id.")


class AskForm(forms.Form):
    message = forms.CharField(strip=True, error_messages={"required": "Type a question for Hermes first."})
    session = forms.UUIDField(required=False)
    place = forms.ChoiceField(choices=PLACES, required=False)
    # Checked against HERMES_MODELS by the engine, which says which models are offered.
    model = forms.CharField(max_length=100, required=False, strip=True)

    def clean_message(self) -> str:
        message: str = self.cleaned_data["message"]
        limit = settings.HERMES_MAX_MESSAGE_CHARS
        if len(message) > limit:
            raise forms.ValidationError(f"The message has {len(message):,} characters; the limit is {limit:,}.")
        return message

    def clean_place(self) -> str:
        return self.cleaned_data.get("place") or "home"


class DecisionForm(forms.Form):
    approval_id = forms.CharField(max_length=100, validators=[OIKOS_ID])
    execution_id = forms.CharField(max_length=100, required=False, validators=[OIKOS_ID])
    decision = forms.ChoiceField(choices=(("approve", "approve"), ("deny", "deny")))
    reason = forms.CharField(max_length=500, required=False, strip=True)


class LedgerFilterForm(forms.Form):
    turn = forms.UUIDField(required=False)
    session = forms.UUIDField(required=False)
    server = forms.CharField(max_length=100, required=False)
    tool = forms.CharField(max_length=200, required=False)
    only_errors = forms.BooleanField(required=False)
    state = forms.ChoiceField(choices=[("", "any"), *Activity.State.choices], required=False)
    # Keyset cursors (`selectors.ledger_page`): the page after / before the row with this id.
    older = forms.IntegerField(min_value=1, required=False)
    newer = forms.IntegerField(min_value=1, required=False)
