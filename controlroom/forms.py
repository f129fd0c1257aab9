"""Input of the control room's POSTs and filters: validated here, so views see only clean values."""

from __future__ import annotations

import datetime

from django import forms
from django.conf import settings
from django.core.validators import RegexValidator

from agent.models import Activity
from agent.search.query import LIMIT_MAX, QUERY_MAX_CHARS, SearchFilters
from watch.models import Investigation

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


class InvestigationFilterForm(forms.Form):
    entity = forms.CharField(max_length=200, required=False)
    state = forms.ChoiceField(choices=[("", "any"), *Investigation.State.choices], required=False)
    kind = forms.CharField(max_length=100, required=False)
    page = forms.IntegerField(min_value=1, required=False)


class SearchForm(forms.Form):
    q = forms.CharField(max_length=QUERY_MAX_CHARS, required=False, strip=True)
    since = forms.DateField(required=False)
    # Inclusive: hits up to the end of this day (UTC).
    until = forms.DateField(required=False)
    actor = forms.CharField(max_length=150, required=False, strip=True)
    origin = forms.CharField(max_length=20, required=False, strip=True)
    tool = forms.CharField(max_length=200, required=False, strip=True)

    def filters(self) -> SearchFilters:
        """The search this form asks for (call after `is_valid()`)."""
        data = self.cleaned_data
        since: datetime.date | None = data["since"]
        until: datetime.date | None = data["until"]
        return SearchFilters(
            query=data["q"],
            since=datetime.datetime.combine(since, datetime.time(), tzinfo=datetime.UTC) if since else None,
            until=(
                datetime.datetime.combine(until, datetime.time(), tzinfo=datetime.UTC) + datetime.timedelta(days=1)
                if until
                else None
            ),
            actor=data["actor"],
            origin=data["origin"],
            tool=data["tool"],
            limit=LIMIT_MAX,
        )
